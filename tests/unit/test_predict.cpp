// runtime/predict.h: the arithmetic of `deltafin plan`, fed numbers worked by hand.
#include "runtime/predict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace deltafin {
namespace {

// 4 MoE layers of 100 experts, 10 used; 1 MB experts, 1 GB/s disk; 100 MB of core
// touched at 1 GB/s, experts' 40 MB at 2 GB/s.
PredictInput base() {
  PredictInput in;
  in.moe_layers = 4;
  in.experts_per_layer = 100;
  in.experts_used = 10;
  in.expert_bytes = 1'000'000;
  in.expert_compute_bytes = 1'000'000;
  in.core_bytes = 120'000'000;
  in.core_touched = 100'000'000;
  in.streaming = true;
  in.hit_rate = 0.75;
  in.disk_bps = 1e9;
  in.core_bps = 1e9;
  in.expert_bps = 2e9;
  in.batch_bps = 10e9;
  in.spec_accept = 0.5;
  return in;
}

TEST(Predict, DecodeIsReadsPlusCompute) {
  const Prediction p = predict(base());
  // 40 lookups, a quarter miss: 10 reads of 1 MB at 1 GB/s = 10 ms.
  EXPECT_DOUBLE_EQ(p.misses_per_token, 10.0);
  EXPECT_DOUBLE_EQ(p.read_bytes_per_token, 10e6);
  EXPECT_NEAR(p.io_s, 0.010, 1e-12);
  // 100 MB / 1 GB/s + 40 MB / 2 GB/s = 120 ms.
  EXPECT_NEAR(p.compute_s, 0.120, 1e-12);
  EXPECT_NEAR(p.seconds_per_token, 0.130, 1e-12);
  EXPECT_NEAR(p.overlap_seconds_per_token, 0.120, 1e-12);
  EXPECT_NEAR(p.tokens_per_second, 1 / 0.130, 1e-9);
}

TEST(Predict, NothingStreamsNothingIsRead) {
  PredictInput in = base();
  in.streaming = false;
  const Prediction p = predict(in);
  EXPECT_EQ(p.misses_per_token, 0.0);
  EXPECT_EQ(p.io_s, 0.0);
  EXPECT_NEAR(p.seconds_per_token, 0.120, 1e-12);
}

TEST(Predict, PagedCoreIsReadEveryToken) {
  PredictInput in = base();
  in.core_paged = 50'000'000;  // 50 ms at 1 GB/s
  const Prediction p = predict(in);
  EXPECT_DOUBLE_EQ(p.read_bytes_per_token, 60e6);
  EXPECT_NEAR(p.io_s, 0.060, 1e-12);
  // Its reads run ahead behind the expert reads (10 ms) and compute (120 ms): hidden.
  EXPECT_NEAR(p.seconds_per_token, 0.130, 1e-12);
  // 500 MB paged: the disk's 510 ms for all the reads is the token's time.
  in.core_paged = 500'000'000;
  EXPECT_NEAR(predict(in).seconds_per_token, 0.510, 1e-12);
  // Two tokens verified: the core read once, 19 expert reads (see below).
  EXPECT_NEAR(predict(in).spec_seconds_per_token, 0.519 / 1.5, 1e-12);
}

TEST(Predict, RemoteMissesNotOnDiskGoOverTheLink) {
  PredictInput in = base();
  in.remote = true;
  in.on_disk = 0.5;
  in.link_bps = 100e6;
  in.core_cold = 120'000'000;
  in.remote_core_missing = 20'000'000;
  const Prediction p = predict(in);
  // 5 MB from disk (5 ms) + 5 MB over 100 MB/s (50 ms).
  EXPECT_NEAR(p.io_s, 0.055, 1e-12);
  // The core from disk (120 ms) after its missing 20 MB over the link (200 ms).
  EXPECT_NEAR(p.cold_start_s, 0.320, 1e-12);
}

TEST(Predict, SpeculationVerifiesTwoTokensPerPass) {
  const Prediction p = predict(base());
  // Two tokens touch 100 (1 - 0.9^2) = 19 experts per layer: 76 lookups, 19 misses = 19 ms;
  // compute: core once (100 ms) + experts twice (40 ms); (159 ms) / 1.5 tokens.
  EXPECT_NEAR(expected_distinct(100, 10, 2), 19.0, 1e-9);
  EXPECT_NEAR(p.spec_seconds_per_token, 0.159 / 1.5, 1e-12);
  PredictInput none = base();
  none.spec_accept = 0;
  EXPECT_GT(predict(none).spec_seconds_per_token, p.seconds_per_token);  // nothing accepted: worse than plain
}

TEST(Predict, PrefillReadsTheUnionOfABatch) {
  PredictInput in = base();
  in.prefill_tokens = 600;
  in.batch = 512;
  const Prediction p = predict(in);
  // Both batches give each expert >= 4 tokens (512 x 10 / 100, 88 x 10 / 100): experts batched too.
  auto batch = [&](int k) {
    const double misses = expected_distinct(100, 10, k) * 4 * 0.25;
    return misses * 1e6 / 1e9 + 100e6 * k / 10e9 + k * 40e6 / 10e9;
  };
  EXPECT_NEAR(p.prefill_s, batch(512) + batch(88), 1e-9);
  // Three tokens: 0.3 tokens per expert, one at a time at the per-token rate.
  in.prefill_tokens = 3;
  const double misses3 = expected_distinct(100, 10, 3) * 4 * 0.25;
  EXPECT_NEAR(predict(in).prefill_s, misses3 * 1e6 / 1e9 + 300e6 / 10e9 + 3 * 40e6 / 2e9, 1e-9);
  // 512 tokens touch (almost) every expert once: 100 reads per layer at most.
  EXPECT_LE(expected_distinct(100, 10, 512), 100.0);
  EXPECT_GT(expected_distinct(100, 10, 512), 99.9);
}

TEST(Predict, UniformHitRate) {
  EXPECT_DOUBLE_EQ(uniform_hit_rate(25, 100), 0.25);
  EXPECT_DOUBLE_EQ(uniform_hit_rate(200, 100), 1.0);
  EXPECT_DOUBLE_EQ(uniform_hit_rate(0, 0), 1.0);
}

TEST(Predict, ProfileHitRateKeepsTheHottest) {
  const std::string id = "model 2 4 400";
  const std::string text = "deltafin-expert-profile 1\n" + id + "\n0 0 6\n0 1 1\n1 0 2\n1 3 1\n";
  auto two = profile_hit_rate(text, id, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_DOUBLE_EQ(*two, 0.8);  // 6 + 2 of 10 uses
  auto all = profile_hit_rate(text, id, 10);
  ASSERT_TRUE(all.ok());
  EXPECT_DOUBLE_EQ(*all, 1.0);
  auto other = profile_hit_rate(text, "model 2 4 401", 2);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("another model"), std::string::npos);
  EXPECT_FALSE(profile_hit_rate("garbage\n", id, 2).ok());
  EXPECT_FALSE(profile_hit_rate("deltafin-expert-profile 1\n" + id + "\n", id, 2).ok());
}

}  // namespace
}  // namespace deltafin
