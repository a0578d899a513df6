// deltafin pull: download a remote model's core (default), or also its experts
// (--all, or --layers A-B), into the disk cache. First prints what the model needs
// on disk and in memory; resumes an interrupted download.
#include <fmt/format.h>

#include "commands.h"
#include "progress_bar.h"
#include "remote_common.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

Command add_pull(CLI::App& app) {
  struct Opts {
    std::string model, layers;
    bool all = false, quiet = false;
    RemoteCli remote;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("pull", "Download a remote model's core (and optionally its experts) into the disk cache");
  sub->add_option("model,-m,--model", o->model, "https:// URL, hf://OWNER/REPO[@REVISION]/FILE.gguf or hf://OWNER/REPO[:QUANT]")->join()->required();
  auto* all = sub->add_flag("--all", o->all, "Also download every expert");
  sub->add_option("--layers", o->layers, "Also download the experts of layers A-B (inclusive)")->excludes(all);
  sub->add_flag("--no-progress", o->quiet, "No progress bars");
  add_remote_options(sub, o->remote);
  return {sub, [o] {
            RemoteOptions ro;
            DF_CHECK_OR_EXIT(apply_remote_options(o->remote, &ro));
            int first = 0, last = -1;
            if (!o->layers.empty()) {
              int used = 0;
              if (std::sscanf(o->layers.c_str(), "%d-%d%n", &first, &last, &used) != 2 ||
                  size_t(used) != o->layers.size() || first < 0 || last < first) {
                fmt::print(stderr, "error: bad --layers '{}' (expected A-B, e.g. 0-15)\n", o->layers);
                return 2;
              }
            }
            DF_ASSIGN_OR_EXIT(OpenedRemote m, open_remote(o->model, ro));
            RemoteModel& r = *m.remote;
            const CoreStatus cs = r.status();
            const ExpertIndex& ix = r.index();
            std::vector<int> keys;
            uint64_t expert_bytes = 0;
            if (o->all || !o->layers.empty()) {
              for (int moe = 0; moe < ix.n_moe_layers(); ++moe) {
                const int layer = ix.model_layer(moe);
                if (!o->all && (layer < first || layer > last)) continue;
                for (int e = 0; e < ix.n_expert(moe); ++e) {
                  keys.push_back(ix.key(moe, e));
                  expert_bytes += ix.slices(ix.key(moe, e)).bytes();
                }
              }
            }
            // What the install needs: the core on disk and in RAM, one expert slot at least.
            const uint64_t reserve = uint64_t(64) << 20;
            const uint64_t least_ram = uint64_t(double(cs.core_bytes + reserve + cs.slot_bytes) / 0.97) + 1;
            fmt::print(stderr,
                       "model: {}\n  pinned as {}\n  cache: {}\n"
                       "  at the origin: {} in {} part(s)\n"
                       "  core (kept on disk and in RAM): {} ({} to download)\n"
                       "  experts: {} x ~{} = {} ({} on disk)\n"
                       "  needs: disk {} for the core{}; RAM at least {} (--mem), more caches more experts\n",
                       o->model, r.key(), r.dir(), human_bytes(cs.model_bytes), m.file->shard_count(),
                       human_bytes(cs.core_bytes), human_bytes(cs.core_missing), cs.experts,
                       human_bytes(cs.slot_bytes), human_bytes(cs.expert_bytes), cs.experts_on_disk,
                       human_bytes(cs.core_bytes),
                       keys.empty() ? std::string(" (experts are fetched when first used)")
                                    : fmt::format(" + {} for {} experts", human_bytes(expert_bytes), keys.size()),
                       human_bytes(least_ram));
            const uint64_t need = cs.core_missing + expert_bytes;
            const uint64_t avail = free_bytes(r.root());
            if (need > avail) {
              fmt::print(stderr, "error: the download needs up to {}, but only {} is free under {}\n",
                         human_bytes(need), human_bytes(avail), r.root());
              return 1;
            }
            ProgressFactory bars = terminal_progress(o->quiet);
            DF_CHECK_OR_EXIT(r.ensure_core(bars));
            if (!keys.empty()) {
              std::unique_ptr<Progress> bar = bars ? bars("experts", expert_bytes) : nullptr;
              Status s = r.experts().fill(keys, uint64_t(256) << 20, [&](uint64_t b) {
                if (bar) bar->add(b);
              });
              bar.reset();
              DF_CHECK_OR_EXIT(s);
            }
            const HttpStats hs = r.client()->stats();
            fmt::print(stderr, "done: core complete{}; {} fetched in {} requests ({} retries)\n",
                       keys.empty() ? "" : fmt::format(", {} experts on disk", keys.size()), human_bytes(hs.bytes),
                       hs.requests, hs.retries);
            return 0;
          }};
}

}  // namespace deltafin::tools
