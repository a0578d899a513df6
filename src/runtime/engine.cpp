#include "runtime/engine.h"

#include <sys/stat.h>

#include <chrono>
#include <set>

#include "core/log.h"
#include "format/fragments.h"
#include "format/hf_gguf_source.h"
#include "io/concat_source.h"
#include "io/direct_file.h"
#include "model/linear.h"
#include "quant/core_cache.h"
#include "remote/location.h"

namespace deltafin {

namespace {
// Loads at least this large (bytes read into RAM) draw a progress line.
constexpr uint64_t kLoadProgressBytes = uint64_t(1) << 30;

// The store the memory plan asks for: null (resident) unless experts stream, else a
// streaming store with the plan's expert cache (and the core pager when the core
// does not fit). A remote model always streams (through its disk cache).
Result<std::unique_ptr<ExpertStore>> make_planned_store(ModelFile& file, const EngineOptions& opts,
                                                        const MemoryPlan& plan, StreamingExpertStore** streaming,
                                                        RemoteModel* remote, std::unique_ptr<CorePager>* pager) {
  if (!plan.streaming) return std::unique_ptr<ExpertStore>();
  StreamingOptions so = opts.stream;
  so.cache_bytes = plan.expert_cache;
  if (*pager) DF_LOG_WARN("the core does not fit --mem; {}", (*pager)->describe());
  if (so.profile_path == "auto") so.profile_path = remote ? remote->dir() + "/profile" : default_profile_path(file, opts.env.profile_base);
  if (remote) so.disk_cache = &remote->experts();
  so.layout = expert_layout();
  DF_ASSIGN(auto store, make_streaming_expert_store(file, find_expert_layers(file), so));
  *streaming = store.get();
  if (*pager) {
    DF_TRY((*pager)->start());
    file.set_tensor_mapper(pager->get());
  }
  return std::unique_ptr<ExpertStore>(std::move(store));
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::open(const std::string& path, const EngineOptions& opts) {
  if (opts.threads > kMaxThreads)
    return make_error("{} threads asked for; at most {} are supported (-t/--threads)", opts.threads, kMaxThreads);
  auto e = std::make_unique<Engine>();
  if (is_remote_location(path)) {
    DF_ASSIGN(ModelLocation loc, parse_model_location(path, opts.env));
    RemoteOptions ro = opts.remote;
    if (ro.cache_dir.empty()) ro.cache_dir = opts.env.cache_dir;
    DF_ASSIGN(e->remote_, RemoteModel::open(loc, ro));
    DF_ASSIGN(e->file_, e->remote_->open_file());
    DF_TRY(e->remote_->attach(*e->file_, find_expert_layers(*e->file_)));
    DF_TRY(e->remote_->ensure_core(opts.progress));
  } else {
    // Several -m options: the byte fragments of one GGUF (format/fragments.h).
    const std::string first = first_fragment(path);
    const bool fragments = first.size() != path.size();
    struct stat st;
    if (::stat(first.c_str(), &st) != 0)
      return make_error("model file '{}' does not exist (generate one with `deltafin synth -o {}` or "
                        "give the path of a .gguf file)", first, first);
    if (S_ISDIR(st.st_mode) && fragments)
      return make_error("'{}' is a directory; several -m options name the byte fragments of one .gguf file", first);
    if (S_ISDIR(st.st_mode) && !is_local_hf_folder(path))
      return make_error("'{}' is a directory without config.json; give a .gguf file or a Hugging Face model folder",
                        path);
    // A Hugging Face folder is read as the GGUF it converts to (format/hf_gguf_source.h).
    DF_ASSIGN(e->file_, S_ISDIR(st.st_mode) ? open_local_hf_model(path) : ModelFile::open(path, local_file_opener()));
  }
  if (!opts.core_type.empty()) {
    // Re-encoded from the file's core (a remote model's: from its disk cache, just
    // fetched), once; later runs reuse it.
    const std::string dir = opts.remote.cache_dir.empty() ? opts.env.cache_dir : opts.remote.cache_dir;
    const auto t0 = std::chrono::steady_clock::now();
    DF_ASSIGN(CoreCacheInfo core, cached_core(*e->file_, opts.core_type, dir, opts.verify_core));
    if (core.made)
      DF_LOG_INFO("core: re-encoded to {} in {:.1f} s ({:.1f} MiB, {})", core.type,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  core.bytes / 1048576.0, core.path);
    else
      DF_LOG_INFO("core: {} from the cache ({:.1f} MiB, {})", core.type, core.bytes / 1048576.0, core.path);
    DF_TRY(e->file_->overlay(core.path, local_file_opener()));
  }
  e->pool_ = std::make_unique<ThreadPool>(opts.threads > 0 ? opts.threads : default_thread_count());
  LoadOptions lo;
  lo.pool = e->pool_.get();
  // The memory plan (runtime/memory_budget.h); a store given by the caller is its own.
  DF_ASSIGN(e->sizes_, model_memory(*e->file_, e->remote_ != nullptr, 0));
  if (e->remote_) e->sizes_.core_files = e->remote_->core_files();
  if (!opts.make_store) {
    e->request_.mem = opts.mem_bytes;
    e->request_.reserve = opts.reserve_bytes;
  } else {
    e->sizes_.remote = false;
  }
  DF_ASSIGN(e->plan_, plan_memory(*e->file_, e->sizes_, e->request_, &e->pager_));
  e->request_.available = e->plan_.available;  // the sequences are planned on the same numbers
  if (opts.make_store) {
    DF_ASSIGN(lo.experts, opts.make_store(*e->file_));
  } else {
    DF_ASSIGN(lo.experts,
              make_planned_store(*e->file_, opts, e->plan_, &e->streaming_, e->remote_.get(), &e->pager_));
  }
  lo.pager = e->pager_.get();  // the layer loop pages the streamed core layers
  // A progress line while a large core is read into RAM (the experts too when they
  // are resident); a small one loads before a line would help.
  std::unique_ptr<Progress> bar;
  if (opts.progress) {
    std::set<std::string> streamed;
    if (lo.experts)
      for (const ExpertLayerInfo& l : find_expert_layers(*e->file_)) streamed.insert({l.gate_name, l.up_name, l.down_name});
    uint64_t to_read = 0;
    for (const auto& [name, ref] : e->file_->tensors())
      if (!streamed.count(name)) to_read += ref.info->bytes;
    if (to_read >= kLoadProgressBytes) bar = opts.progress("loading the model", to_read);
  }
  e->file_->set_read_progress(bar.get());
  auto loaded = load_model(*e->file_, std::move(lo));
  e->file_->set_read_progress(nullptr);
  bar.reset();
  DF_ASSIGN(e->model_, std::move(loaded));
  e->file_->set_tensor_mapper(nullptr);
  if (e->remote_) {
    for (const std::string& core : e->remote_->core_files()) drop_file_cache(core);
  } else if (e->streaming_) {
    // The core was read through the page cache; the copy the kernel kept is not ours
    // to lean on.
    for (int s = 0; s < e->file_->shard_count(); ++s) {
      ByteSource& src = e->file_->source(s);
      if (auto* c = dynamic_cast<ConcatSource*>(&src))
        for (int k = 0; k < c->count(); ++k) drop_file_cache(c->part(k).name());
      else
        drop_file_cache(src.name());
    }
  }
  return e;
}

Status Engine::plan_sequences(const SequenceRequest& seqs) {
  if (sequences_planned_) return make_error("the sequences' memory is planned once per engine");
  ModelMemory m = sizes_;
  m.state_bytes = seqs.n_states > 0 ? model_->state_bytes(seqs.n_ctx) : 0;
  m.batch_token_bytes = batch_bytes_per_token(model_->info());
  MemoryRequest r = request_;
  r.seqs = seqs;
  DF_ASSIGN(MemoryPlan p, plan_memory(m, r));
  p.core_resident = plan_.core_resident;  // the core pager's split, made at open
  p.core_paged = plan_.core_paged;
  p.core_reread = plan_.core_reread;
  if (streaming_) DF_TRY(take_sequence_memory(*streaming_, p));
  plan_ = p;
  sizes_ = m;
  sequences_planned_ = true;
  return {};
}

}  // namespace deltafin
