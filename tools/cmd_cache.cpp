// deltafin cache stats|warm|verify|prune|clear: manage the disk cache of remote
// models.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "cache/cache_admin.h"
#include "cache/fs.h"
#include "commands.h"
#include "progress_bar.h"
#include "remote_common.h"
#include "runtime/engine.h"
#include "store_options.h"
#include "tokenizer/tokenizer.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {

std::string root_of(const RemoteCli& r) { return r.cache_dir.empty() ? environment().cache_dir : r.cache_dir; }

// Experts named by a usage profile (as the streaming store writes it, or the disk
// cache's usage counts), hottest first.
Result<std::vector<int>> profile_keys(const std::string& path, const ExpertIndex& ix) {
  std::ifstream f(path);
  if (!f) return make_error("cannot read the usage profile '{}'", path);
  std::string magic, id;
  std::getline(f, magic);
  if (magic == "deltafin-expert-profile 1") std::getline(f, id);
  else if (magic != "deltafin-usage 1") return make_error("'{}' is not an expert usage profile", path);
  std::vector<std::pair<double, int>> v;
  int layer = 0, expert = 0;
  double count = 0;
  while (f >> layer >> expert >> count) {
    const int moe = ix.moe_index(layer);
    if (moe < 0 || expert < 0 || expert >= ix.n_expert(moe))
      return make_error("'{}': expert {} of layer {} is not in this model", path, expert, layer);
    v.push_back({-count, ix.key(moe, expert)});
  }
  std::sort(v.begin(), v.end());
  std::vector<int> keys;
  for (auto& [c, k] : v) keys.push_back(k);
  return keys;
}

}  // namespace

