// Batched forward passes (Model::forward_batch), on tiny synthetic models of each
// architecture that batches:
//   - three sequences of different lengths and positions, evaluated together over
//     several steps (prompts, then decode steps mixed with a prompt chunk), give
//     bit-identical logits to evaluating each sequence alone with the same chunks;
//   - in every batched step each MoE layer asks the expert store for each expert at
//     most once (the union), and fewer times than the sequences alone do;
//   - a bad slice is refused before any state changes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "arch_names.h"
#include "model/linear.h"
#include "runtime/engine.h"
#include "synth/synth.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

// Written once per process; empty if synth cannot make it.
std::string tiny_model(const std::string& arch) {
  // "deepseek2-legacy": deepseek2 with the legacy MLA form (one attn_kv_b, an MHA cache).
  const bool legacy = arch == "deepseek2-legacy";
  SynthSpec s;
  if (!synth_preset("tiny", legacy ? "deepseek2" : arch, &s)) return {};
  if (legacy) s.mla_split_kv_b = false;
  s.n_expert = 16;  // more experts than one step's tokens use, so sharing is visible
  s.n_used = 2;
  s.skew = 0.5f;
  return synth_once("batch", "tiny-" + arch, s, nullptr);
}

// Counts, per (layer, expert), how often the model took an expert from the store.
class CountingStore final : public ExpertStore {
 public:
  explicit CountingStore(std::unique_ptr<ExpertStore> inner) : inner_(std::move(inner)) {}
  Result<ExpertWeights> acquire(int layer, int expert) override {
    count(layer, expert);
    return inner_->acquire(layer, expert);
  }
  void release(int layer, int expert) override { inner_->release(layer, expert); }
  void request(int layer, const int32_t* experts, int n) override { inner_->request(layer, experts, n); }
  Result<ExpertWeights> acquire_any(int layer, const int32_t* experts, int n, int* which) override {
    auto r = inner_->acquire_any(layer, experts, n, which);
    if (r.ok()) count(layer, experts[*which]);
    return r;
  }
  std::map<std::pair<int, int>, int> take() {
    std::lock_guard<std::mutex> lk(mu_);
    return std::exchange(counts_, {});
  }

 private:
  void count(int layer, int expert) {
    std::lock_guard<std::mutex> lk(mu_);
    ++counts_[{layer, expert}];
  }
  std::unique_ptr<ExpertStore> inner_;
  std::mutex mu_;
  std::map<std::pair<int, int>, int> counts_;
};

struct Opened {
  std::unique_ptr<Engine> engine;
  CountingStore* store = nullptr;
};

Opened open_counting(const std::string& path) {
  Opened o;
  EngineOptions eo;
  eo.threads = 2;
  eo.make_store = [&o](ModelFile& f) -> Result<std::unique_ptr<ExpertStore>> {
    DF_ASSIGN(auto inner, make_resident_expert_store(f, find_expert_layers(f), expert_layout()));
    auto c = std::make_unique<CountingStore>(std::move(inner));
    o.store = c.get();
    return std::unique_ptr<ExpertStore>(std::move(c));
  };
  auto e = Engine::open(path, eo);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  if (e.ok()) o.engine = std::move(e).value();
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One step of the plan: for each sequence, how many of its next tokens to evaluate
// (0: none this step), and whether it wants every position's logits.
struct Step {
  std::vector<int> n;
  std::vector<bool> all;
};

}  // namespace

class BatchForward : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchForward, MatchesSeparatePassesBitForBitAndSharesExperts) {
  const std::string arch = GetParam();
  const std::string path = tiny_model(arch);
  ASSERT_FALSE(path.empty()) << "synth cannot make a tiny " << arch;
  Opened batched = open_counting(path), alone = open_counting(path);
  ASSERT_TRUE(batched.engine && alone.engine);
  Model& mb = batched.engine->model();
  Model& ma = alone.engine->model();
  ASSERT_TRUE(mb.batches()) << arch << " should override forward_batch";
  const int64_t V = mb.info().n_vocab;

