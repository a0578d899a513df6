// Expert store tests: the streaming store against the resident one.
//   - every expert's views hold the same bytes (index, aligned reads, offsets);
//   - a whole model evaluated (prompt chunks, then one token at a time) through a
//     streaming store whose cache holds one or two experts gives bit-identical
//     logits, on every architecture synth can make, with both eviction policies,
//     O_DIRECT and buffered reads, and evictions really happen;
//   - the Engine's --mem path sizes the cache from the budget minus the core;
//   - acquire/release and request/acquire_any from several threads at once;
//   - the usage profile is written and warms the next store;
//   - next-layer prediction: predicted experts are read ahead without evicting
//     what a caller holds, and the layer's request scores the prediction;
//   - --verify: an expert changed in the file between two reads is an error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <cstring>
#include <random>
#include <thread>

#include "arch_names.h"
#include "io/direct_file.h"
#include "kernels/panels.h"
#include "kernels/types.h"
#include "model/linear.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/scheduler.h"
#include "store/streaming_store.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"
#include "gen_wait.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

// A tiny synthetic model of `arch`, written once per process; empty if synth (or the
// architecture's loader) cannot make it yet.
// `experts`: the routed experts' type (none: the preset's).
std::string tiny_model(const std::string& arch, std::string* why, std::optional<DType> experts = std::nullopt) {
  SynthSpec s;
  if (!synth_preset("tiny", arch, &s)) {
    *why = "no tiny preset";
    return {};
  }
  s.n_expert = std::max(s.n_expert, 8);
  s.skew = 0.5f;  // some experts popular, as in real models
  if (!experts) return synth_once("store", "tiny-" + arch, s, why);
  s.expert_type = *experts;
  return synth_once("store", "tiny-" + arch + "-" + std::string(dtype_name(*experts)), s, why);
}

struct Run {
  std::vector<float> logits;  // every position, [n, n_vocab]
  StoreStats stats;
  bool streamed = false;
};

// Evaluates `ids`: the prompt part in chunks of `chunk` tokens, then the rest one by one.
Result<Run> evaluate(const std::string& path, const EngineOptions& eo, const std::vector<int32_t>& ids,
                     int n_prompt, int chunk, StreamingExpertStore** store_out = nullptr) {
  DF_ASSIGN(auto engine, Engine::open(path, eo));
  Model& m = engine->model();
  const int64_t V = m.info().n_vocab;
  auto st = m.new_state(int(ids.size()));
  Run run;
  run.logits.resize(ids.size() * size_t(V));
  int i = 0;
  while (i < int(ids.size())) {
    const int b = i < n_prompt ? std::min(chunk, n_prompt - i) : 1;
    DF_TRY(m.forward(*st, &ids[size_t(i)], b, &run.logits[size_t(i) * size_t(V)], true));
    i += b;
  }
  StreamingExpertStore* s = engine->streaming_store();
  if (store_out) s = *store_out;
  if (s) {
    run.stats = s->stats();
    run.streamed = true;
  }
  return run;
}

std::vector<int32_t> random_ids(int n, int64_t n_vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> d(0, int32_t(std::min<int64_t>(n_vocab, 4000) - 1));
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

// EngineOptions whose store streams through a cache of `slots` experts.
EngineOptions streaming_options(int slots, CachePolicy policy, bool direct, StreamingExpertStore** out,
                                PrefetchMode prefetch = PrefetchMode::Off, ExpertLayout layout = {}) {
  EngineOptions eo;
  eo.threads = 2;
  eo.make_store = [=](ModelFile& f) -> Result<std::unique_ptr<ExpertStore>> {
    StreamingOptions so;
    so.max_slots = slots;
    so.policy = policy;
    so.direct = direct;
    so.io_threads = 4;
    so.prefetch = prefetch;
    so.layout = layout;
    DF_ASSIGN(auto s, make_streaming_expert_store(f, find_expert_layers(f), so));
    *out = s.get();
    return std::unique_ptr<ExpertStore>(std::move(s));
  };
  return eo;
}


// The tiny qwen3moe model, opened, and its expert layers: where most tests here start.
struct TinyQwen {
  std::string path;
  std::unique_ptr<ModelFile> file;
  std::vector<ExpertLayerInfo> layers;
  // Fails the calling test (call it inside ASSERT_NO_FATAL_FAILURE) if it cannot be made.
  void open() {
    std::string why;
    path = tiny_model("qwen3moe", &why);
    ASSERT_FALSE(path.empty()) << why;
    auto f = ModelFile::open(path, local_file_opener());
    ASSERT_TRUE(f.ok()) << f.error().message;
    file = std::move(*f);
    layers = find_expert_layers(*file);
    ASSERT_FALSE(layers.empty());
  }
};

// What an MoE layer does with the store: requests `experts` of `layer`, then takes
// and releases each as it lands.
void request_and_use(ExpertStore& s, int layer, std::vector<int32_t> experts) {
  s.request(layer, experts.data(), int(experts.size()));
  while (!experts.empty()) {
    int which = -1;
    ASSERT_TRUE(s.acquire_any(layer, experts.data(), int(experts.size()), &which).ok());
    s.release(layer, experts[size_t(which)]);
    experts.erase(experts.begin() + which);
  }
}

}  // namespace

TEST(ExpertStore, StreamedBytesMatchResident) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  auto resident = make_resident_expert_store(*m.file, m.layers);
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  for (bool direct : {true, false}) {
    StreamingOptions so;
    so.max_slots = 1;
    so.direct = direct;
    auto streaming = make_streaming_expert_store(*m.file, m.layers, so);
    ASSERT_TRUE(streaming.ok()) << streaming.error().message;
    for (const auto& l : m.layers) {
      for (int e = 0; e < l.n_expert; ++e) {
        auto a = (*resident)->acquire(l.layer, e);
        auto b = (*streaming)->acquire(l.layer, e);
        ASSERT_TRUE(a.ok() && b.ok());
        const Tensor* ta[3] = {&a->gate, &a->up, &a->down};
        const Tensor* tb[3] = {&b->gate, &b->up, &b->down};
        for (int p = 0; p < 3; ++p) {
          ASSERT_EQ(ta[p]->valid(), tb[p]->valid());
          if (!ta[p]->valid()) continue;
          ASSERT_EQ(ta[p]->type, tb[p]->type);
          for (int d = 0; d < 4; ++d) ASSERT_EQ(ta[p]->ne[d], tb[p]->ne[d]);
          const size_t bytes = ta[p]->row_bytes() * size_t(ta[p]->rows());
          ASSERT_EQ(std::memcmp(ta[p]->data, tb[p]->data, bytes), 0) << "layer " << l.layer << " expert " << e;
        }
        (*streaming)->release(l.layer, e);
        (*resident)->release(l.layer, e);
      }
    }
    const StoreStats s = (*streaming)->stats();
    EXPECT_EQ(s.slots, 1);
    EXPECT_GT(s.evictions, 0u);
    EXPECT_EQ(s.reads, uint64_t(m.layers.size()) * uint64_t(m.layers[0].n_expert));
    EXPECT_EQ(s.bytes_read % kDirectAlign, 0u);
  }
  // Out of range is an error, not a crash.
  StreamingOptions so;
  so.max_slots = 1;
  auto streaming = make_streaming_expert_store(*m.file, m.layers, so);
  ASSERT_TRUE(streaming.ok());
  EXPECT_FALSE((*streaming)->acquire(m.layers[0].layer, m.layers[0].n_expert).ok());
  EXPECT_FALSE((*streaming)->acquire(999, 0).ok());
}

// --verify (issue 22): an expert whose bytes in a local file change between two
// reads is a read error naming it, not different output; without --verify the
// change goes unnoticed (what the option is for), and unchanged re-reads pass.
TEST(ExpertStore, VerifyCatchesAnExpertChangedInTheFile) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  const std::string copy = test_dir("store") + "/verify.gguf";
  std::filesystem::copy_file(m.path, copy, std::filesystem::copy_options::overwrite_existing);
  auto file = ModelFile::open(copy, local_file_opener());
  ASSERT_TRUE(file.ok()) << file.error().message;
  const auto layers = find_expert_layers(**file);
  auto ix = ExpertIndex::build(**file, layers);
  ASSERT_TRUE(ix.ok());
  const int layer = layers[0].layer;
  const ExpertSlice gate = ix->slices(ix->key(0, 0)).part[kGate];
  for (bool verify : {true, false}) {
    StreamingOptions so;
    so.max_slots = 1;  // every other acquire evicts: expert 0 is read again
    so.verify = verify;
    so.prefetch = PrefetchMode::Off;
    auto st = make_streaming_expert_store(**file, layers, so);
    ASSERT_TRUE(st.ok()) << st.error().message;
    auto cycle = [&](int e) -> Status {
      auto w = (*st)->acquire(layer, e);
      if (!w.ok()) return w.error();
      (*st)->release(layer, e);
      return {};
    };
    ASSERT_TRUE(cycle(0).ok());
    ASSERT_TRUE(cycle(1).ok());
    ASSERT_TRUE(cycle(0).ok()) << "an unchanged expert read again passes";
    ASSERT_TRUE(cycle(1).ok());
    // Overwrite a byte of expert 0's gate part in the file, as another process could.
    const int fd = ::open(copy.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, off_t(gate.offset)), 1);
    b = char(~b);
    ASSERT_EQ(::pwrite(fd, &b, 1, off_t(gate.offset)), 1);
    ::fsync(fd);
    Status again = cycle(0);
    if (verify) {
      ASSERT_FALSE(again.ok());
      EXPECT_NE(again.error().message.find("expert 0 of layer " + std::to_string(layer) + " (gate part"),
                std::string::npos) << again.error().message;
      EXPECT_NE(again.error().message.find("changed while deltafin ran"), std::string::npos);
    } else {
      EXPECT_TRUE(again.ok()) << "without --verify nothing checks the bytes";
    }
    // Put the byte back for the next round.
    b = char(~b);
    ASSERT_EQ(::pwrite(fd, &b, 1, off_t(gate.offset)), 1);
    ::close(fd);
  }
}