Command add_cache(CLI::App& app) {
  struct Opts {
    std::string model, profile, file;
    std::vector<std::string> prompts;
    int n_predict = 16;
    bool all = false;
    StoreCli store;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("cache", "Manage the disk cache of remote models");
  sub->require_subcommand(1);
  CLI::App* stats = sub->add_subcommand("stats", "What the cache holds, per model");
  CLI::App* warm = sub->add_subcommand("warm", "Fetch the experts a usage profile or a set of prompts needs");
  CLI::App* verify = sub->add_subcommand("verify", "Check every checksum; remove what is corrupt");
  CLI::App* prune = sub->add_subcommand("prune", "Evict the least used experts down to --disk-cache");
  CLI::App* clear = sub->add_subcommand("clear", "Remove a model (or, with --all, every model) from the cache");
  for (CLI::App* c : {stats, verify}) {
    c->add_option("model", o->model, "A model's location as given, or its cache directory name (default: all)");
    c->add_option("--cache-dir", o->store.remote.cache_dir, "The cache directory");
  }
  clear->add_option("model", o->model,
                    "A model's location as given, or its cache directory name (`deltafin cache stats` lists them)");
  clear->add_flag("--all", o->all, "Remove every model in the cache");
  clear->add_option("--cache-dir", o->store.remote.cache_dir, "The cache directory");
  prune->add_option("--cache-dir", o->store.remote.cache_dir, "The cache directory");
  prune->add_option("--disk-cache", o->store.remote.disk_cache, "Size to prune to (e.g. 50G)")->required();
  warm->add_option("model,-m,--model", o->model, "https:// URL, hf://OWNER/REPO[@REVISION]/FILE.gguf or hf://OWNER/REPO[:QUANT]")->join()->required();
  warm->add_option("--profile", o->profile,
                   "Usage profile to warm from (default: the one runs of this model recorded in the cache)");
  warm->add_option("-p,--prompt", o->prompts, "Prompt to run (repeatable): its experts are fetched");
  warm->add_option("-f,--file", o->file, "File of prompts, one per line");
  warm->add_option("-n,--n-predict", o->n_predict, "Tokens to generate per prompt")->capture_default_str();
  warm->add_option("--mem", o->store.mem, "Memory budget when running prompts (as for run)");
  add_remote_options(warm, o->store.remote);

  return {sub, [o, stats, verify, prune, clear] {
            const std::string root = root_of(o->store.remote);
            if (stats->parsed()) {
              DF_ASSIGN_OR_EXIT(auto models, scan_cache(root));
              fmt::print("cache {}: {} in {} model(s), {} free\n", root, human_bytes(cache_bytes(models)),
                         models.size(), human_bytes(free_bytes(root)));
              for (const CachedModel& m : models) {
                if (!model_matches(m, o->model)) continue;
                fmt::print("{}\n  {}\n  core: {} on disk, {}/{} part(s) complete\n  experts: {} cached, {}\n",
                           m.location.empty() ? m.dir : m.location, m.dir, human_bytes(m.core_bytes),
                           m.core_complete_parts, m.parts, m.entries.size(), human_bytes(m.expert_bytes));
              }
              return 0;
            }
            if (verify->parsed()) {
              DF_ASSIGN_OR_EXIT(VerifyReport r, verify_cache(root, o->model));
              for (const std::string& p : r.problems) fmt::print("{}\n", p);
              fmt::print("verified: {} expert entries ok, {} corrupt (removed); {} core part(s) ok, {} bad core "
                         "chunk(s); {} stale temp file(s) removed\n",
                         r.entries_ok, r.entries_bad, r.core_parts_ok, r.core_chunks_bad, r.temps_removed);
              return r.problems.empty() ? 0 : 1;
            }
            if (prune->parsed()) {
              uint64_t budget = 0;
              if (!parse_size(o->store.remote.disk_cache, &budget)) {
                fmt::print(stderr, "error: bad --disk-cache '{}'\n", o->store.remote.disk_cache);
                return 2;
              }
              DF_ASSIGN_OR_EXIT(PruneReport r, prune_cache(root, budget));
              fmt::print("pruned {} expert(s), {} freed; the cache holds {}\n", r.removed, human_bytes(r.freed),
                         human_bytes(r.after));
              return 0;
            }
            if (clear->parsed()) {
              // Clearing everything is never a default: a cache may hold hundreds of GiB.
              if (o->model.empty() == !o->all) {
                DF_ASSIGN_OR_EXIT(auto models, scan_cache(root));
                fmt::print(stderr,
                           "error: cache clear {}: name the model to remove (its location as given, or a "
                           "directory `deltafin cache stats` lists), or give --all to remove every model "
                           "(the cache {} holds {} in {} model(s))\n",
                           o->all ? "takes a model or --all, not both" : "needs a model or --all", root,
                           human_bytes(cache_bytes(models)), models.size());
                return 2;
              }
              DF_ASSIGN_OR_EXIT(std::vector<CachedModel> removed, clear_cache(root, o->model));
              if (!o->model.empty() && removed.empty()) {
                fmt::print(stderr, "error: no model '{}' in the cache {} (`deltafin cache stats` lists them)\n",
                           o->model, root);
                return 1;
              }
              uint64_t total = 0;
              for (const CachedModel& m : removed) {
                const uint64_t bytes = m.core_bytes + m.expert_bytes;
                total += bytes;
                fmt::print("removed {} ({}: core {}, {})\n", m.location.empty() ? m.dir : m.location,
                           human_bytes(bytes), human_bytes(m.core_bytes),
                           m.entries.empty() ? std::string("no experts")
                                             : fmt::format("{} experts {}", m.entries.size(),
                                                           human_bytes(m.expert_bytes)));
              }
              fmt::print("removed {} model(s), {}, from {}\n", removed.size(), human_bytes(total), root);
              return 0;
            }
            // warm
            std::vector<std::string> prompts = o->prompts;
            if (!o->file.empty()) {
              std::ifstream f(o->file);
              if (!f) {
                fmt::print(stderr, "error: cannot read '{}'\n", o->file);
                return 1;
              }
              for (std::string line; std::getline(f, line);)
                if (!line.empty()) prompts.push_back(line);
            }
            if (prompts.empty()) {
              RemoteOptions ro;
              DF_CHECK_OR_EXIT(apply_remote_options(o->store.remote, &ro));
              DF_ASSIGN_OR_EXIT(OpenedRemote m, open_remote(o->model, ro));
              DF_CHECK_OR_EXIT(m.remote->ensure_core(terminal_progress()));
              // Default: what runs of this model recorded (the RAM profile, else the disk
              // cache's fetch counts).
              std::string path = o->profile;
              if (path.empty()) {
                path = m.remote->dir() + "/profile";
                if (::access(path.c_str(), F_OK) != 0) path = m.remote->dir() + "/usage";
              }
              DF_ASSIGN_OR_EXIT(std::vector<int> keys, profile_keys(path, m.remote->index()));
              uint64_t bytes = 0;
              for (int k : keys) bytes += m.remote->index().slices(k).bytes();
              fmt::print(stderr, "warming {} experts ({}) from {}\n", keys.size(), human_bytes(bytes), path);
              std::unique_ptr<Progress> bar = terminal_progress()("experts", bytes);
              Status s = m.remote->experts().fill(keys, uint64_t(256) << 20, [&](uint64_t b) { bar->add(b); });
              bar.reset();
              DF_CHECK_OR_EXIT(s);
              return 0;
            }
            // Run the prompts: every expert they route to lands in the disk cache.
            EngineOptions eo;
            o->store.profile = "none";
            DF_CHECK_OR_EXIT(apply_store_options(o->store, &eo));
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            DF_ASSIGN_OR_EXIT(Tokenizer tok, Tokenizer::from_gguf(engine->file().meta()));
            for (const std::string& p : prompts) {
              std::vector<int32_t> ids = tok.encode(p, true, true);
              auto st = engine->model().new_state(int(ids.size()) + o->n_predict + 1);
              std::vector<float> logits(size_t(engine->model().info().n_vocab));
              DF_CHECK_OR_EXIT(engine->model().forward(*st, ids.data(), int(ids.size()), logits.data(), false));
              for (int i = 0; i < o->n_predict; ++i) {
                const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
                DF_CHECK_OR_EXIT(engine->model().forward(*st, &next, 1, logits.data(), false));
              }
            }
            const ExpertCacheStats cs = engine->remote()->experts().stats();
            fmt::print(stderr, "warmed with {} prompt(s): {} experts fetched, {} already on disk\n", prompts.size(),
                       cs.fetched, cs.disk_hits);
            return 0;
          }};
}

}  // namespace deltafin::tools
