// Each sampling control does what it promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "runtime/sampler.h"

using namespace deltafin;

namespace {
std::vector<float> random_logits(int n, uint64_t seed) {
  std::mt19937_64 r(seed);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(r);
  return v;
}
}  // namespace

TEST(Sampler, TemperatureZeroIsGreedy) {
  for (uint64_t s = 0; s < 20; ++s) {
    auto l = random_logits(1000, s);
    SamplingParams p;
    p.temperature = 0;
    Sampler smp(p);
    auto copy = l;
    EXPECT_EQ(smp.sample(copy.data(), 1000), argmax(l.data(), 1000));
  }
}

TEST(Sampler, FixedSeedReproduces) {
  auto l = random_logits(500, 7);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 1234;
  std::vector<int32_t> a, b;
  Sampler s1(p), s2(p);
  for (int i = 0; i < 200; ++i) {
    auto c1 = l, c2 = l;
    a.push_back(s1.sample(c1.data(), 500));
    b.push_back(s2.sample(c2.data(), 500));
  }
  EXPECT_EQ(a, b);
  // And a different seed gives a different sequence.
  p.seed = 99;
  Sampler s3(p);
  std::vector<int32_t> c;
  for (int i = 0; i < 200; ++i) {
    auto c3 = l;
    c.push_back(s3.sample(c3.data(), 500));
  }
  EXPECT_NE(a, c);
}

TEST(Sampler, TopKNeverLeavesTheTopK) {
  auto l = random_logits(300, 3);
  std::vector<int32_t> order(300);
  for (int i = 0; i < 300; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[size_t(a)] > l[size_t(b)]; });
  std::set<int32_t> top(order.begin(), order.begin() + 5);
  SamplingParams p;
  p.temperature = 5.0f;  // flat: without top-k anything would be drawn
  p.top_k = 5;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 1;
  Sampler s(p);
  for (int i = 0; i < 2000; ++i) {
    auto c = l;
    EXPECT_TRUE(top.count(s.sample(c.data(), 300)));
  }
}

TEST(Sampler, TopPNeverLeavesTheNucleus) {
  auto l = random_logits(200, 11);
  // Nucleus at temperature 1: smallest prefix of sorted probabilities with mass >= p.
  std::vector<int32_t> order(200);
  for (int i = 0; i < 200; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return l[size_t(a)] > l[size_t(b)]; });
  double z = 0;
  for (float x : l) z += std::exp(double(x));
  std::set<int32_t> nucleus;
  double cum = 0;
  for (int32_t id : order) {
    nucleus.insert(id);
    cum += std::exp(double(l[size_t(id)])) / z;
    if (cum >= 0.5) break;
  }
  ASSERT_LT(nucleus.size(), 200u);
  SamplingParams p;
  p.temperature = 3.0f;
  p.top_k = 0;
  p.top_p = 0.5f;
  p.min_p = 0;
  p.seed = 5;
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < 3000; ++i) {
    auto c = l;
    int32_t id = s.sample(c.data(), 200);
    EXPECT_TRUE(nucleus.count(id)) << id;
    seen.insert(id);
  }
  EXPECT_GT(seen.size(), 1u);  // it does sample, not just argmax
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  std::vector<float> l = {5.0f, 4.9f, 0.0f, -1.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.1f;  // keeps tokens with p >= 0.1 * p_max: ids 0 and 1 only
  p.seed = 3;
  Sampler s(p);
  for (int i = 0; i < 1000; ++i) {
    auto c = l;
    int32_t id = s.sample(c.data(), 4);
    EXPECT_TRUE(id == 0 || id == 1);
  }
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  std::vector<float> l = {2.0f, 1.9f, -3.0f};
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.5f;
  Sampler s(p);
  s.accept(0);
  auto c = l;
  EXPECT_EQ(s.sample(c.data(), 3), 1);  // 2.0 / 1.5 < 1.9
  EXPECT_FLOAT_EQ(c[0], 2.0f / 1.5f);
}

TEST(Sampler, FrequencyAndPresencePenalties) {
  std::vector<float> l = {1.0f, 0.0f};
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  Sampler s(p);
  s.accept(0);
  s.accept(0);
  auto c = l;
  s.sample(c.data(), 2);
  EXPECT_FLOAT_EQ(c[0], 1.0f - 2 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(c[1], 0.0f);
}

TEST(Sampler, LogitBiasForcesOrBansTokens) {
  auto l = random_logits(100, 2);
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias[42] = 1000.0f;
  Sampler s(p);
  auto c = l;
  EXPECT_EQ(s.sample(c.data(), 100), 42);
  const int32_t best = argmax(l.data(), 100);
  SamplingParams q;
  q.temperature = 0;
  q.logit_bias[best] = -INFINITY;
  Sampler s2(q);
  c = l;
  EXPECT_NE(s2.sample(c.data(), 100), best);
}

// One check for the server and the command line (issue 22): NaN and out-of-range
// values are named by field and flag; the defaults and the edges pass.
TEST(Sampler, CheckSamplingNamesWhatIsWrong) {
  EXPECT_FALSE(check_sampling(SamplingParams{}).has_value());
  SamplingParams edge;
  edge.top_p = 1.0f;
  edge.min_p = 0.0f;
  edge.temperature = 0.0f;
  EXPECT_FALSE(check_sampling(edge).has_value());
  struct Case {
    void (*set)(SamplingParams&);
    const char* field;
    const char* flag;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.top_p = std::nanf(""); }, "top_p", "--top-p"},
      {[](SamplingParams& p) { p.top_p = 5.0f; }, "top_p", "--top-p"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p", "--top-p"},
      {[](SamplingParams& p) { p.min_p = -1.0f; }, "min_p", "--min-p"},
      {[](SamplingParams& p) { p.temperature = INFINITY; }, "temperature", "--temp"},
      {[](SamplingParams& p) { p.repeat_penalty = 0.0f; }, "repeat_penalty", "--repeat-penalty"},
      {[](SamplingParams& p) { p.presence_penalty = std::nanf(""); }, "presence_penalty", "--presence-penalty"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const auto problem = check_sampling(p);
    ASSERT_TRUE(problem.has_value()) << c.field;
    EXPECT_STREQ(problem->field, c.field);
    EXPECT_STREQ(problem->flag, c.flag);
    EXPECT_FALSE(problem->problem.empty());
  }
}