// The point of the store: any cache size gives the same numbers as resident RAM.
TEST(ExpertStore, StreamingIsBitIdenticalOnEveryArchitecture) {
  int tested = 0;
  for (const char* arch : arch_names()) {
    SCOPED_TRACE(arch);
    std::string why;
    const std::string path = tiny_model(arch, &why);
    if (path.empty()) {
      std::printf("[ skipped  ] %s: synth cannot make it yet: %s\n", arch, why.c_str());
      continue;
    }
    EngineOptions resident_opts;
    resident_opts.threads = 2;
    auto probe = Engine::open(path, resident_opts);
    if (!probe.ok()) {
      std::printf("[ skipped  ] %s: cannot load it yet: %s\n", arch, probe.error().message.c_str());
      continue;
    }
    const int64_t V = (*probe)->model().info().n_vocab;
    const bool has_experts = (*probe)->model().info().n_moe_layers > 0;
    probe = Error{"closed"};
    const std::vector<int32_t> ids = random_ids(28, V, 7);
    const int n_prompt = 20, chunk = 8;
    auto ref = evaluate(path, resident_opts, ids, n_prompt, chunk);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    for (int slots : {1, 2}) {
      for (CachePolicy pol : {CachePolicy::LFU, CachePolicy::LRU}) {
        for (int variant = 0; variant < 3; ++variant) {
          // O_DIRECT, buffered, O_DIRECT with next-layer prefetch on.
          const bool direct = variant != 1;
          const PrefetchMode pf = variant == 2 ? PrefetchMode::On : PrefetchMode::Off;
          SCOPED_TRACE(fmt::format("slots {} policy {} direct {} prefetch {}", slots, cache_policy_name(pol), direct,
                                   prefetch_mode_name(pf)));
          StreamingExpertStore* store = nullptr;
          auto run = evaluate(path, streaming_options(slots, pol, direct, &store, pf), ids, n_prompt, chunk, &store);
          ASSERT_TRUE(run.ok()) << run.error().message;
          ASSERT_EQ(run->logits.size(), ref->logits.size());
          EXPECT_EQ(std::memcmp(run->logits.data(), ref->logits.data(), ref->logits.size() * sizeof(float)), 0)
              << "logits differ from the resident run";
          if (!has_experts) continue;
          const StoreStats& s = run->stats;
          EXPECT_EQ(s.slots, slots);
          EXPECT_GT(s.evictions, 0u) << "the cache was never full: the test proves nothing";
          EXPECT_GT(s.misses, 0u);
          EXPECT_GT(s.bytes_read, 0u);
          if (pf == PrefetchMode::Off) {
            EXPECT_EQ(s.reads, s.misses) << "one read per miss: nothing read twice for one lookup";
            continue;
          }
          // A miss is a demand read or joins a read ahead in flight.
          EXPECT_LE(s.reads, s.misses);
          EXPECT_GE(s.reads + s.prefetch_reads, s.misses);
          const LayerPrefetchStats t = s.prefetch_total();
          EXPECT_GT(t.predictions, 0u) << "no layer was predicted";
          EXPECT_LE(t.routed_predicted, t.routed);
          EXPECT_LE(t.prefetch_used, t.prefetch_reads);
        }
      }
    }
    std::printf("[ checked  ] %s%s\n", arch, has_experts ? "" : " (no routed experts)");
    ++tested;
  }
  EXPECT_GE(tested, 1);
}

// Row panels (kernels/panels.h): the resident store keeps experts of the types with
// panel kernels in panels (the views say so, and the bytes differ from the file's),
// the RAM cache keeps the file's bytes and converts the experts that prove hot in
// their slots, and the panel kernels over any of these give the same logits bit for
// bit, prompt batches and single tokens.
TEST(ExpertStore, PanelsAndFileRowsGiveTheSameBits) {
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::MXFP4}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    std::string why;
    const std::string path = tiny_model("qwen3moe", &why, type);
    ASSERT_FALSE(path.empty()) << why;
    auto file = ModelFile::open(path, local_file_opener());
    ASSERT_TRUE(file.ok()) << file.error().message;
    const auto layers = find_expert_layers(**file);
    auto resident = make_resident_expert_store(**file, layers, expert_layout());
    ASSERT_TRUE(resident.ok()) << resident.error().message;
    auto w = (*resident)->acquire(layers[0].layer, 0);
    ASSERT_TRUE(w.ok());
    ASSERT_EQ(w->up.type, type);
    const bool want = panels_wanted(type, w->up.rows(), w->up.cols());
    // The x86 sets have panel kernels for these types: otherwise the comparison below
    // proves nothing.
    if (selected_isa() == Isa::AVX2 || selected_isa() == Isa::AVX512) {
      ASSERT_TRUE(want) << "the tiny model's experts are not kept in panels";
    }
    EXPECT_EQ(w->up.panels, want);
    EXPECT_EQ(w->down.panels, panels_wanted(type, w->down.rows(), w->down.cols()));
    if (want) {
      auto plain = make_resident_expert_store(**file, layers);
      ASSERT_TRUE(plain.ok());
      auto v = (*plain)->acquire(layers[0].layer, 0);
      ASSERT_TRUE(v.ok());
      EXPECT_FALSE(v->up.panels);
      EXPECT_NE(std::memcmp(v->up.data, w->up.data, v->up.row_bytes() * size_t(v->up.rows())), 0);
    }

    EngineOptions resident_opts;
    resident_opts.threads = 2;
    auto probe = Engine::open(path, resident_opts);
    ASSERT_TRUE(probe.ok()) << probe.error().message;
    const int64_t V = (*probe)->model().info().n_vocab;
    probe = Error{"closed"};
    const std::vector<int32_t> ids = random_ids(24, V, 3);
    auto ref = evaluate(path, resident_opts, ids, 16, 8);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    int n_keys = 0;
    for (const ExpertLayerInfo& l : layers) n_keys += l.n_expert;
    for (bool hot : {false, true})
      for (bool direct : {true, false}) {
        SCOPED_TRACE(std::string(hot ? "hot experts converted" : "one slot") + (direct ? ", O_DIRECT" : ""));
        // One slot: every expert read again for each use. Half the experts: the
        // popular ones stay and are converted, the rest come and go.
        StreamingExpertStore* store = nullptr;
        const EngineOptions so = hot ? streaming_options(n_keys / 2, CachePolicy::LFU, direct, &store,
                                                         PrefetchMode::Off, expert_layout())
                                     : streaming_options(1, CachePolicy::LFU, direct, &store);
        auto run = evaluate(path, so, ids, 16, 8, &store);
        ASSERT_TRUE(run.ok()) << run.error().message;
        EXPECT_GT(run->stats.evictions, 0u);
        if (hot && want) EXPECT_GT(run->stats.converted, 0u) << "no expert was converted: the check proves nothing";
        if (!hot) EXPECT_EQ(run->stats.converted, 0u) << "converted without a layout";
        ASSERT_EQ(run->logits.size(), ref->logits.size());
        EXPECT_EQ(std::memcmp(run->logits.data(), ref->logits.data(), ref->logits.size() * sizeof(float)), 0)
            << "logits differ from the resident run";
      }
  }
}

