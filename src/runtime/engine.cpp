#include "runtime/engine.h"

#include <sys/stat.h>

#include <set>

#include "core/log.h"
#include "io/direct_file.h"
#include "remote/location.h"

namespace deltafin {

namespace {
constexpr uint64_t kReserveBase = uint64_t(64) << 20;
constexpr double kReserveShare = 0.03;
// Loads at least this large (bytes read into RAM) draw a progress line.
constexpr uint64_t kLoadProgressBytes = uint64_t(1) << 30;
}  // namespace

uint64_t default_reserve_bytes(uint64_t mem) { return kReserveBase + uint64_t(double(mem) * kReserveShare); }

uint64_t effective_reserve_bytes(const EngineOptions& opts) {
  if (opts.reserve_bytes) return opts.reserve_bytes;
  return default_reserve_bytes(opts.mem_bytes == EngineOptions::kMemAuto || opts.mem_bytes == 0 ? default_mem_budget()
                                                                                                : opts.mem_bytes);
}

namespace {

// The store for a memory budget: null (resident) when auto and the model fits,
// else a streaming store with what the budget leaves after the core.
// A remote model always streams (through its disk cache), whatever fits.
Result<std::unique_ptr<ExpertStore>> make_budget_store(ModelFile& file, const EngineOptions& opts,
                                                       StreamingExpertStore** streaming, RemoteModel* remote,
                                                       std::unique_ptr<CorePager>* pager) {
  std::vector<ExpertLayerInfo> layers = find_expert_layers(file);
  if (layers.empty()) return std::unique_ptr<ExpertStore>();
  const bool automatic = opts.mem_bytes == EngineOptions::kMemAuto || (remote && opts.mem_bytes == 0);
  const uint64_t mem = automatic ? default_mem_budget() : opts.mem_bytes;
  if (automatic && file.total_bytes() <= mem && !remote) return std::unique_ptr<ExpertStore>();
  DF_ASSIGN(ExpertIndex ix, ExpertIndex::build(file, layers));
  const uint64_t base = opts.reserve_bytes ? opts.reserve_bytes : kReserveBase;
  const double share = opts.reserve_bytes ? 0.0 : kReserveShare;
  const uint64_t reserve = opts.reserve_bytes ? opts.reserve_bytes : default_reserve_bytes(mem);
  const uint64_t slot = expert_slot_bytes(ix);
  const double MiB = 1024.0 * 1024.0;
  const uint64_t least = uint64_t(double(ix.core_bytes() + base + slot) / (1.0 - share)) + 1;
  StreamingOptions so = opts.stream;
  // When the core does not fit, its layers stream too: the expert cache keeps a
  // quarter of what the reserve leaves (at least four experts), the core the rest:
  // its first layers resident, the others paged per layer (model/core_pager.h).
  const uint64_t avail = mem > reserve ? mem - reserve : 0;
  const uint64_t paged_cache = std::max(avail / 4, 4 * slot);
  const uint64_t paged_need = CorePager::least_bytes(file);
  if (mem >= least) {
    so.cache_bytes = mem - ix.core_bytes() - reserve;
  } else if (!remote && avail >= paged_cache + paged_need) {
    so.cache_bytes = paged_cache;
    DF_ASSIGN(*pager, CorePager::plan(file, avail - paged_cache));
    DF_LOG_WARN("the core does not fit --mem; {}", (*pager)->describe());
  } else {
    std::string paged;
    if (!remote) {
      const uint64_t avail_min = std::max(4 * slot + paged_need, paged_need / 3 * 4 + 4);
      paged = fmt::format(" (or at least {:.1f} MiB to stream the core's layers from the file as well, which is slower)",
                          (double(avail_min + base) / (1.0 - share) + 1) / MiB + 0.05);
    }
    return make_error("{}: a memory budget of {:.1f} MiB is too small: the resident core takes {:.1f} MiB, {:.1f} MiB "
                      "is kept for the KV cache and buffers, and one expert takes {:.3f} MiB: give --mem of at "
                      "least {:.1f} MiB{}",
                      file.path(), mem / MiB, ix.core_bytes() / MiB, reserve / MiB, slot / MiB, least / MiB + 0.05,
                      paged);
  }
  if (so.profile_path == "auto") so.profile_path = remote ? remote->dir() + "/profile" : default_profile_path(file, opts.env.profile_base);
  if (remote) so.fetcher = &remote->experts();
  DF_ASSIGN(auto store, make_streaming_expert_store(file, layers, so));
  *streaming = store.get();
  if (*pager) {
    store->set_layer_observer(pager->get());
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
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return make_error("model file '{}' does not exist (generate one with `deltafin synth -o {}` or "
                        "give the path of a .gguf file)", path, path);
    DF_ASSIGN(e->file_, ModelFile::open(path, local_file_opener()));
  }
  e->pool_ = std::make_unique<ThreadPool>(opts.threads > 0 ? opts.threads : default_thread_count());
  LoadOptions lo;
  lo.pool = e->pool_.get();
  if (opts.make_store) {
    DF_ASSIGN(lo.experts, opts.make_store(*e->file_));
  } else if (opts.mem_bytes > 0 || e->remote_) {
    DF_ASSIGN(lo.experts, make_budget_store(*e->file_, opts, &e->streaming_, e->remote_.get(), &e->pager_));
  }
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
    for (int s = 0; s < e->file_->shard_count(); ++s) drop_file_cache(fmt::format("{}/core-{}.bin", e->remote_->dir(), s + 1));
  } else if (e->streaming_) {
    // The core was read through the page cache; the copy the kernel kept is not ours
    // to lean on.
    for (int s = 0; s < e->file_->shard_count(); ++s) drop_file_cache(e->file_->source(s).name());
  }
  return e;
}

Result<uint64_t> Engine::reserve_states(int n_ctx, int n_states, uint64_t covered) {
  const uint64_t one = model_->state_bytes(n_ctx);
  if (n_states <= 0) return one;
  const uint64_t all = one > UINT64_MAX / uint64_t(n_states) ? UINT64_MAX : one * uint64_t(n_states);
  if (streaming_ == nullptr) {
    // Resident experts: no cache to take the states from, but no more than the
    // machine has either.
    const uint64_t avail = default_mem_budget();
    if (all > avail)
      return make_error("{} of {} positions would take {:.1f} MiB, more than the {:.1f} MiB of memory available",
                        n_states == 1 ? std::string("a sequence state") : fmt::format("{} sequence states", n_states),
                        n_ctx, double(all) / 1048576.0, double(avail) / 1048576.0);
    return one;
  }
  if (all <= covered) return one;
  auto r = streaming_->reserve_memory(all - covered);
  if (!r.ok())
    return make_error("{} of {} positions take{} {:.1f} MiB{}: {}",
                      n_states == 1 ? std::string("a sequence state") : fmt::format("{} sequence states", n_states),
                      n_ctx, n_states == 1 ? "s" : "", all / 1048576.0,
                      n_states == 1 ? std::string() : fmt::format(" ({:.2f} MiB each)", one / 1048576.0),
                      r.error().message);
  DF_LOG_DEBUG("{} sequence states of {} positions: {:.1f} MiB taken from the expert cache", n_states, n_ctx,
              r.value() / 1048576.0);
  return one;
}

}  // namespace deltafin