  // Three sequences; their tokens are fixed up front (what a sampler would pick does
  // not matter here, only that both sides evaluate the same tokens).
  const std::vector<std::vector<int32_t>> toks = {
      {1, 17, 33, 250, 9, 9, 120, 77, 5, 64, 3},
      {200, 41, 42, 43, 8, 100, 6},
      {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26},
  };
  const std::vector<Step> plan = {
      {{7, 3, 0}, {false, true, false}},   // two prompts; the third waits
      {{1, 1, 9}, {false, false, true}},   // decodes + a prompt
      {{1, 1, 4}, {false, false, false}},  // decodes + the prompt's last chunk
      {{1, 1, 1}, {true, false, false}},   // three decodes
      {{1, 0, 1}, {false, false, false}},  // one sequence sits out
  };
  std::vector<std::unique_ptr<SeqState>> sb, sa;
  for (int i = 0; i < 3; ++i) {
    sb.push_back(mb.new_state(64));
    sa.push_back(ma.new_state(64));
  }
  std::vector<int> done(3, 0);
  int shared_steps = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    const Step& st = plan[k];
    std::vector<BatchSlice> slices;
    std::vector<std::vector<float>> got(3), want(3);
    std::map<std::pair<int, int>, int> alone_counts;
    for (int i = 0; i < 3; ++i) {
      const int n = st.n[size_t(i)];
      if (n == 0) continue;
      ASSERT_LE(done[size_t(i)] + n, int(toks[size_t(i)].size()));
      const int32_t* t = &toks[size_t(i)][size_t(done[size_t(i)])];
      const size_t rows = st.all[size_t(i)] ? size_t(n) : 1;
      got[size_t(i)].assign(rows * size_t(V), 0.0f);
      want[size_t(i)].assign(rows * size_t(V), 0.0f);
      slices.push_back({sb[size_t(i)].get(), t, n, got[size_t(i)].data(), st.all[size_t(i)]});
      Status s = ma.forward(*sa[size_t(i)], t, n, want[size_t(i)].data(), st.all[size_t(i)]);
      ASSERT_TRUE(s.ok()) << s.error().message;
      for (auto& [key, c] : alone.store->take()) alone_counts[key] += c;
      done[size_t(i)] += n;
    }
    alone.store->take();
    Status s = mb.forward_batch(slices);
    ASSERT_TRUE(s.ok()) << s.error().message;
    const auto counts = batched.store->take();
    for (int i = 0; i < 3; ++i) {
      if (st.n[size_t(i)] == 0) continue;
      EXPECT_TRUE(same_bits(got[size_t(i)], want[size_t(i)]))
          << arch << " step " << k << " sequence " << i << ": batched logits differ from the sequence alone";
      EXPECT_EQ(sb[size_t(i)]->n_past, sa[size_t(i)]->n_past);
    }
    // Each (layer, expert) once per step, and every expert the sequences needed alone.
    int total = 0, total_alone = 0;
    for (auto& [key, c] : counts) {
      EXPECT_EQ(c, 1) << arch << " step " << k << ": layer " << key.first << " expert " << key.second
                      << " was taken " << c << " times";
      total += c;
    }
    for (auto& [key, c] : alone_counts) {
      EXPECT_TRUE(counts.count(key)) << "layer " << key.first << " expert " << key.second << " missing";
      total_alone += c;
    }
    EXPECT_LE(total, total_alone);
    if (slices.size() > 1 && total < total_alone) ++shared_steps;
  }
  EXPECT_GT(shared_steps, 0) << "no batched step loaded fewer experts than the sequences alone";
}

TEST_P(BatchForward, BadSliceChangesNothing) {
  const std::string path = tiny_model(GetParam());
  ASSERT_FALSE(path.empty());
  Opened o = open_counting(path);
  ASSERT_TRUE(o.engine);
  Model& m = o.engine->model();
  const int64_t V = m.info().n_vocab;
  auto a = m.new_state(8), b = m.new_state(8);
  std::vector<float> la(static_cast<size_t>(V)), lb(static_cast<size_t>(V));
  const int32_t good[2] = {1, 2};
  const int32_t bad[1] = {int32_t(V)};  // out of range
  std::vector<BatchSlice> slices = {{a.get(), good, 2, la.data(), false}, {b.get(), bad, 1, lb.data(), false}};
  Status s = m.forward_batch(slices);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("batch slice 1"), std::string::npos) << s.error().message;
  EXPECT_EQ(a->n_past, 0);
  slices = {{a.get(), good, 2, la.data(), false}, {a.get(), good, 1, lb.data(), false}};
  EXPECT_FALSE(m.forward_batch(slices).ok()) << "one state twice must be refused";
  const int32_t many[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  slices = {{b.get(), many, 9, lb.data(), false}};
  s = m.forward_batch(slices);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("context"), std::string::npos) << s.error().message;
}

INSTANTIATE_TEST_SUITE_P(Arch, BatchForward, ::testing::ValuesIn(arch_names({"deepseek2-legacy"})),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });
