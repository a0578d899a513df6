// Importance-weighted quantization (kernels/importance.h): the i-quants' weighted
// quantizers lower the importance-weighted error they are asked to lower, and stay
// valid for flat and zero importances.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/importance.h"
#include "kernels/types.h"

using namespace deltafin;

namespace {

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

const DType kImpTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ3_XXS, DType::IQ2_S,
                           DType::IQ3_S,   DType::IQ1_S,  DType::IQ1_M};

// Quantizes each row of `x` (rows of n) with or without its importance `imp` (one
// vector for every row) and returns the dequantized values.
std::vector<float> round_trip(DType t, const std::vector<float>& x, int64_t n, const std::vector<float>* imp) {
  const TypeTraits* tt = type_traits_ref(t);
  std::vector<uint8_t> q(dtype_row_bytes(t, uint64_t(n)));
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / size_t(n); ++r) {
    if (imp)
      from_float_imp(t)(x.data() + r * size_t(n), q.data(), n, imp->data());
    else
      tt->from_float(x.data() + r * size_t(n), q.data(), n);
    tt->to_float(q.data(), y.data() + r * size_t(n), n);
  }
  return y;
}

// sum_j imp_j (x_j - y_j)^2 over all rows.
double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& imp) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += double(imp[i % imp.size()]) * (x[i] - y[i]) * (x[i] - y[i]);
  return e;
}

double rel_rms(const std::vector<float>& y, const std::vector<float>& x) {
  double e2 = 0, x2 = 0;
  for (size_t i = 0; i < x.size(); ++i) e2 += double(y[i] - x[i]) * (y[i] - x[i]), x2 += double(x[i]) * x[i];
  return std::sqrt(e2 / x2);
}

}  // namespace

// ---- weighted quantization -----------------------------------------------------------

// Gaussian rows, a skewed importance (log-normal, sigma 1.5: a few loud columns, as
// in real imatrices): the error the importance weighs is clearly lower when the
// quantizer is told it. Measured ratios weighted / plain of sum_j imp_j (x_j - q_j)^2
// (32 rows of 512, printed): IQ2_XXS 0.63, IQ2_XS 0.59, IQ3_XXS 0.52, IQ2_S 0.69,
// IQ3_S 0.63, IQ1_S 0.74, IQ1_M 0.64; the bound 0.85 leaves a margin over each.
TEST(ImatrixQuant, WeightedErrorIsLower) {
  constexpr int64_t n = 512, rows = 32;
  const auto x = gaussian(size_t(n * rows), 3);
  std::vector<float> imp(n);
  {
    auto z = gaussian(size_t(n), 4);
    for (int64_t j = 0; j < n; ++j) imp[size_t(j)] = std::exp(1.5f * z[size_t(j)]);
  }
  for (DType t : kImpTypes) {
    ASSERT_NE(from_float_imp(t), nullptr) << dtype_name(t);
    const double plain = weighted_error(x, round_trip(t, x, n, nullptr), imp);
    const double weighted = weighted_error(x, round_trip(t, x, n, &imp), imp);
    std::printf("  %-8s importance-weighted error: weighted / plain = %.3f\n", std::string(dtype_name(t)).c_str(),
                weighted / plain);
    EXPECT_LT(weighted, 0.85 * plain) << dtype_name(t);
  }
  EXPECT_EQ(from_float_imp(DType::Q4_K), nullptr);
  EXPECT_EQ(from_float_imp(DType::TQ1_0), nullptr);
}

// All-ones importance: still a valid quantization, within the plain quantizer's
// round-trip bound (IqQuant.RoundTripError's), and not far from its error.
TEST(ImatrixQuant, OnesStayWithinThePlainBound) {
  const struct {
    DType t;
    double bound;
  } bounds[] = {{DType::IQ2_XXS, 0.36}, {DType::IQ2_XS, 0.32}, {DType::IQ3_XXS, 0.2}, {DType::IQ2_S, 0.27},
                {DType::IQ3_S, 0.15},   {DType::IQ1_S, 0.5},   {DType::IQ1_M, 0.46}};
  constexpr int64_t n = 256 * 32;
  const auto x = gaussian(size_t(n), 1);
  const std::vector<float> ones(size_t(n), 1.0f);
  for (const auto& b : bounds) {
    const auto y = round_trip(b.t, x, n, &ones);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << dtype_name(b.t);
    const double rel = rel_rms(y, x), plain = rel_rms(round_trip(b.t, x, n, nullptr), x);
    std::printf("  %-8s rel rms error, imp = 1: %.4f (plain %.4f, bound %.3f)\n", std::string(dtype_name(b.t)).c_str(),
                rel, plain, b.bound);
    EXPECT_LE(rel, b.bound) << dtype_name(b.t);
    EXPECT_LE(rel, 1.05 * plain) << dtype_name(b.t);
  }
}

// Zero importance on whole blocks and zero rows: nothing breaks.
TEST(ImatrixQuant, ZeroImportanceAndZeroRows) {
  constexpr int64_t n = 512;
  auto x = gaussian(size_t(n), 5);
  std::vector<float> imp(size_t(n), 1.0f);
  std::fill(imp.begin(), imp.begin() + 256, 0.0f);
  const std::vector<float> zero(size_t(n), 0.0f);
  for (DType t : kImpTypes) {
    for (float v : round_trip(t, x, n, &imp)) ASSERT_TRUE(std::isfinite(v)) << dtype_name(t);
    for (float v : round_trip(t, zero, n, &imp)) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}
