// deltafin plan: what this machine will do with a model before anything is
// downloaded: the memory plan (runtime/memory_budget.h, the one run applies), which
// core layers stay resident, how many experts the RAM cache holds and the hit rate to
// expect, and predicted decode, prefill and cold-start times (runtime/predict.h) from
// the disk's measured random-read rate, the link's given rate and the CPU's measured
// weight throughput. Only headers are read (a remote model's come through its disk
// cache); --json prints one object.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "environment.h"
#include "core/thread_pool.h"
#include "format/model_file.h"
#include "model/model.h"
#include "quant/quantize_model.h"
#include "remote/location.h"
#include "remote_common.h"
#include "runtime/memory_budget.h"
#include "runtime/predict.h"
#include "runtime/probe.h"
#include "store/usage_profile.h"
#include "store/expert_index.h"
#include "store/streaming_store.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {

constexpr double kGB = 1e9, kMB = 1e6;
constexpr double kAssumedLinkMBps = 100;  // a remote model without --link

// A positive rate given on the command line, or an error naming the option.
Result<double> parse_rate(const std::string& s, const char* option, const char* unit) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !(v > 0) || !std::isfinite(v))
    return make_error("bad {} '{}' (expected a positive number of {}, e.g. 3.5)", option, s, unit);
  return v;
}

std::string secs(double s) {
  if (s <= 0) return "0 s";
  if (s < 1) return fmt::format("{:.0f} ms", s * 1000);
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

// The largest regular file under `dir` (a remote model's disk cache), for the disk probe.
std::string largest_file(const std::string& dir) {
  std::string best;
  uint64_t best_size = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const uint64_t n = it->file_size(ec);
    if (!ec && n > best_size) best_size = n, best = it->path().string();
  }
  return best;
}

// Lays over `file` the tensor directory its core would have re-encoded to
// `type_name` (--core-type): a sparse GGUF of headers and holes in the temporary file
// `tmp` (kept while the plan runs: the memory plan checks that the core's parts are
// local files it could page). Nothing is read or re-encoded.
Status overlay_core_shape(ModelFile& file, const std::string& type_name, const std::string& tmp) {
  QuantizeOptions qo;
  DF_TRY(parse_quantize_target(type_name, &qo));
  if (!qo.mix.empty())
    return make_error("--core-type {}: a mix is not a core type; give one type (e.g. Q8_0 or Q4_K)", type_name);
  qo.core_only = qo.headers_only = true;
  DF_TRY(quantize_model(file, tmp, qo, nullptr));
  return file.overlay(tmp, local_file_opener());
}

// Removes a file when the scope ends.
struct RemoveAtExit {
  std::string path;
  ~RemoveAtExit() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
};

}  // namespace

