// deltafin bench: throughput in llama-bench's manner, with the expert store's view.
//   pp N: one forward pass over N random prompt tokens (batches of -b);
//   tg N: N random tokens generated one at a time from an empty context;
//   with --parallel B > 1, B sequences decode N tokens each in lockstep, one batched
//   pass (Model::forward_batch) per step, as `serve` does with B clients: t/s is
//   the aggregate, and the expert lookups per token show what the batch shared.
// Each test runs -r times (after one unmeasured warm-up run unless --no-warmup) and
// prints a table row, or with --json one JSON object per test on stdout:
//   {"test": "tg", "n": 16, "tokens_per_second": 3.9, "bytes_read": ..., "hit_rate": ...}
// Bytes, hit rate, GB/s and I/O wait are the expert store's counters over the
// measured runs; GB/s is bytes over the time at least one read was in flight.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <map>
#include <random>

#include "commands.h"
#include "core/platform.h"
#include "model/core_pager.h"
#include "runtime/engine.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {

constexpr double kMiB = 1048576.0, kGiB = 1073741824.0;  // the units --mem takes

struct TestResult {
  std::string test;
  int n = 0;
  int par = 1;              // sequences decoding together (tg)
  std::vector<double> tps;  // tokens per second, per repetition
  double seconds = 0;       // measured wall time, all repetitions
  StoreStats io;            // store counters over the measured repetitions
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) v.push_back(std::stoi(s.substr(i, j - i)));
    i = j + 1;
  }
  return v;
}

}  // namespace

Command add_bench(CLI::App& app) {
  struct Opts {
    std::string model, pp = "512", tg = "128", par = "1";
    int reps = 5, threads = 0, batch = 512;
    uint64_t seed = 1234;
    bool json = false, no_warmup = false, cold = false;
    StoreCli store;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("bench", "Measure prompt and generation throughput and expert streaming");
  sub->add_option("model,-m,--model", o->model, "Model: .gguf path, Hugging Face model folder, URL or hf:// location; -m PART1 -m PART2 ...: the byte fragments of one .gguf (NAME.part1ofN alone names its set)")->join()->required();
  sub->add_option("-p,--n-prompt", o->pp, "Prompt lengths to test, comma-separated (0: none)")->capture_default_str();
  sub->add_option("-n,--n-gen", o->tg, "Generation lengths to test, comma-separated (0: none)")->capture_default_str();
  sub->add_option("-r,--repetitions", o->reps, "Measured runs per test")->capture_default_str();
  sub->add_option("-b,--batch-size", o->batch, "Prompt tokens per forward pass")->capture_default_str();
  sub->add_option("--parallel", o->par,
                  "Sequences decoding together in the tg tests, comma-separated (as serve's clients; "
                  "t/s is their aggregate)")
      ->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (default: all)")->check(CLI::Range(0, kMaxThreads));
  sub->add_option("--seed", o->seed, "Seed of the random tokens")->capture_default_str();
  sub->add_flag("--json", o->json, "One JSON object per test on stdout instead of the table");
  sub->add_flag("--no-warmup", o->no_warmup, "Measure from the first run");
  sub->add_flag("--cold", o->cold, "Empty the expert cache before every run");
  add_store_options(sub, o->store);
  return {sub, [o] {
            EngineOptions eo;
            eo.threads = o->threads;
            // Benchmarks do not read or write the usage profile unless asked to.
            DF_CHECK_OR_EXIT(apply_store_options(o->store, &eo, ""));
            std::vector<int> pps, tgs, pars;
            try {
              pps = parse_list(o->pp);
              tgs = parse_list(o->tg);
              pars = parse_list(o->par);
            } catch (...) {
              fmt::print(stderr, "error: bad -p/-n/--parallel list\n");
              return 2;
            }
            for (int b : pars)
              if (b < 1 || b > 256) {
                fmt::print(stderr, "error: --parallel {}: each value must be 1..256\n", b);
                return 2;
              }
            if (o->reps < 1) {
              fmt::print(stderr, "error: -r must be at least 1\n");
              return 2;
            }
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            Model& model = engine->model();
            StreamingExpertStore* store = engine->streaming_store();
            const ModelInfo& mi = model.info();
            const int64_t V = mi.n_vocab;
            std::mt19937_64 rng(o->seed);
            std::uniform_int_distribution<int32_t> tok_dist(0, int32_t(V - 1));

            // tg with `par` sequences in lockstep: one forward_batch per step.
            auto run_parallel = [&](int n, int par, double* secs) -> Status {
              std::vector<std::vector<int32_t>> toks(static_cast<size_t>(par), std::vector<int32_t>(static_cast<size_t>(n)));
              for (auto& seq : toks)
                for (auto& t : seq) t = tok_dist(rng);
              std::vector<std::unique_ptr<SeqState>> states;
              std::vector<std::vector<float>> logits(static_cast<size_t>(par), std::vector<float>(static_cast<size_t>(V)));
              for (int b = 0; b < par; ++b) states.push_back(model.new_state(n));
              std::vector<BatchSlice> slices(static_cast<size_t>(par));
              if (o->cold && store) store->drop_cache();
              const auto t0 = std::chrono::steady_clock::now();
              for (int i = 0; i < n; ++i) {
                for (int b = 0; b < par; ++b)
                  slices[size_t(b)] = {states[size_t(b)].get(), &toks[size_t(b)][size_t(i)], 1,
                                       logits[size_t(b)].data(), false};
                DF_TRY(model.forward_batch(slices));
              }
              *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              return {};
            };

            auto run_once = [&](const std::string& test, int n, double* secs) -> Status {
              std::vector<int32_t> toks(static_cast<size_t>(n));
              for (auto& t : toks) t = tok_dist(rng);
              auto st = model.new_state(n);
              std::vector<float> logits(static_cast<size_t>(V));
              if (o->cold && store) store->drop_cache();
              const auto t0 = std::chrono::steady_clock::now();
              if (test == "pp") {
                for (int i = 0; i < n; i += o->batch) {
                  const int b = std::min(o->batch, n - i);
                  DF_TRY(model.forward(*st, &toks[size_t(i)], b, logits.data(), false));
                }
              } else {
                for (int i = 0; i < n; ++i) DF_TRY(model.forward(*st, &toks[size_t(i)], 1, logits.data(), false));
              }
              *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              return {};
            };

            struct Test {
              std::string test;
              int n, par;
            };
            std::vector<Test> tests;
            for (int n : pps)
              if (n > 0) tests.push_back({"pp", n, 1});
            for (int n : tgs)
              if (n > 0)
                for (int b : pars) tests.push_back({"tg", n, b});

            const MemoryPlan& plan = engine->memory_plan();
            const uint64_t mem = plan.automatic ? 0 : plan.total;  // an explicit --mem, for the RSS warning
            const std::string mem_s = store ? fmt::format("{:.3f} GiB", plan.total / kGiB) : std::string("resident");
            const uint64_t file_bytes = engine->file().total_bytes();
            if (!o->json) {
              fmt::print("model: {} ({}, {:.3f} GiB: core {:.3f} GiB, experts {:.3f} GiB, {:.2f} MiB per expert)\n",
                         o->model, mi.arch, file_bytes / kGiB, mi.core_bytes / kGiB, mi.expert_bytes / kGiB,
                         mi.bytes_per_expert / kMiB);
              if (store) {
                const StoreStats s0 = store->stats();
                fmt::print("expert store: --mem {}, cache of {} experts ({:.1f} MiB{}), policy {}, {}\n", mem_s,
                           s0.slots, s0.slots * double(s0.slot_bytes) / kMiB,
                           s0.slots >= mi.n_expert * mi.n_moe_layers ? ", holds every expert" : "",
                           cache_policy_name(eo.stream.policy), s0.direct ? "O_DIRECT" : "buffered reads, pages dropped");
              }
              fmt::print("memory plan:\n{}", format_plan(plan));
              fmt::print("\n| {:>8} | {:>10} | {:>8} | {:>7} | {:>9} | {:>10} | {:>7} | {:>8} |\n", "test", "t/s", "+/-",
                         "hit %", "exp/token", "MiB/token", "GiB/s", "I/O wait");
              fmt::print("| {:->8} | {:->10} | {:->8} | {:->7} | {:->9} | {:->10} | {:->7} | {:->8} |\n", "", "", "", "", "",
                         "", "", "");
            }
            // tg with one sequence, per n: (t/s, expert lookups per token), for the
            // batching ratios of the --parallel rows.
            std::map<int, std::pair<double, double>> single;
            std::string batching;
            std::string core_lines;  // the paged core's reads, per test
            for (auto& [test, n, par] : tests) {
              TestResult r;
              r.test = test;
              r.n = n;
              r.par = par;
              auto measure = [&, par = par, n = n, &test = test](double* secs) {
                return par > 1 ? run_parallel(n, par, secs) : run_once(test, n, secs);
              };
              double secs = 0;
              if (!o->no_warmup) DF_CHECK_OR_EXIT(measure(&secs));
              const StoreStats before = store ? store->stats() : StoreStats{};
              const CorePager* pager = engine->core_pager();
              const CorePagerStats core_before = pager ? pager->stats() : CorePagerStats{};
              for (int rep = 0; rep < o->reps; ++rep) {
                DF_CHECK_OR_EXIT(measure(&secs));
                r.tps.push_back(double(n) * par / std::max(secs, 1e-9));
                r.seconds += secs;
              }
              if (store) r.io = store->stats() - before;
              CorePagerStats core;  // the paged core's reads over the measured runs
              if (pager) {
                const CorePagerStats a = pager->stats();
                core.pages_in = a.pages_in - core_before.pages_in;
                core.bytes_read = a.bytes_read - core_before.bytes_read;
                core.wait_s = a.wait_s - core_before.wait_s;
              }
              double mean = 0, var = 0;
              for (double v : r.tps) mean += v;
              mean /= double(r.tps.size());
              for (double v : r.tps) var += (v - mean) * (v - mean);
              const double sd = r.tps.size() > 1 ? std::sqrt(var / double(r.tps.size() - 1)) : 0.0;
              const double tokens = double(n) * par * o->reps;
              const double per_tok = double(r.io.bytes_read) / tokens;
              const double hit = store ? r.io.hit_rate() : 1.0;
              const double wait_frac = r.seconds > 0 ? r.io.wait_s / r.seconds : 0.0;
              const double lookups = double(r.io.hits + r.io.misses) / tokens;
              double x_one = 0, lookups_one = 0;
              if (test == "tg" && par == 1) single[n] = {mean, lookups};
              if (test == "tg" && par > 1 && single.count(n)) {
                x_one = mean / std::max(single[n].first, 1e-9);
                lookups_one = single[n].second > 0 ? lookups / single[n].second : 0.0;
                batching += fmt::format("{}  tg{} x{}: {:.2f}x the aggregate t/s of one sequence", batching.empty() ? "" : "\n",
                                        n, par, x_one);
                if (lookups_one > 0) batching += fmt::format(", {:.2f}x its expert lookups per token", lookups_one);
              }
              if (o->json) {
                nlohmann::json j;
                j["model"] = o->model;
                j["arch"] = mi.arch;
                j["model_bytes"] = file_bytes;
                j["test"] = test;
                j["n"] = n;
                j["parallel"] = par;
                j["reps"] = o->reps;
                j["tokens_per_second"] = mean;
                j["stddev"] = sd;
                j["samples_ts"] = r.tps;
                j["mem"] = store ? plan.total : 0;
                j["streaming"] = store != nullptr;
                j["cache_policy"] = cache_policy_name(eo.stream.policy);
                j["cache_slots"] = r.io.slots;
                j["bytes_read"] = r.io.bytes_read;
                j["bytes_per_token"] = per_tok;
                // What the cache misses require: every expert that had to come from
                // disk (a demand read, or a read ahead that was then used), at its
                // exact size; bytes_read over this is the I/O overhead (alignment,
                // unused reads ahead).
                const uint64_t needed = r.io.reads + r.io.prefetch_total().prefetch_used;
                j["bytes_per_expert"] = mi.bytes_per_expert;
                j["experts_needed"] = needed;
                j["bytes_needed_per_token"] = double(needed) * double(mi.bytes_per_expert) / tokens;
                j["prefetch_reads"] = r.io.prefetch_reads;
                j["hits"] = r.io.hits;
                j["expert_lookups_per_token"] = lookups;
                if (x_one > 0) j["x_vs_one_sequence"] = x_one;
                j["misses"] = r.io.misses;
                j["hit_rate"] = hit;
                j["evictions"] = r.io.evictions;
                j["read_gbps"] = r.io.read_gbps();
                j["io_busy_s"] = r.io.read_busy_s;
                j["io_wait_s"] = r.io.wait_s;
                j["io_wait_fraction"] = wait_frac;
                j["seconds"] = r.seconds;
                j["direct_io"] = r.io.direct;
                j["peak_rss"] = platform::peak_rss_bytes();
                if (pager) {
                  j["core_layer_reads"] = core.pages_in;
                  j["core_bytes_per_token"] = double(core.bytes_read) / tokens;
                  j["core_wait_fraction"] = r.seconds > 0 ? core.wait_s / r.seconds : 0.0;
                }
                // Next-layer prefetch over the measured runs: totals and per layer.
                const LayerPrefetchStats pt = r.io.prefetch_total();
                nlohmann::json pf;
                pf["mode"] = prefetch_mode_name(store ? r.io.prefetch : PrefetchMode::Off);
                pf["recall"] = pt.recall();
                pf["useful"] = pt.useful();
                pf["prefetched_experts"] = pt.prefetch_reads;
                pf["prefetched_bytes"] = pt.prefetch_bytes;
                pf["prefetched_bytes_used"] = pt.used_bytes_fraction();
                pf["layers"] = nlohmann::json::array();
                for (const LayerPrefetchStats& l : r.io.layers) {
                  if (l.predictions == 0) continue;
                  pf["layers"].push_back({{"layer", l.layer},
                                          {"recall", l.recall()},
                                          {"useful", l.useful()},
                                          {"prefetched_experts", l.prefetch_reads},
                                          {"prefetched_bytes_used", l.used_bytes_fraction()},
                                          {"on", l.on}});
                }
                j["prefetch"] = pf;
                fmt::print("{}\n", j.dump());
              } else {
                const std::string label = par > 1 ? fmt::format("{}{}x{}", test, n, par) : fmt::format("{}{}", test, n);
                fmt::print("| {:>8} | {:>10.2f} | {:>8.2f} | {:>7.1f} | {:>9.1f} | {:>10.2f} | {:>7.2f} | {:>7.1f}% |\n", label,
                           mean, sd, 100.0 * hit, lookups, per_tok / kMiB,
                           r.io.read_gbps() * 1e9 / kGiB, 100.0 * wait_frac);
                if (pager)
                  core_lines += fmt::format("  {}: {:.1f} layer reads, {:.2f} GiB a token ({:.2f} GiB/s), {:.1f}% of "
                                            "the time waiting for them\n",
                                            label, double(core.pages_in) / tokens, double(core.bytes_read) / tokens / kGiB,
                                            r.seconds > 0 ? double(core.bytes_read) / kGiB / r.seconds : 0.0,
                                            r.seconds > 0 ? 100.0 * core.wait_s / r.seconds : 0.0);
              }
              std::fflush(stdout);
            }
            const uint64_t rss = platform::peak_rss_bytes();
            if (!o->json && !batching.empty()) fmt::print("\nbatching (measured side by side):\n{}\n", batching);
            if (!o->json && !core_lines.empty()) fmt::print("\npaged core (model/core_pager.h):\n{}", core_lines);
            if (!o->json) fmt::print("\npeak RSS {:.3f} GiB\n", rss / kGiB);
            if (!o->json && store) {
              const std::string pf = format_prefetch_stats(store->stats());
              if (!pf.empty()) fmt::print("\n{}", pf);
            }
            if (store && mem && rss > mem)
              fmt::print(stderr, "warning: peak RSS {:.2f} GiB exceeded --mem {:.2f} GiB\n", rss / kGiB, mem / kGiB);
            return 0;
          }};
}

}  // namespace deltafin::tools