// --mem: the Engine keeps the core resident and gives the rest to the cache.
TEST(ExpertStore, EngineBudget) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  auto ix = ExpertIndex::build(*m.file, m.layers);
  ASSERT_TRUE(ix.ok()) << ix.error().message;
  const uint64_t slot = expert_slot_bytes(*ix);
  EXPECT_GT(ix->core_bytes(), 0u);
  EXPECT_EQ(ix->core_bytes() + ix->expert_bytes() <= m.file->total_bytes(), true);

  EngineOptions eo;
  eo.threads = 2;
  eo.reserve_bytes = 1 << 20;
  eo.mem_bytes = ix->core_bytes() + eo.reserve_bytes + 3 * slot + slot / 2;
  eo.stream.profile_path = "";
  const std::vector<int32_t> ids = random_ids(12, 256, 3);
  auto run = evaluate(m.path, eo, ids, 8, 8);
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_TRUE(run->streamed);
  EXPECT_EQ(run->stats.slots, 3);
  EngineOptions ro;
  ro.threads = 2;
  auto ref = evaluate(m.path, ro, ids, 8, 8);
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(ref->streamed);
  EXPECT_EQ(std::memcmp(run->logits.data(), ref->logits.data(), ref->logits.size() * sizeof(float)), 0);

  // Too small a budget is a clear error.
  eo.mem_bytes = ix->core_bytes();
  auto bad = Engine::open(m.path, eo);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("too small"), std::string::npos) << bad.error().message;

  // Auto: a model that fits stays resident.
  eo.mem_bytes = EngineOptions::kMemAuto;
  auto fits = Engine::open(m.path, eo);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ((*fits)->streaming_store(), nullptr);
}