Command add_plan(CLI::App& app) {
  struct Opts {
    std::string model, mem, reserve, disk_read, link, profile, compute, core_type;
    int ctx = 4096, prefill = 512, threads = 0;
    double spec_accept = 0.6, probe_s = 3.0;
    bool json = false;
    RemoteCli remote;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("plan", "Predict what this machine will do with a model (memory, speed, disk), "
                                              "from its headers alone");
  sub->add_option("model,-m,--model", o->model, "Model: .gguf path, Hugging Face model folder, URL or hf:// location; -m PART1 -m PART2 ...: the byte fragments of one .gguf (NAME.part1ofN alone names its set)")->join()->required();
  sub->add_option("--mem", o->mem, "RAM budget (e.g. 64G; default: as run, 80% of the RAM available)");
  sub->add_option("--reserve", o->reserve, "Part of --mem kept for the KV cache, activations and the program (as run)");
  sub->add_option("--disk-read", o->disk_read,
                  "Disk random-read rate in GB/s at the expert size (default: measured for a few seconds on the disk "
                  "holding the model or its cache directory)");
  sub->add_option("--link", o->link,
                  fmt::format("Network rate in MB/s for a remote model (default: {:.0f}, an assumption)",
                              kAssumedLinkMBps));
  sub->add_option("--compute", o->compute,
                  "CPU weight rate in GB/s of one-token matrix products (default: measured for 0.3 s per type)");
  sub->add_option("-c,--ctx,--ctx-size", o->ctx, "Context size of the planned sequence")
      ->check(CLI::Range(1, kMaxCtxSize))
      ->capture_default_str();
  sub->add_option("--prefill", o->prefill, "Prompt tokens whose prefill time to predict")
      ->check(CLI::Range(0, kMaxCtxSize))
      ->capture_default_str();
  sub->add_option("--spec-accept", o->spec_accept, "Acceptance rate of one drafted token for the speculative figure")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--profile", o->profile,
                  "Expert usage profile for the hit rate (default: the one run records for this model, if any; "
                  "'none': assume uniform routing)");
  sub->add_option("-t,--threads", o->threads, "Threads (default: all, as run)")->check(CLI::Range(0, 4096));
  sub->add_option("--probe-seconds", o->probe_s, "Seconds the disk measurement takes")
      ->check(CLI::Range(0.1, 60.0))
      ->capture_default_str();
  sub->add_option("--core-type", o->core_type,
                  "Plan with the core re-encoded to this type (Q8_0, Q4_K, ...), as run --core-type would: the "
                  "core's size in that type (nothing is re-encoded)");
  sub->add_flag("--json", o->json, "One JSON object on stdout");
  add_remote_options(sub, o->remote);
  sub->add_flag("--offline", o->remote.offline, "Remote models: read the headers from the disk cache only");
  return {sub, [o] {
            // Options first: a bad value is an error before anything is opened or measured.
            MemoryRequest req;
            req.mem = kMemAuto;
            if (!o->mem.empty() && (!parse_size(o->mem, &req.mem) || req.mem == 0)) {
              fmt::print(stderr, "error: bad --mem '{}' (expected a size such as 64G or 512M)\n", o->mem);
              return 2;
            }
            if (!o->reserve.empty() && (!parse_size(o->reserve, &req.reserve) || req.reserve == 0)) {
              fmt::print(stderr, "error: bad --reserve '{}' (expected a size such as 256M)\n", o->reserve);
              return 2;
            }
            double disk_bps = 0, link_bps = kAssumedLinkMBps * kMB;
            if (!o->disk_read.empty()) {
              DF_ASSIGN_OR_EXIT(double v, parse_rate(o->disk_read, "--disk-read", "GB/s"));
              disk_bps = v * kGB;
            }
            if (!o->link.empty()) {
              DF_ASSIGN_OR_EXIT(double v, parse_rate(o->link, "--link", "MB/s"));
              link_bps = v * kMB;
            }

            double compute_bps = 0;
            if (!o->compute.empty()) {
              DF_ASSIGN_OR_EXIT(double v, parse_rate(o->compute, "--compute", "GB/s"));
              compute_bps = v * kGB;
            }

            OpenedRemote remote;
            RemoteOptions ro;
            if (is_remote_location(o->model)) DF_CHECK_OR_EXIT(apply_remote_options(o->remote, &ro));
            DF_ASSIGN_OR_EXIT(std::unique_ptr<ModelFile> mf, open_headers(o->model, ro, &remote));
            const uint64_t file_bytes = mf->total_bytes();
            uint64_t own_core_bytes = 0;
            for (const auto& [name, ref] : mf->tensors())
              if (name.find("_exps.") == std::string::npos) own_core_bytes += ref.info->bytes;
            RemoveAtExit core_shape;
            if (!o->core_type.empty()) {
              std::error_code ec;
              const auto dir = std::filesystem::temp_directory_path(ec);
              core_shape.path = (dir / fmt::format("deltafin-plan-core-{}.gguf", ::getpid())).string();
              DF_CHECK_OR_EXIT(overlay_core_shape(*mf, o->core_type, core_shape.path));
            }
            const GGUFFile& meta = mf->meta();
            const std::string arch = meta.string_or("general.architecture", "?");
            DF_CHECK_OR_EXIT(check_model(*mf));

            // The memory plan, as run makes it (one sequence of -c positions).
            req.seqs = {.n_ctx = o->ctx, .n_states = 1};
            DF_ASSIGN_OR_EXIT(ModelMemory sizes, model_memory(*mf, remote.remote != nullptr, o->ctx));
            std::unique_ptr<CorePager> pager;
            DF_ASSIGN_OR_EXIT(MemoryPlan plan, plan_memory(*mf, sizes, req, &pager));

            // The model's shape and types, from the tensor directory.
            const auto layers = find_expert_layers(*mf);
            PredictInput in;
            in.moe_layers = int(layers.size());
            in.experts_used = int(meta.int_or(arch + ".expert_used_count", 0));
            std::map<DType, uint64_t> core_types, core_type_matrices;
            DType expert_type = DType::F32;
            for (auto& l : layers) {
              uint64_t per = 0;
              for (auto* n : {&l.gate_name, &l.up_name, &l.down_name})
                if (!n->empty()) {
                  per += mf->tensor(*n)->info->bytes / uint64_t(l.n_expert);
                  expert_type = mf->tensor(*n)->info->type;
                }
              in.expert_compute_bytes = std::max(in.expert_compute_bytes, per);
              in.experts_per_layer = std::max(in.experts_per_layer, l.n_expert);
            }
            in.core_bytes = sizes.core_bytes;
            uint64_t embd = 0;
            if (auto* t = mf->tensor("token_embd.weight")) embd = t->info->bytes;
            in.core_touched = sizes.core_bytes > embd ? sizes.core_bytes - embd : 0;
            {
              std::set<std::string> expert_names;
              for (auto& l : layers)
                for (auto* n : {&l.gate_name, &l.up_name, &l.down_name}) expert_names.insert(*n);
              for (const auto& [name, ref] : mf->tensors())
                if (!expert_names.count(name) && name != "token_embd.weight") {
                  core_types[ref.info->type] += ref.info->bytes;
                  core_type_matrices[ref.info->type] += 1;
                }
            }
            DType core_type = DType::F32;
            uint64_t most = 0;
            for (auto& [t, b] : core_types)
              if (b > most) most = b, core_type = t;
            const uint64_t core_matrices = core_type_matrices[core_type];
            in.streaming = plan.streaming;
            in.expert_bytes = plan.slot_bytes ? plan.slot_bytes : in.expert_compute_bytes;
            in.core_paged = plan.core_reread;
            in.core_cold = plan.core_resident;
            in.remote = remote.remote != nullptr;
            CoreStatus cs;
            if (in.remote) {
              cs = remote.remote->status();
              in.on_disk = cs.experts ? double(cs.experts_on_disk) / cs.experts : 0.0;
              in.remote_core_missing = cs.core_missing;
            }

            // Hit rate: a recorded profile, else uniform routing.
            std::string hit_source = "assumed: uniform routing, hit rate = cached / total experts";
            in.hit_rate = plan.streaming ? uniform_hit_rate(plan.slots, plan.n_experts) : 1.0;
            const std::string profile_path =
                o->profile == "none" ? std::string() : o->profile.empty() ? default_profile_path(*mf, environment().profile_base) : o->profile;
            if (plan.streaming && !profile_path.empty()) {
              std::ifstream f(profile_path);
              if (f) {
                std::stringstream ss;
                ss << f.rdbuf();
                DF_ASSIGN_OR_EXIT(ExpertIndex ix, ExpertIndex::build(*mf, layers));
                auto h = profile_hit_rate(ss.str(), usage_profile_identity(ix), plan.slots);
                if (h.ok()) {
                  in.hit_rate = *h;
                  hit_source = "from the usage profile " + profile_path;
                } else if (!o->profile.empty()) {
                  fmt::print(stderr, "error: --profile '{}': {}\n", profile_path, h.error().message);
                  return 1;
                }
              } else if (!o->profile.empty()) {
                fmt::print(stderr, "error: --profile '{}': cannot read it\n", profile_path);
                return 1;
              }
            }

            // Rates: the disk (measured unless given), the CPU (measured briefly).
            std::string disk_source = "--disk-read";
            if (disk_bps == 0) {
              const std::string target = in.remote ? largest_file(remote.remote->dir()) : mf->path();
              const uint64_t block = in.expert_bytes ? in.expert_bytes : (uint64_t(1) << 20);
              auto d = target.empty() ? Result<DiskProbe>(make_error("no file in the cache directory"))
                                      : measure_disk_read(target, block, o->probe_s);
              if (!d.ok()) {
                fmt::print(stderr, "error: cannot measure the disk ({}); give --disk-read GB/s\n", d.error().message);
                return 1;
              }
              disk_bps = d->bytes_per_second;
              disk_source = fmt::format("measured: {:.1f} s of random {} reads of {} in {}, 16 in flight{}",
                                        o->probe_s, d->direct ? "O_DIRECT" : "buffered", human_bytes(block), target,
                                        d->direct ? "" : " (the file system refused O_DIRECT)");
            }
            in.disk_bps = disk_bps;
            in.link_bps = link_bps;
            const int threads = o->threads > 0 ? o->threads : default_thread_count();
            // At the model's matrix sizes: one expert's projection, the core's average matrix.
            const uint64_t expert_matrix = in.expert_compute_bytes / 3;
            const uint64_t core_matrix = core_matrices ? most / core_matrices : expert_matrix;
            in.expert_bps =
                compute_bps > 0 ? compute_bps : measure_weight_rate(expert_type, 1, threads, 0.3, expert_matrix);
            in.core_bps = compute_bps > 0 ? compute_bps : measure_weight_rate(core_type, 1, threads, 0.3, core_matrix);
            in.batch_bps = measure_weight_rate(core_type, 32, threads, 0.3, core_matrix);
            if (in.core_bps <= 0) in.core_bps = in.expert_bps;
            in.prefill_tokens = o->prefill;
            in.spec_accept = o->spec_accept;
            const Prediction pr = predict(in);

            // Disk: a local model is already there; a remote one needs its core and
            // the experts it fetches (all of them at most; --disk-cache bounds it).
            const uint64_t disk_core = in.remote ? cs.core_bytes : 0, disk_all = in.remote ? cs.model_bytes : 0;
            const int core_layers = pager ? pager->stats().layers : 0;
            const int paged_layers = pager ? pager->stats().streamed_layers : 0;

            if (o->json) {
              nlohmann::json j;
              j["model"] = o->model;
              j["remote"] = in.remote;
              j["core_type"] = o->core_type.empty() ? std::string("as published") : o->core_type;
              j["core_bytes"] = sizes.core_bytes;
              j["budget_bytes"] = plan.total;
              j["streaming"] = plan.streaming;
              j["core_resident_bytes"] = plan.core_resident;
              j["core_paged_bytes"] = plan.core_paged;
              j["core_reread_bytes"] = plan.core_reread;
              j["core_layers_paged"] = paged_layers;
              j["reserve_bytes"] = plan.reserve;
              j["expert_cache_bytes"] = plan.expert_cache;
              j["expert_slot_bytes"] = plan.slot_bytes;
              j["experts_total"] = plan.n_experts;
              j["experts_cached"] = plan.slots;
              j["hit_rate"] = in.hit_rate;
              j["hit_rate_source"] = hit_source;
              j["disk_read_bytes_per_second"] = disk_bps;
              j["disk_read_source"] = disk_source;
              j["link_bytes_per_second"] = link_bps;
              j["compute_weight_bytes_per_second"] = {{"experts", in.expert_bps}, {"core", in.core_bps},
                                                      {"batched", in.batch_bps}};
              j["compute_source"] = compute_bps > 0 ? "--compute" : "measured";
              j["expert_reads_per_token"] = pr.misses_per_token;
              j["read_bytes_per_token"] = pr.read_bytes_per_token;
              j["decode_io_seconds_per_token"] = pr.io_s;
              j["decode_compute_seconds_per_token"] = pr.compute_s;
              j["decode_seconds_per_token"] = pr.seconds_per_token;
              j["decode_seconds_per_token_overlapped"] = pr.overlap_seconds_per_token;
              j["decode_tokens_per_second"] = pr.tokens_per_second;
              j["spec_accept"] = in.spec_accept;
              j["spec_decode_tokens_per_second"] = pr.spec_tokens_per_second;
              j["prefill_tokens"] = in.prefill_tokens;
              j["prefill_seconds"] = pr.prefill_s;
              j["cold_start_seconds"] = pr.cold_start_s;
              j["disk_needed_bytes"] = in.remote ? disk_core : mf->total_bytes() - file_bytes;
              j["disk_needed_all_experts_bytes"] = disk_all;
              fmt::print("{}\n", j.dump());
              return 0;
            }

            fmt::print("model:          {} ({}, {} MoE layers of {} experts, {} used per token, {} an expert)\n",
                       o->model, arch, in.moe_layers, in.experts_per_layer, in.experts_used,
                       human_bytes(in.expert_compute_bytes));
            if (!o->core_type.empty())
              fmt::print("core:           re-encoded to {} (--core-type): {} (experts untouched); the file's own "
                         "core would be {}\n", o->core_type, human_bytes(sizes.core_bytes),
                         human_bytes(own_core_bytes));
            fmt::print("\nmemory plan ({}, -c {}):\n{}",
                       o->mem.empty() ? std::string("no --mem") : "--mem " + o->mem, o->ctx, format_plan(plan));
            if (pager)
              fmt::print("  core layers:   the first {} of {} resident, the last {} paged from the file per token\n",
                         core_layers - paged_layers, core_layers, paged_layers);
            fmt::print("  hit rate:      {:.1f}% ({})\n", in.hit_rate * 100, plan.streaming ? hit_source : "nothing streams");
            fmt::print("\nrates:\n");
            fmt::print("  disk reads:    {:.2f} GB/s ({})\n", disk_bps / kGB, disk_source);
            if (in.remote)
              fmt::print("  link:          {:.0f} MB/s ({}); {:.1f}% of the experts already in the disk cache\n",
                         link_bps / kMB, o->link.empty() ? "assumed; give --link" : "--link", in.on_disk * 100);
            fmt::print("  compute:       {:.2f} GB/s of {} weights, {:.2f} GB/s of {} (one token, {} threads), "
                       "{:.2f} GB/s batched ({})\n",
                       in.expert_bps / kGB, dtype_name(expert_type), in.core_bps / kGB, dtype_name(core_type),
                       threads, in.batch_bps / kGB,
                       compute_bps > 0 ? "--compute; batched measured for 0.3 s" : "measured for 0.3 s each");
            fmt::print("\ndecode, per token:\n");
            fmt::print("  reads:         {:.1f} experts, {} ({}){}\n", pr.misses_per_token,
                       human_bytes(uint64_t(pr.read_bytes_per_token)), secs(pr.io_s),
                       plan.core_reread ? fmt::format(", including {} of paged core", human_bytes(plan.core_reread)) : "");
            fmt::print("  compute:       {} of weights ({})\n",
                       human_bytes(in.core_touched + uint64_t(in.experts_used) * in.moe_layers * in.expert_compute_bytes),
                       secs(pr.compute_s));
            fmt::print("  predicted:     {} a token, {:.2f} tokens/s ({})\n", secs(pr.seconds_per_token),
                       pr.tokens_per_second,
                       plan.core_reread ? "expert reads then compute, as an MoE layer waits for its experts; the paged "
                                          "core read ahead behind both, the disk shared"
                                        : "reads then compute, as an MoE layer waits for its experts");
            fmt::print("  best case:     {} a token, {:.2f} tokens/s (every read overlapped with compute)\n",
                       secs(pr.overlap_seconds_per_token),
                       pr.overlap_seconds_per_token > 0 ? 1 / pr.overlap_seconds_per_token : 0.0);
            fmt::print("  speculative:   {:.2f} tokens/s with one drafted token accepted {:.0f}% of the time "
                       "(the drafter's cost left out)\n", pr.spec_tokens_per_second, in.spec_accept * 100);
            if (in.prefill_tokens > 0)
              fmt::print("prefill:        {} for {} tokens\n", secs(pr.prefill_s), in.prefill_tokens);
            fmt::print("cold start:     {} ({} of core {})\n", secs(pr.cold_start_s), human_bytes(plan.core_resident),
                       in.remote ? fmt::format("from the disk cache, {} of it over the link first",
                                               human_bytes(cs.core_missing))
                                 : "read from the disk");
            if (in.remote)
              fmt::print("disk needed:    {} for the core, up to {} with every expert cached (--disk-cache bounds "
                         "it)\n", human_bytes(disk_core), human_bytes(disk_all));
            else if (!o->core_type.empty())
              fmt::print("disk needed:    {} for the re-encoded core in the cache directory, beside the model file "
                         "({})\n", human_bytes(mf->total_bytes() - file_bytes), human_bytes(file_bytes));
            else
              fmt::print("disk needed:    none beyond the model file ({})\n", human_bytes(mf->total_bytes()));
            return 0;
          }};
}

}  // namespace deltafin::tools
