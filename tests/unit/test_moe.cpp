// route() and moe_ffn() on their own: the router picks the top-k by the
// architecture's scoring (softmax or sigmoid, score bias for selection only, expert
// groups) and normalises and scales the weights as configured; the routed FFN over
// a real resident store (a tiny qwen3moe file, F32 experts) equals the weighted sum
// of each chosen expert's down(silu(gate x) * up x), computed here in double.
// moe_ffn is called with today's signature; when the MoE call takes a "resident
// experts only" argument, only the two calls below change.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "format/model_file.h"
#include "model/model.h"
#include "model/moe.h"
#include "synth_once.h"

namespace deltafin {
namespace {

// The k indices of the largest values, largest first (ties: lower index first).
std::vector<int32_t> top(const std::vector<double>& v, int k) {
  std::vector<int32_t> i(v.size());
  std::iota(i.begin(), i.end(), 0);
  std::stable_sort(i.begin(), i.end(), [&](int32_t a, int32_t b) { return v[size_t(a)] > v[size_t(b)]; });
  i.resize(size_t(k));
  return i;
}

std::vector<double> softmax(const std::vector<float>& l) {
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t e = 0; e < l.size(); ++e) s += p[e] = std::exp(double(l[e]) - m);
  for (double& x : p) x /= s;
  return p;
}

struct Routed {
  std::vector<int32_t> sel;
  std::vector<float> w;
};
Routed run_route(const RouterConfig& rc, std::vector<float> logits) {
  Routed r{std::vector<int32_t>(size_t(rc.n_used)), std::vector<float>(size_t(rc.n_used))};
  route(rc, logits.data(), 1, r.sel.data(), r.w.data());
  return r;
}

TEST(Route, SoftmaxTopKWithNormalisedWeights) {
  const std::vector<float> logits = {0.3f, 2.0f, -1.0f, 1.5f, 0.9f, 2.4f, -0.2f, 0.0f};
  RouterConfig rc;
  rc.gating = Gating::Softmax;
  rc.n_expert = 8;
  rc.n_used = 3;
  const std::vector<double> p = softmax(logits);
  const std::vector<int32_t> want = top(p, 3);  // 5, 1, 3
  ASSERT_EQ(want, (std::vector<int32_t>{5, 1, 3}));

  Routed raw = run_route(rc, logits);
  EXPECT_EQ(raw.sel, want);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(raw.w[size_t(k)], p[size_t(want[size_t(k)])], 1e-6) << k;

  rc.norm_weights = true;
  Routed norm = run_route(rc, logits);
  EXPECT_EQ(norm.sel, want);
  const double sum = p[5] + p[1] + p[3];
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(norm.w[size_t(k)], p[size_t(want[size_t(k)])] / sum, 1e-6) << k;
  EXPECT_NEAR(norm.w[0] + norm.w[1] + norm.w[2], 1.0f, 1e-6);

  rc.weights_scale = 2.5f;  // applied after normalising
  Routed scaled = run_route(rc, logits);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(scaled.w[size_t(k)], 2.5 * p[size_t(want[size_t(k)])] / sum, 1e-5) << k;
}

TEST(Route, SigmoidScoreBiasChoosesButDoesNotWeigh) {
  const std::vector<float> logits = {1.0f, 0.5f, 2.0f, -0.5f};
  RouterConfig rc;
  rc.gating = Gating::Sigmoid;
  rc.n_expert = 4;
  rc.n_used = 2;
  auto sig = [](float x) { return 1.0 / (1.0 + std::exp(-double(x))); };
  Routed plain = run_route(rc, logits);
  EXPECT_EQ(plain.sel, (std::vector<int32_t>{2, 0}));
  EXPECT_NEAR(plain.w[0], sig(2.0f), 1e-6);
  EXPECT_NEAR(plain.w[1], sig(1.0f), 1e-6);
  // A bias lifts expert 3 over 0 and 2 for the choice; its weight stays sigmoid(logit).
  const float bias[4] = {0.0f, 0.0f, 0.0f, 0.9f};
  rc.score_bias = bias;
  Routed biased = run_route(rc, logits);
  EXPECT_EQ(biased.sel, (std::vector<int32_t>{3, 2}));  // sigmoid(-0.5)+0.9 = 1.278 > sigmoid(2) = 0.881
  EXPECT_NEAR(biased.w[0], sig(-0.5f), 1e-6);
  EXPECT_NEAR(biased.w[1], sig(2.0f), 1e-6);
}

TEST(Route, ExpertGroupsKeepTheGroupsWithTheBestTwo) {
  // Two groups of 4. Group 0 holds the single best expert (0) but group 1's best two
  // sum higher, so only group 1's experts may be chosen.
  const std::vector<float> logits = {3.0f, -4.0f, -4.0f, -4.0f, 2.5f, 2.4f, -4.0f, 1.0f};
  RouterConfig rc;
  rc.gating = Gating::Sigmoid;
  rc.n_expert = 8;
  rc.n_used = 2;
  rc.n_group = 2;
  rc.n_group_used = 1;
  Routed g = run_route(rc, logits);
  EXPECT_EQ(g.sel, (std::vector<int32_t>{4, 5}));
  rc.n_group = 1;
  Routed flat = run_route(rc, logits);
  EXPECT_EQ(flat.sel, (std::vector<int32_t>{0, 4}));
}

// F32 expert weights as doubles: w [rows, cols] row-major (a 2-D Tensor view).
double dot_row(const Tensor& w, int64_t row, const std::vector<double>& x) {
  EXPECT_EQ(w.type, DType::F32);
  const float* r = static_cast<const float*>(w.data) + row * w.ne[0];
  double s = 0;
  for (int64_t c = 0; c < w.ne[0]; ++c) s += double(r[c]) * x[size_t(c)];
  return s;
}

TEST(MoeFfn, EqualsTheWeightedSumOfTheChosenExperts) {
  SynthSpec s;
  ASSERT_TRUE(synth_preset("tiny", "qwen3moe", &s));
  ASSERT_EQ(s.expert_type, DType::F32);
  std::string why;
  const std::string path = synth_once("moe", "tiny-qwen3moe", s, &why);
  ASSERT_FALSE(path.empty()) << why;
  auto file = ModelFile::open(path, local_file_opener());
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto store = make_resident_expert_store(**file, find_expert_layers(**file));
  ASSERT_TRUE(store.ok()) << store.error().message;

  const int n_tok = 3, K = 2, layer = 1;
  const int64_t E = s.n_embd;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_tok) * size_t(E));
  for (float& v : x) v = nd(rng);
  // Tokens share experts 4 and 6 (one read, several rows); one weight is negative,
  // which no router gives but the sum must still follow.
  const std::vector<int32_t> sel = {1, 6, 4, 0, 6, 4};
  const std::vector<float> w = {0.7f, 0.3f, 0.55f, 0.45f, 1.2f, -0.2f};
  std::vector<float> out(x.size());
  ThreadPool pool(2);
  ASSERT_TRUE(moe_ffn(&pool, **store, layer, x.data(), n_tok, E, E, K, sel.data(), w.data(), {}, out.data(),
                      /*resident_only=*/false).ok());

  double max_err = 0, max_ref = 0;
  for (int t = 0; t < n_tok; ++t) {
    std::vector<double> xt(x.begin() + t * E, x.begin() + (t + 1) * E), want(size_t(E), 0.0);
    for (int k = 0; k < K; ++k) {
      auto ew = (*store)->acquire(layer, sel[size_t(t * K + k)]);
      ASSERT_TRUE(ew.ok());
      const int64_t F = ew->up.ne[1];
      std::vector<double> act(static_cast<size_t>(F));
      for (int64_t f = 0; f < F; ++f) {
        const double g = dot_row(ew->gate, f, xt), u = dot_row(ew->up, f, xt);
        act[size_t(f)] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int64_t e = 0; e < E; ++e) want[size_t(e)] += double(w[size_t(t * K + k)]) * dot_row(ew->down, e, act);
      (*store)->release(layer, sel[size_t(t * K + k)]);
    }
    for (int64_t e = 0; e < E; ++e) {
      max_err = std::max(max_err, std::abs(double(out[size_t(t * E + e)]) - want[size_t(e)]));
      max_ref = std::max(max_ref, std::abs(want[size_t(e)]));
    }
  }
  ASSERT_GT(max_ref, 1e-3);  // the experts compute something
  EXPECT_LT(max_err, 1e-4 * max_ref + 1e-6) << "max |out - reference| " << max_err << " of " << max_ref;
}

}  // namespace
}  // namespace deltafin