// Four threads acquiring, checking and releasing through a streaming store: two one
// expert at a time, two as MoE blocks do (a union requested, taken as they land).
// Every view must hold the file's bytes, or with Tensor::panels the resident panel
// store's (`panels`, when the store converts hot experts): never a mix. `skewed`:
// experts 0 and 1 take most of the uses, so that some prove hot.
struct ConcurrentUse {
  int bad = 0, lookups = 0;
  StoreStats stats;
};
ConcurrentUse use_concurrently(ExpertStore& st, StreamingExpertStore& stats_of, ExpertStore& file_bytes,
                               ExpertStore* panels, const std::vector<ExpertLayerInfo>& layers, bool skewed,
                               int iterations = 300) {
  std::atomic<int> bad{0}, lookups{0};
  auto same = [&](int layer, int e, const ExpertWeights& w) {
    auto r = (w.up.panels && panels ? *panels : file_bytes).acquire(layer, e);
    const size_t bytes = r->down.row_bytes() * size_t(r->down.rows());
    if (w.up.panels != r->up.panels || w.down.panels != r->down.panels ||
        std::memcmp(r->down.data, w.down.data, bytes) != 0 ||
        std::memcmp(r->up.data, w.up.data, r->up.row_bytes() * size_t(r->up.rows())) != 0)
      ++bad;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 g(uint32_t(100 + t));
      auto pick = [&](int n_expert) { return int32_t(skewed && g() % 4 != 0 ? g() % 2 : g() % uint32_t(n_expert)); };
      for (int it = 0; it < iterations; ++it) {
        const auto& l = layers[g() % layers.size()];
        if (t % 2 == 0) {
          const int e = pick(l.n_expert);
          ++lookups;
          auto w = st.acquire(l.layer, e);
          if (!w.ok()) {
            ++bad;
            continue;
          }
          same(l.layer, e, *w);
          st.release(l.layer, e);
        } else {
          std::vector<int32_t> want;
          const int n = 1 + int(g() % 3);
          for (int i = 0; i < n; ++i) {
            const int32_t e = pick(l.n_expert);
            if (std::find(want.begin(), want.end(), e) == want.end()) want.push_back(e);
          }
          lookups += int(want.size());
          st.request(l.layer, want.data(), int(want.size()));
          while (!want.empty()) {
            int which = -1;
            auto w = st.acquire_any(l.layer, want.data(), int(want.size()), &which);
            if (!w.ok() || which < 0 || which >= int(want.size())) {
              ++bad;
              break;
            }
            same(l.layer, want[size_t(which)], *w);
            st.release(l.layer, want[size_t(which)]);
            want.erase(want.begin() + which);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  return {bad.load(), lookups.load(), stats_of.stats()};
}

// Many threads through a 3-expert cache.
TEST(ExpertStore, ConcurrentAcquireRelease) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  auto resident = make_resident_expert_store(*m.file, m.layers);
  ASSERT_TRUE(resident.ok());
  for (CachePolicy pol : {CachePolicy::LFU, CachePolicy::LRU}) {
    StreamingOptions so;
    so.max_slots = 3;
    so.io_threads = 3;
    so.policy = pol;
    auto streaming = make_streaming_expert_store(*m.file, m.layers, so);
    ASSERT_TRUE(streaming.ok());
    const ConcurrentUse u = use_concurrently(**streaming, **streaming, **resident, nullptr, m.layers, false);
    EXPECT_EQ(u.bad, 0);
    const StoreStats& s = u.stats;
    EXPECT_GT(s.evictions, 0u);
    // Nothing a caller waited for was evicted before it got it: no read without a miss.
    EXPECT_LE(s.reads, s.misses) << format_stats(s);
    EXPECT_EQ(s.hits + s.misses, uint64_t(u.lookups)) << format_stats(s);
    EXPECT_LE(s.cached, 3);
  }
}

// The same with hot experts converted to panels in their slots while other threads
// want them (ram_cache.h): each caller gets the file's bytes or whole panels.
TEST(ExpertStore, HotExpertsConvertWhileOthersWait) {
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    std::string why;
    const std::string path = tiny_model("qwen3moe", &why, type);
    ASSERT_FALSE(path.empty()) << why;
    auto file = ModelFile::open(path, local_file_opener());
    ASSERT_TRUE(file.ok()) << file.error().message;
    const auto layers = find_expert_layers(**file);
    auto plain = make_resident_expert_store(**file, layers);
    auto panels = make_resident_expert_store(**file, layers, expert_layout());
    ASSERT_TRUE(plain.ok() && panels.ok());
    auto w = (*panels)->acquire(layers[0].layer, 0);
    ASSERT_TRUE(w.ok());
    if (!w->up.panels) GTEST_SKIP() << "no panel kernels for " << dtype_name(type) << " in this kernel set";
    StreamingOptions so;
    so.max_slots = 6;
    so.io_threads = 3;
    so.layout = expert_layout();
    auto streaming = make_streaming_expert_store(**file, layers, so);
    ASSERT_TRUE(streaming.ok());
    const ConcurrentUse u = use_concurrently(**streaming, **streaming, **plain, panels->get(), layers, true, 1000);
    EXPECT_EQ(u.bad, 0) << "a view's bytes were neither the file's nor whole panels";
    EXPECT_GT(u.stats.converted, 0u) << format_stats(u.stats);
    EXPECT_GT(u.stats.evictions, 0u) << format_stats(u.stats);
    EXPECT_EQ(u.stats.hits + u.stats.misses, uint64_t(u.lookups)) << format_stats(u.stats);
  }
}

// The usage profile survives the process and warms the next store's cache.
TEST(ExpertStore, UsageProfileWarmsTheCache) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  const std::string profile = test_dir("store") + "/sub/dir/tiny.profile";
  std::remove(profile.c_str());
  StreamingOptions so;
  so.max_slots = 2;
  so.profile_path = profile;
  const int hot_layer = m.layers.back().layer;
  {
    auto s = make_streaming_expert_store(*m.file, m.layers, so);
    ASSERT_TRUE(s.ok());
    for (int it = 0; it < 10; ++it) {
      for (int e : {3, 5}) {
        ASSERT_TRUE((*s)->acquire(hot_layer, e).ok());
        (*s)->release(hot_layer, e);
      }
    }
    ASSERT_TRUE((*s)->acquire(m.layers[0].layer, 1).ok());  // used once: not among the hottest
    (*s)->release(m.layers[0].layer, 1);
  }
  FILE* f = std::fopen(profile.c_str(), "r");
  ASSERT_NE(f, nullptr) << "profile not written";
  std::fclose(f);

  auto s = make_streaming_expert_store(*m.file, m.layers, so);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 500 && (*s)->stats().cached < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  StoreStats warm = (*s)->stats();
  EXPECT_EQ(warm.prefetch_reads, 2u);
  EXPECT_EQ(warm.cached, 2);
  ASSERT_NO_FATAL_FAILURE(request_and_use(**s, hot_layer, {3, 5}));
  const StoreStats after = (*s)->stats();
  EXPECT_EQ(after.hits, 2u);
  EXPECT_EQ(after.prefetch_hits, 2u);
  EXPECT_EQ(after.misses, 0u);
  EXPECT_EQ(after.reads, 0u);

  // A profile written for another model is ignored.
  {
    FILE* g = std::fopen(profile.c_str(), "w");
    std::fputs("deltafin-expert-profile 1\nmodel 1 2 3\n0 0 5\n", g);
    std::fclose(g);
    auto s2 = make_streaming_expert_store(*m.file, m.layers, so);
    ASSERT_TRUE(s2.ok());
    EXPECT_EQ((*s2)->stats().prefetch_reads, 0u);
  }
}

// Next-layer prediction at the store: predicted experts are read ahead into a full
// cache without evicting a pinned expert, and the layer's request scores the
// prediction (recall, useful reads).
TEST(ExpertStore, PredictionReadsAheadAndIsScored) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  ASSERT_GE(m.layers.size(), 2u);
  ASSERT_GE(m.layers[0].n_expert, 6);
  const int l0 = m.layers[0].layer, l1 = m.layers[1].layer;
  StreamingOptions so;
  so.max_slots = 6;
  so.prefetch = PrefetchMode::On;
  so.io_threads = 2;
  auto s = make_streaming_expert_store(*m.file, m.layers, so);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->wants_prediction(l1));
  // Layer l0's experts fill the cache; expert 0 stays pinned.
  ASSERT_TRUE((*s)->acquire(l0, 0).ok());
  for (int e = 1; e < 6; ++e) {
    ASSERT_TRUE((*s)->acquire(l0, e).ok());
    (*s)->release(l0, e);
  }
  ASSERT_EQ((*s)->stats().cached, 6);
  const std::vector<int32_t> predicted = {0, 1, 2};
  (*s)->predict(l1, predicted.data(), 3);
  for (int i = 0; i < 1000 && (*s)->stats().prefetch_reads < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (int i = 0; i < 1000; ++i) {  // and landed
    int ready = 0;
    for (int32_t e : predicted) {
      ExpertWeights w;
      if ((*s)->try_acquire_resident(l1, e, &w)) {
        ++ready;
        (*s)->release(l1, e);
      }
    }
    if (ready == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  StoreStats st = (*s)->stats();
  EXPECT_EQ(st.prefetch_reads, 3u);
  EXPECT_EQ(st.evictions, 3u) << "the reads ahead take unpinned experts' slots";
  ExpertWeights w;
  EXPECT_TRUE((*s)->try_acquire_resident(l0, 0, &w)) << "a read ahead evicted a pinned expert";
  (*s)->release(l0, 0);
  (*s)->release(l0, 0);

  // The layer routes to 0, 1 and 5: two of three predicted, two of three reads used.
  ASSERT_NO_FATAL_FAILURE(request_and_use(**s, l1, {0, 1, 5}));
  st = (*s)->stats();
  const LayerPrefetchStats* l = nullptr;
  for (const auto& x : st.layers)
    if (x.layer == l1) l = &x;
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->predictions, 1u);
  EXPECT_EQ(l->routed, 3u);
  EXPECT_EQ(l->routed_predicted, 2u);
  EXPECT_EQ(l->candidates, 3u);
  EXPECT_EQ(l->candidates_used, 2u);
  EXPECT_EQ(l->prefetch_reads, 3u);
  EXPECT_EQ(l->prefetch_used, 2u);
  EXPECT_EQ(st.hits, 2u) << format_stats(st);  // 0 and 1 of l1; l0's six and l1's 5 missed
  EXPECT_EQ(st.misses, 7u);
  EXPECT_EQ(st.reads, 7u);
  EXPECT_NE(format_prefetch_stats(st).find("recall  66.7%"), std::string::npos) << format_prefetch_stats(st);

  // Prefetch off: no prediction wanted, none recorded.
  so.prefetch = PrefetchMode::Off;
  auto off = make_streaming_expert_store(*m.file, m.layers, so);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE((*off)->wants_prediction(l1));
  (*off)->predict(l1, predicted.data(), 3);
  EXPECT_EQ((*off)->stats().prefetch_reads, 0u);
}

// Lending: the cache shrinks to at least a quarter of its slots (and 8) while memory
// is lent, frees what it holds over the limit once not in use (a pinned expert
// stays valid until released), and grows back when the memory returns.
TEST(ExpertStore, LendsMemoryAndTakesItBack) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  int n_keys = 0;
  for (const auto& l : m.layers) n_keys += l.n_expert;
  ASSERT_GE(n_keys, 16) << "the test needs more experts than the lending floor";
  StreamingOptions so;
  so.max_slots = n_keys;
  so.io_threads = 4;
  auto made = make_streaming_expert_store(*m.file, m.layers, so);
  ASSERT_TRUE(made.ok()) << made.error().message;
  StreamingExpertStore& s = **made;
  auto resident = make_resident_expert_store(*m.file, m.layers);
  ASSERT_TRUE(resident.ok());
  auto use_all = [&] {
    for (const auto& l : m.layers) {
      std::vector<int32_t> all(size_t(l.n_expert));
      std::iota(all.begin(), all.end(), 0);
      request_and_use(s, l.layer, all);
    }
  };
  auto same_as_resident = [&](int layer, int e) {
    auto a = (*resident)->acquire(layer, e);
    auto b = s.acquire(layer, e);
    EXPECT_TRUE(a.ok() && b.ok());
    const bool same = a.ok() && b.ok() &&
                      std::memcmp(a->down.data, b->down.data, a->down.row_bytes() * size_t(a->down.rows())) == 0;
    (*resident)->release(layer, e);
    s.release(layer, e);
    return same;
  };
  use_all();
  const uint64_t slot = s.stats().slot_bytes;
  EXPECT_EQ(s.stats().cached, n_keys);
  // An expert in use while the memory goes: still valid until it is released.
  const int l0 = m.layers[0].layer;
  auto pinned = s.acquire(l0, 0);
  ASSERT_TRUE(pinned.ok());
  const int floor = std::max(8, (n_keys + 3) / 4);
  EXPECT_EQ(s.lend_memory(uint64_t(n_keys) * slot * 2), uint64_t(n_keys - floor) * slot) << "lends at most 3/4";
  EXPECT_LE(s.stats().cached, floor + 1) << "the pinned one may stay over the limit";
  auto again = (*resident)->acquire(l0, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::memcmp(pinned->down.data, again->down.data, again->down.row_bytes() * size_t(again->down.rows())), 0);
  (*resident)->release(l0, 0);
  s.release(l0, 0);
  use_all();
  EXPECT_LE(s.stats().cached, floor) << "over the limit after use";
  for (const auto& l : m.layers)
    for (int e = 0; e < l.n_expert; ++e) ASSERT_TRUE(same_as_resident(l.layer, e)) << l.layer << " " << e;
  // A smaller loan replaces the first; then everything back.
  EXPECT_EQ(s.lend_memory(slot * 3 / 2), 2 * slot) << "whole slots";
  use_all();
  EXPECT_LE(s.stats().cached, n_keys - 2);
  s.return_memory();
  use_all();
  EXPECT_EQ(s.stats().cached, n_keys) << "the cache grows back";
  for (const auto& l : m.layers)
    for (int e = 0; e < l.n_expert; ++e) ASSERT_TRUE(same_as_resident(l.layer, e)) << l.layer << " " << e;
}

