// deltafin inspect: what a model is and what running it within a RAM/disk budget
// implies — read from the GGUF header alone (no weights are loaded). The memory plan
// is runtime/memory_budget.h's, the one run, chat and serve apply.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "commands.h"
#include "core/units.h"
#include "format/hf_gguf_source.h"
#include "format/model_file.h"
#include "kernels/types.h"
#include "model/model.h"
#include "remote/location.h"
#include "remote_common.h"
#include "runtime/engine.h"
#include "runtime/memory_budget.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {
std::string human(double b) { return format_bytes(b); }
std::string count(double n) {
  if (n >= 1e12) return fmt::format("{:.2f} T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{:.0f}", n);
}
}  // namespace

Command add_inspect(CLI::App& app) {
  struct Opts {
    std::string model, mem, reserve;
    int ctx = 4096, parallel = 0;
    RemoteCli remote;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("inspect", "Describe a model and what a RAM budget implies");
  sub->add_option("model,-m,--model", o->model, "Model: .gguf path (the first part of a split model), Hugging Face folder, URL or hf:// location")->required();
  sub->add_option("--mem", o->mem, "RAM budget to plan (e.g. 8G; default: as run, 80% of the RAM available)");
  sub->add_option("--reserve", o->reserve, "Part of --mem kept for the KV cache, activations and the program (as run)");
  sub->add_option("-c,--ctx-size", o->ctx, "Context size of the planned sequences")
      ->check(CLI::Range(1, kMaxCtxSize))
      ->capture_default_str();
  sub->add_option("--parallel", o->parallel,
                  "Plan `serve --parallel N` (its states and default prompt cache) instead of one run")
      ->check(CLI::Range(0, 4096));
  add_remote_options(sub, o->remote);
  sub->add_flag("--offline", o->remote.offline, "Remote models: read the headers from the disk cache only");
  return {sub, [o] {
            // A remote model's headers come through its disk cache (fetched once).
            OpenedRemote remote;
            RemoteOptions ro;
            if (is_remote_location(o->model)) DF_CHECK_OR_EXIT(apply_remote_options(o->remote, &ro));
            DF_ASSIGN_OR_EXIT(std::unique_ptr<ModelFile> mf, open_headers(o->model, ro, &remote));
            const GGUFFile& m = mf->meta();
            const std::string arch = m.string_or("general.architecture", "?");
            auto layers = find_expert_layers(*mf);
            std::set<std::string> expert_names;
            for (auto& l : layers)
              for (auto* n : {&l.gate_name, &l.up_name, &l.down_name})
                if (!n->empty()) expert_names.insert(*n);
            uint64_t core_b = 0, exp_b = 0, core_p = 0, exp_p = 0, per_expert_max = 0;
            std::map<std::string, uint64_t> types;
            std::map<std::string, int> uncomputed;  // type -> tensors
            for (const auto& [name, ref] : mf->tensors()) {
              const bool is_exp = expert_names.count(name) > 0;
              (is_exp ? exp_b : core_b) += ref.info->bytes;
              (is_exp ? exp_p : core_p) += ref.info->n_elements();
              types[std::string(dtype_name(ref.info->type))] += ref.info->bytes;
              if (!type_traits(ref.info->type)) uncomputed[std::string(dtype_name(ref.info->type))]++;
            }
            int n_expert = 0;
            for (auto& l : layers) {
              uint64_t per = 0;
              for (auto* n : {&l.gate_name, &l.up_name, &l.down_name})
                if (!n->empty()) per += mf->tensor(*n)->info->bytes / uint64_t(l.n_expert);
              per_expert_max = std::max(per_expert_max, per);
              n_expert = std::max(n_expert, l.n_expert);
            }
            const int n_used = int(m.int_or(arch + ".expert_used_count", 0));
            const uint64_t per_token = uint64_t(n_used) * per_expert_max * layers.size();
            fmt::print("model:          {}\n", o->model);
            if (remote.remote) fmt::print("source:         {} (headers cached in {})\n", remote.remote->key(),
                                          remote.remote->dir());
            if (const HfGgufSource* hf = hf_source_of(*mf)) {
              const HfFolder& f = hf->folder();
              fmt::print("source:         Hugging Face folder, model_type {}: {} safetensors shard(s), {} tensors run",
                         f.model_type, f.shard_files.size(), f.tensors.size());
              if (f.skipped_tensors)
                fmt::print(", {} skipped ({}, not run: vision tower or projector)", f.skipped_tensors,
                           human(double(f.skipped_bytes)));
              fmt::print("\nheaders read:   {} bytes (config, index, shard headers, tokenizer); no tensor data\n",
                         f.bytes_read);
            }
            fmt::print("name:           {}\n", m.string_or("general.name", "?"));
            const auto archs = supported_architectures();
            const bool supported = std::count(archs.begin(), archs.end(), arch) > 0;
            // What run would check before reading a weight: metadata, tensor names, shapes, types.
            const Status loadable = supported ? check_model(*mf) : Status{};
            fmt::print("architecture:   {} ({})\n", arch,
                       !supported         ? "NOT supported by deltafin"
                       : loadable.ok()    ? "supported"
                                          : "supported, but this file does not load: see the error below");
            fmt::print("files:          {} part(s), {}\n", mf->shard_count(), human(double(mf->total_bytes())));
            fmt::print("parameters:     {} total: {} core + {} in routed experts\n", count(double(core_p + exp_p)),
                       count(double(core_p)), count(double(exp_p)));
            fmt::print("bytes:          core {} | experts {}\n", human(double(core_b)), human(double(exp_b)));
            std::string tl;
            for (auto& [t, b] : types)
              tl += fmt::format("{}{} {}{}", tl.empty() ? "" : ", ", t, human(double(b)),
                                uncomputed.count(t) ? " (not computed by deltafin)" : "");
            fmt::print("tensor types:   {}\n", tl);
            if (!uncomputed.empty()) {
              std::string ul;
              for (auto& [t, n] : uncomputed) ul += fmt::format("{}{} ({} tensors)", ul.empty() ? "" : ", ", t, n);
              fmt::print("cannot run:     deltafin cannot compute with {} yet; it computes {}\n", ul,
                         computed_type_names());
            }
            const int64_t n_nextn = m.int_or(arch + ".nextn_predict_layers", 0);
            fmt::print("layers:         {} ({} with routed experts){}\n", m.int_or(arch + ".block_count", 0), layers.size(),
                       n_nextn == 1   ? std::string("; the last is a multi-token-prediction block (--spec mtp)")
                       : n_nextn > 1 ? fmt::format("; the last {} are multi-token-prediction blocks", n_nextn)
                                   : std::string());
            fmt::print("experts:        {} per MoE layer, {} used per token\n", n_expert, n_used);
            fmt::print("per expert:     {} (gate+up+down)\n", human(double(per_expert_max)));
            fmt::print("expert bytes per token: {} (if none were cached)\n", human(double(per_token)));
            {
              // The plan run (or serve with --parallel) makes: one formatter for all.
              MemoryRequest req;
              req.mem = kMemAuto;
              if (!o->mem.empty() && (!parse_size(o->mem, &req.mem) || req.mem == 0)) {
                fmt::print(stderr, "error: bad --mem '{}' (expected a size such as 8G or 512M)\n", o->mem);
                return 2;
              }
              if (!o->reserve.empty() && (!parse_size(o->reserve, &req.reserve) || req.reserve == 0)) {
                fmt::print(stderr, "error: bad --reserve '{}' (expected a size such as 256M)\n", o->reserve);
                return 2;
              }
              // A model that does not load has no state to plan.
              if (supported && loadable.ok()) req.seqs = {.n_ctx = o->ctx, .n_states = 1};
              if (supported && loadable.ok() && o->parallel > 0)
                req.seqs = {.n_ctx = o->ctx,
                            .n_states = o->parallel + (o->parallel > 1 ? 1 : 0),
                            .serving = true,
                            .prompt_cache = kMemAuto};
              fmt::print("\nmemory plan ({}, -c {}{}):\n", o->mem.empty() ? std::string("no --mem") : "--mem " + o->mem,
                         o->ctx, o->parallel > 0 ? fmt::format(", serve --parallel {}", o->parallel) : std::string());
              Result<ModelMemory> sizes = model_memory(*mf, remote.remote != nullptr, o->ctx);
              Result<MemoryPlan> plan = sizes.ok() ? plan_memory(*mf, *sizes, req) : Result<MemoryPlan>(sizes.error());
              if (!plan.ok()) {
                fmt::print("  does not fit: {}\n", plan.error().message);
              } else {
                fmt::print("{}", format_plan(*plan));
                if (plan->paged_core)
                  fmt::print("  the core ({}) and the reserve ({}) leave no room for an expert beside it: core "
                             "layers stream too\n", human(double(core_b)), human(double(plan->reserve)));
                if (plan->streaming) {
                  const uint64_t total = uint64_t(n_expert) * layers.size();
                  const double frac = total ? std::min(1.0, double(plan->slots) / double(total)) : 1.0;
                  fmt::print("  expected read: {} per token with uniform routing (hit rate {:.1f}%); "
                             "skewed real routing does better\n",
                             human(double(per_token) * (1 - frac)), frac * 100);
                }
              }
            }
            fmt::print("\nspeed: `deltafin plan` predicts decode, prefill and cold-start time and the disk needed on "
                       "this machine\n");
            if (!loadable.ok()) {
              std::fflush(stdout);
              fmt::print(stderr, "error: {}\n", loadable.error().message);
              return 1;
            }
            return 0;
          }};
}

}  // namespace deltafin::tools