// A server's sequence states come out of --mem: first from what the cache's whole
// slots leave of its budget, then in whole slots; asking too much is an error that
// changes nothing. A resident model has no cache to take from.
TEST(ExpertStore, SequenceStatesComeOutOfTheBudget) {
  TinyQwen m;
  ASSERT_NO_FATAL_FAILURE(m.open());
  auto ix = ExpertIndex::build(*m.file, m.layers);
  ASSERT_TRUE(ix.ok()) << ix.error().message;
  const uint64_t slot = expert_slot_bytes(*ix);
  ASSERT_GE(ix->n_keys(), 12);
  EngineOptions eo;
  eo.threads = 2;
  eo.reserve_bytes = 1 << 20;
  eo.mem_bytes = ix->core_bytes() + eo.reserve_bytes + 10 * slot + slot / 2;
  eo.stream.profile_path = "";
  auto e = Engine::open(m.path, eo);
  ASSERT_TRUE(e.ok()) << e.error().message;
  StreamingExpertStore* store = (*e)->streaming_store();
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(store->stats().slots, 10);
  // A context whose state takes about 1.6 slots: two take 3.2, half a slot of it
  // from the spare budget, the rest in 3 whole slots.
  const Model& model = (*e)->model();
  const uint64_t per_pos = model.state_bytes(2) - model.state_bytes(1);
  ASSERT_GT(per_pos, 0u);
  const int ctx = int(slot * 8 / 5 / per_pos);
  const uint64_t one = model.state_bytes(ctx);
  // Refused first: nothing is taken, and the engine may still plan.
  auto bad = (*e)->plan_sequences({.n_ctx = ctx, .n_states = 100, .serving = true});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("100 sequence states of " + std::to_string(ctx) + " positions"), std::string::npos)
      << bad.error().message;
  EXPECT_EQ(store->stats().slots, 10) << "a refused plan takes nothing";
  auto r = (*e)->plan_sequences({.n_ctx = ctx, .n_states = 2, .serving = true});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*e)->memory_plan().state_bytes, one);
  const uint64_t from_slots = 2 * one - slot / 2;
  EXPECT_EQ(store->stats().slots, 10 - int((from_slots + slot - 1) / slot));
  EXPECT_EQ((*e)->memory_plan().slots, store->stats().slots) << "the plan counts what the store has";
  const int slots = store->stats().slots;
  EXPECT_FALSE((*e)->plan_sequences({.n_ctx = ctx, .n_states = 1}).ok()) << "planned once";
  // Lending is a share of what remains.
  EXPECT_EQ(store->lend_memory(100 * slot), uint64_t(slots - std::min(slots, 8)) * slot);
  EXPECT_EQ((*e)->memory_plan().prompt_lend, uint64_t(slots - std::min(slots, 8)) * slot);
  store->return_memory();
  EXPECT_EQ(store->stats().slots, slots);

  EngineOptions ro;
  ro.threads = 2;
  auto resident = Engine::open(m.path, ro);
  ASSERT_TRUE(resident.ok());
  auto rr = (*resident)->plan_sequences({.n_ctx = ctx, .n_states = 100, .serving = true});
  ASSERT_TRUE(rr.ok()) << rr.error().message;
  EXPECT_EQ((*resident)->memory_plan().state_bytes, one);
  EXPECT_EQ((*resident)->memory_plan().states_from_cache, 0u);
}

// The tiny qwen3moe model with 32 experts a layer (more than a cache of half of them holds).
static void tiny_e32(SynthSpec* spec, std::string* path) {
  ASSERT_TRUE(synth_preset("tiny", "qwen3moe", spec));
  spec->n_expert = 32;
  std::string why;
  *path = synth_once("store", "tiny-qwen3moe-e32", *spec, &why);
  ASSERT_FALSE(path->empty()) << why;
}

// A long prompt with the automatic batch: one forward pass over the whole prompt in
// memory the cache lends (and gets back), generating what 512-token batches and a
// resident run generate.
TEST(ExpertStore, AutoPromptBatchBorrowsFromTheCache) {
  SynthSpec spec;
  std::string path;
  ASSERT_NO_FATAL_FAILURE(tiny_e32(&spec, &path));
  const int n_keys = 32 * spec.n_layer;
  std::vector<int32_t> gen[3];
  GenerateStats stats[3];
  for (int run = 0; run < 3; ++run) {  // resident; streaming, auto batch; streaming, -b 512
    StreamingExpertStore* store = nullptr;
    EngineOptions eo = run == 0 ? EngineOptions{} : streaming_options(n_keys / 2, CachePolicy::LFU, true, &store);
    eo.threads = 2;
    auto engine = Engine::open(path, eo);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    auto tok = Tokenizer::from_gguf((*engine)->file().meta());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto prompt = random_ids(700, (*engine)->model().info().n_vocab, 5);
    auto st = (*engine)->model().new_state(720);
    GenerateParams gp;
    gp.n_predict = 8;
    gp.sampling.temperature = 0;
    gp.ignore_eos = true;
    gp.store = store;
    gp.n_batch = run == 2 ? 512 : 0;
    ASSERT_TRUE(generate((*engine)->model(), *st, *tok, prompt, gp, [](const std::string&) { return true; },
                         &stats[run])
                    .ok());
    gen[run] = stats[run].tokens;
    if (store) {
      EXPECT_EQ(store->lend_memory(0), 0u) << "nothing still lent";
    }
  }
  EXPECT_EQ(stats[0].prefill_batches, 2) << "no store: 512-token batches";
  EXPECT_EQ(stats[1].prefill_batches, 1) << "the whole prompt in one batch";
  EXPECT_GT(stats[1].prefill_lent_bytes, 0u) << "slots " << n_keys / 2;
  EXPECT_EQ(stats[2].prefill_batches, 2);
  EXPECT_EQ(stats[2].prefill_lent_bytes, 0u);
  EXPECT_LT(stats[1].prefill_bytes_read, stats[2].prefill_bytes_read) << "one batch reads each expert once";
  EXPECT_EQ(gen[1], gen[0]);
  EXPECT_EQ(gen[2], gen[0]);
}

// The server's scheduler does the same while no sequence decodes: a long prompt goes
// in steps larger than prefill_chunk with memory the expert cache lends, reads fewer
// expert bytes than in prefill_chunk steps and gives the same tokens; the memory goes
// back when the prompt is in. While another request decodes, steps stay at
// prefill_chunk (it would wait on them).
TEST(ExpertStore, SchedulerPromptStepsBorrowFromTheCacheWhileNobodyDecodes) {
  SynthSpec spec;
  std::string path;
  ASSERT_NO_FATAL_FAILURE(tiny_e32(&spec, &path));
  const int n_keys = 32 * spec.n_layer;
  std::string text[3];
  uint64_t bytes[3] = {};
  for (int run = 0; run < 3; ++run) {  // 0: no lending; 1: lending, alone; 2: lending beside a decoding request
    SCOPED_TRACE(run);
    StreamingExpertStore* store = nullptr;
    auto engine = Engine::open(path, streaming_options(n_keys / 2, CachePolicy::LFU, true, &store));
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    auto tok = Tokenizer::from_gguf((*engine)->file().meta());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    SchedulerOptions so;
    so.n_ctx = 720;
    so.prefill_chunk = 64;
    so.spec_max = 0;
    so.store = run ? store : nullptr;
    Scheduler sched((*engine)->model(), *tok, so);
    GenRequest r;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    SubmitError err;
    std::string msg;
    std::shared_ptr<GenHandle> other;
    if (run == 2) {  // decoding (its first text is out) before the long prompt comes
      r.prompt = random_ids(8, (*engine)->model().info().n_vocab, 9);
      r.max_tokens = 400;
      other = sched.submit(r, &err, &msg);
      ASSERT_TRUE(other) << msg;
      std::string first;
      wait_first_text(*other, &first);
    }
    r.prompt = random_ids(700, (*engine)->model().info().n_vocab, 5);
    r.max_tokens = 6;
    const uint64_t b0 = store->stats().bytes_read;
    auto h = sched.submit(r, &err, &msg);
    ASSERT_TRUE(h) << msg;
    wait_done(*h, &text[run]);
    bytes[run] = store->stats().bytes_read - b0;
    const SchedulerStats ss = sched.stats();
    if (run == 1) EXPECT_GT(ss.max_prefill_rows, 64) << "slots " << n_keys / 2;
    else EXPECT_EQ(ss.max_prefill_rows, 64);
    EXPECT_EQ(ss.prefill_lent_bytes, 0u) << "given back once the prompt is in";
    if (other) other->cancel();
  }
  EXPECT_EQ(text[1], text[0]);
  EXPECT_EQ(text[2], text[0]);
  EXPECT_LT(bytes[1], bytes[0]) << "fewer, larger steps read each expert fewer times";
}
