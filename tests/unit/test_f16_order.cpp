// F16 weights sum in the orders of ggml's CPU backend (kernels/types.h): vec_dot and
// vec_dot_x4 as ggml_vec_dot_f16 (mul_mat of one row, and mul_mat_id), and
// vec_dot_gemm_x4 as llamafile's tinyBLAS (mul_mat of a batch). Each SIMD kernel is
// held bit for bit to a scalar statement of its order written here, on F16 data whose
// sums depend on the order; matmul must pick the order its mul_mat flag asks for; the
// flag must change nothing for the other types.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/blocks.h"
#include "kernels/matmul.h"
#include "kernels/random_fill.h"
#include "kernels/types.h"

using namespace deltafin;
using namespace deltafin::kern;

namespace {

// Lanes per vector of each x86 build: AVX-512 16, AVX2 8.
int lanes(Isa isa) { return isa == Isa::AVX512 ? 16 : 8; }

std::vector<Isa> x86_isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::AVX2, Isa::AVX512})
    if (isa_supported(isa)) v.push_back(isa);
  return v;
}

float h(uint16_t v) { return fp16_to_f32(v); }

// Halving tree over L lanes: v[j] += v[j + L/2], then L/4, ... (GCC's
// _mm512_reduce_add_ps; tinyBLAS's hsum of a __m256: high half + low half, then
// movehl, then movehdup).
float reduce_halving(float* v, int L) {
  for (int half = L / 2; half >= 1; half /= 2)
    for (int j = 0; j < half; ++j) v[j] = v[j] + v[j + half];
  return v[0];
}

// GGML_F32x8_REDUCE's last step (AVX2): the two 128-bit halves added, then two
// horizontal adds: (t0 + t1) + (t2 + t3), adjacent pairs.
float reduce_hadd8(const float* v) {
  float t[4];
  for (int j = 0; j < 4; ++j) t[j] = v[j] + v[j + 4];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

// ggml_vec_dot_f16: four L-lane accumulators over 4L-value steps (one FMA per lane),
// summed (0+2)+(1+3), then across lanes; the n % 4L tail added in double, each
// product rounded to float first.
float ref_vec_dot(Isa isa, int64_t n, const uint16_t* a, const uint16_t* b) {
  const int L = lanes(isa);
  float s[4][16] = {};
  const int64_t np = n / (4 * L) * (4 * L);
  for (int64_t i = 0; i < np; i += 4 * L)
    for (int u = 0; u < 4; ++u)
      for (int l = 0; l < L; ++l) {
        const int64_t j = i + u * L + l;
        s[u][l] = std::fma(h(a[j]), h(b[j]), s[u][l]);
      }
  float r[16];
  for (int l = 0; l < L; ++l) r[l] = (s[0][l] + s[2][l]) + (s[1][l] + s[3][l]);
  double sum = isa == Isa::AVX512 ? reduce_halving(r, L) : reduce_hadd8(r);
  for (int64_t i = np; i < n; ++i) {
    const float p = h(a[i]) * h(b[i]);
    sum += double(p);
  }
  return float(sum);
}

// tinyBLAS<L>: one L-lane accumulator over all n (n % L == 0), then a halving tree.
float ref_gemm(Isa isa, int64_t n, const uint16_t* a, const uint16_t* b) {
  const int L = lanes(isa);
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += L)
    for (int l = 0; l < L; ++l) acc[l] = std::fma(h(a[i + l]), h(b[i + l]), acc[l]);
  return reduce_halving(acc, L);
}

// Plain F16 values: gaussian, and every 7th value 64x larger so that partial sums
// cancel and the last bits of a sum depend on its order.
std::vector<uint16_t> f16_rows(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> v(size_t(rows * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = f32_to_fp16(d(g) * (i % 7 == 3 ? 64.0f : 1.0f));
  return v;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof(float)) == 0; }

const int64_t kLengths[] = {1, 7, 16, 32, 48, 64, 100, 127, 128, 200, 1000, 4096, 4099};

}  // namespace

// The x86 F16 rows carry both orders; gemm_k is the accumulator's lane count.
TEST(F16Order, KernelsInstalled) {
  auto isas = x86_isas();
  if (isas.empty()) GTEST_SKIP() << "no x86 SIMD instruction set on this CPU";
  for (Isa isa : isas) {
    const TypeTraits* tt = type_traits_isa(DType::F16, isa);
    ASSERT_NE(tt, nullptr);
    EXPECT_NE(tt->vec_dot_gemm_x4, nullptr) << isa_name(isa);
    EXPECT_EQ(tt->gemm_k, uint32_t(lanes(isa))) << isa_name(isa);
  }
}

// vec_dot and vec_dot_x4 (four activation rows, scrambled and repeated) in
// ggml_vec_dot_f16's order, bit for bit, for lengths with and without a tail.
TEST(F16Order, VecDotIsGgmlVecDotF16Order) {
  auto isas = x86_isas();
  if (isas.empty()) GTEST_SKIP() << "no x86 SIMD instruction set on this CPU";
  int order_sensitive = 0;
  for (Isa isa : isas) {
    const TypeTraits* tt = type_traits_isa(DType::F16, isa);
    for (int64_t n : kLengths) {
      const auto w = f16_rows(1, n, uint32_t(n) * 3 + 1);
      const auto x = f16_rows(4, n, uint32_t(n) * 3 + 2);
      float want[4];
      for (int k = 0; k < 4; ++k) {
        const uint16_t* xk = x.data() + k * n;
        want[k] = ref_vec_dot(isa, n, w.data(), xk);
        float got;
        tt->vec_dot(n, &got, w.data(), xk);
        EXPECT_TRUE(same_bits(got, want[k]))
            << isa_name(isa) << " vec_dot n=" << n << " row " << k << ": " << got << " vs " << want[k];
        if (n % lanes(isa) == 0 && !same_bits(want[k], ref_gemm(isa, n, w.data(), xk))) ++order_sensitive;
      }
      const int order[4] = {2, 0, 3, 3};
      const void* rows[4];
      for (int k = 0; k < 4; ++k) rows[k] = x.data() + order[k] * n;
      float got4[4];
      tt->vec_dot_x4(n, got4, w.data(), rows);
      for (int k = 0; k < 4; ++k)
        EXPECT_TRUE(same_bits(got4[k], want[order[k]]))
            << isa_name(isa) << " vec_dot_x4 n=" << n << " k=" << k << ": " << got4[k] << " vs " << want[order[k]];
    }
  }
  // The data tells the orders apart (else the checks above could not fail).
  EXPECT_GT(order_sensitive, 0);
}

// vec_dot_gemm_x4 in tinyBLAS's order (one accumulator, then a halving tree), each
// output depending only on its own activation row (groups padded by repetition).
TEST(F16Order, GemmX4IsTinyBlasOrder) {
  auto isas = x86_isas();
  if (isas.empty()) GTEST_SKIP() << "no x86 SIMD instruction set on this CPU";
  int order_sensitive = 0;
  for (Isa isa : isas) {
    const TypeTraits* tt = type_traits_isa(DType::F16, isa);
    for (int64_t n : {8, 16, 32, 40, 48, 64, 96, 112, 1024, 4096}) {
      if (n % tt->gemm_k != 0) continue;
      const auto w = f16_rows(1, n, uint32_t(n) * 5 + 1);
      const auto x = f16_rows(4, n, uint32_t(n) * 5 + 2);
      float want[4];
      for (int k = 0; k < 4; ++k) {
        want[k] = ref_gemm(isa, n, w.data(), x.data() + k * n);
        if (!same_bits(want[k], ref_vec_dot(isa, n, w.data(), x.data() + k * n))) ++order_sensitive;
      }
      for (const auto& order : {std::array<int, 4>{0, 1, 2, 3}, {3, 1, 0, 2}, {1, 2, 2, 2}}) {
        const void* rows[4];
        for (int k = 0; k < 4; ++k) rows[k] = x.data() + order[size_t(k)] * n;
        float got[4];
        tt->vec_dot_gemm_x4(n, got, w.data(), rows);
        for (int k = 0; k < 4; ++k)
          EXPECT_TRUE(same_bits(got[k], want[order[size_t(k)]]))
              << isa_name(isa) << " gemm_x4 n=" << n << " k=" << k << ": " << got[k] << " vs " << want[order[size_t(k)]];
      }
    }
  }
  EXPECT_GT(order_sensitive, 0);
}

// matmul (the best ISA): mul_mat = true takes tinyBLAS's order for a batch of >= 2
// activation rows when cols % gemm_k == 0 and rows % 4 == 0, ggml_vec_dot_f16's
// otherwise (one activation row, other shapes); mul_mat = false (the default, and
// matmul_q_tokens: mul_mat_id) always ggml_vec_dot_f16's. With and without a pool.
TEST(F16Order, MatmulPicksMulMatOrder) {
  const TypeTraits* tt = type_traits(DType::F16);
  if (tt->isa != Isa::AVX2 && tt->isa != Isa::AVX512) GTEST_SKIP() << "F16 kernels are not x86 SIMD here";
  const Isa isa = tt->isa;
  ThreadPool pool(2);
  int gemm_cases = 0, dot_cases = 0;
  for (int64_t cols : {32, 48, 100, 4096}) {
    for (int64_t rows : {4, 6, 8}) {
      const auto w = f16_rows(rows, cols, uint32_t(cols * 11 + rows));
      for (int64_t n_tok : {1, 3, 4, 8}) {
        const auto xh = f16_rows(n_tok, cols, uint32_t(cols * 13 + rows * 7 + n_tok));
        std::vector<float> x(xh.size());
        for (size_t i = 0; i < x.size(); ++i) x[i] = h(xh[i]);  // exact in F16: no rounding in matmul
        const bool gemm = n_tok >= 2 && cols % tt->gemm_k == 0 && rows % 4 == 0;
        (gemm ? gemm_cases : dot_cases)++;
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> y_mm(size_t(rows * n_tok)), y_id(y_mm.size()), y_def(y_mm.size());
          matmul(p, DType::F16, w.data(), rows, cols, x.data(), n_tok, cols, y_mm.data(), rows, /*mul_mat=*/true);
          matmul(p, DType::F16, w.data(), rows, cols, x.data(), n_tok, cols, y_id.data(), rows, /*mul_mat=*/false);
          matmul(p, DType::F16, w.data(), rows, cols, x.data(), n_tok, cols, y_def.data(), rows);
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const uint16_t* wr = w.data() + r * cols;
              const uint16_t* xt = xh.data() + t * cols;
              const float dot = ref_vec_dot(isa, cols, wr, xt);
              const float want_mm = gemm ? ref_gemm(isa, cols, wr, xt) : dot;
              const size_t i = size_t(t * rows + r);
              EXPECT_TRUE(same_bits(y_mm[i], want_mm)) << "mul_mat cols=" << cols << " rows=" << rows << " n_tok="
                                                       << n_tok << " t=" << t << " r=" << r << " pool=" << (p != nullptr);
              EXPECT_TRUE(same_bits(y_id[i], dot)) << "mul_mat_id cols=" << cols << " rows=" << rows << " n_tok=" << n_tok;
              EXPECT_TRUE(same_bits(y_def[i], dot)) << "default cols=" << cols << " rows=" << rows << " n_tok=" << n_tok;
            }
          }
        }
        // The experts' path (a subset of the rows, in another order) sums as vec_dot.
        if (n_tok >= 3) {
          QuantizedActs acts;
          quantize_acts(nullptr, DType::F16, x.data(), n_tok, cols, cols, &acts);
          const int32_t toks[3] = {int32_t(n_tok - 1), 0, int32_t(n_tok - 1)};
          std::vector<float> y(size_t(3 * rows));
          matmul_q_tokens(&pool, DType::F16, w.data(), rows, cols, acts, toks, 3, y.data(), rows);
          for (int i = 0; i < 3; ++i)
            for (int64_t r = 0; r < rows; ++r)
              EXPECT_TRUE(same_bits(y[size_t(i * rows + r)],
                                    ref_vec_dot(isa, cols, w.data() + r * cols, xh.data() + toks[i] * cols)))
                  << "matmul_q_tokens cols=" << cols << " rows=" << rows << " i=" << i;
        }
      }
    }
  }
  EXPECT_GT(gemm_cases, 0);
  EXPECT_GT(dot_cases, 0);
}

// Only F16 and BF16 (where its kernels follow vdpbf16ps) have a gemm order that
// mul_mat alone selects; F32's needs f32_gemm as well. For the other types mul_mat
// changes nothing, and every output is still vec_dot of its row and token (the order
// before the flag existed).
TEST(F16Order, MulMatFlagLeavesOtherTypesAlone) {
  ThreadPool pool(2);
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_K}) {
    const TypeTraits* tt = type_traits(t);
    if (t == DType::BF16 && tt->vec_dot_gemm_x4 != nullptr) continue;  // an AVX512_BF16 CPU
    if (t != DType::F32) {
      EXPECT_EQ(tt->vec_dot_gemm_x4, nullptr) << dtype_name(t);
    }
    const TypeTraits* at = type_traits(tt->vec_dot_type);
    for (int64_t cols : {256, 4096}) {
      for (int64_t rows : {4, 6}) {
        const size_t wrow = dtype_row_bytes(t, uint64_t(cols));
        std::vector<uint8_t> w(wrow * size_t(rows));
        fill_random(t, uint32_t(cols + rows), rows * cols, 1.0f, w.data());
        for (int64_t n_tok : {1, 3, 4, 8}) {
          std::mt19937 g(uint32_t(cols * 3 + rows * 5 + n_tok));
          std::normal_distribution<float> d(0.0f, 2.0f);
          std::vector<float> x(size_t(n_tok * cols));
          for (auto& v : x) v = d(g);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<float> y_def(size_t(rows * n_tok)), y_mm(y_def.size());
            matmul(p, t, w.data(), rows, cols, x.data(), n_tok, cols, y_def.data(), rows);
            matmul(p, t, w.data(), rows, cols, x.data(), n_tok, cols, y_mm.data(), rows, /*mul_mat=*/true);
            const size_t xrow = dtype_row_bytes(at->type, uint64_t(cols));
            std::vector<uint8_t> xq(xrow);
            for (int64_t k = 0; k < n_tok; ++k) {
              at->from_float(x.data() + k * cols, xq.data(), cols);
              for (int64_t r = 0; r < rows; ++r) {
                float want;
                tt->vec_dot(cols, &want, w.data() + size_t(r) * wrow, xq.data());
                const size_t i = size_t(k * rows + r);
                EXPECT_TRUE(same_bits(y_def[i], want)) << dtype_name(t) << " default cols=" << cols << " rows=" << rows
                                                       << " n_tok=" << n_tok << " t=" << k << " r=" << r;
                EXPECT_TRUE(same_bits(y_mm[i], y_def[i])) << dtype_name(t) << " mul_mat cols=" << cols
                                                          << " rows=" << rows << " n_tok=" << n_tok;
              }
            }
          }
        }
      }
    }
  }
}

// F32 rows (AVX-512 build) in ggml_vec_dot_f32's order: four 16-lane accumulators over
// 64-value steps, (0+2)+(1+3), across lanes, then the tail multiplied and added one
// value at a time; with f32_gemm a batch sums as tinyBLAS<16> (one accumulator).
TEST(F16Order, F32RowsInGgmlOrder) {
  const TypeTraits* tt = type_traits(DType::F32);
  if (tt->isa != Isa::AVX512) GTEST_SKIP() << "F32 kernels are not AVX-512 here";
  auto reduce16 = [](const float* v) {  // _mm512_reduce_add_ps's tree
    float a[8], b[4];
    for (int i = 0; i < 8; ++i) a[i] = v[i] + v[i + 8];
    for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
    return (b[0] + b[2]) + (b[1] + b[3]);
  };
  for (int64_t cols : {32, 64, 100, 256}) {
    std::mt19937 g{uint32_t(cols)};
    std::normal_distribution<float> d(0.0f, 1.0f);
    const int64_t rows = 4, n_tok = 4;
    std::vector<float> w(size_t(rows * cols)), x(size_t(n_tok * cols));
    for (size_t i = 0; i < w.size(); ++i) w[i] = d(g) * (i % 7 == 0 ? 64.0f : 1.0f);
    for (auto& v : x) v = d(g);
    std::vector<float> y_row(size_t(rows * n_tok)), y_gemm(y_row.size());
    matmul(nullptr, DType::F32, w.data(), rows, cols, x.data(), n_tok, cols, y_row.data(), rows, true);
    matmul(nullptr, DType::F32, w.data(), rows, cols, x.data(), n_tok, cols, y_gemm.data(), rows, true, true);
    int differ = 0;
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        const float* a = &w[size_t(r * cols)];
        const float* b = &x[size_t(t * cols)];
        float s[4][16] = {}, acc[16] = {};
        const int64_t np = cols & ~int64_t(63);
        for (int64_t i = 0; i < np; ++i) s[(i % 64) / 16][i % 16] = std::fma(a[i], b[i], s[(i % 64) / 16][i % 16]);
        float l[16];
        for (int k = 0; k < 16; ++k) l[k] = (s[0][k] + s[2][k]) + (s[1][k] + s[3][k]);
        float dot = reduce16(l);
        for (int64_t i = np; i < cols; ++i) {
          volatile float p = a[i] * b[i];
          dot += p;
        }
        float gemm = 0;
        if (cols % 16 == 0) {
          for (int64_t i = 0; i < cols; ++i) acc[i % 16] = std::fma(a[i], b[i], acc[i % 16]);
          gemm = reduce16(acc);
        }
        const size_t i = size_t(t * rows + r);
        EXPECT_TRUE(same_bits(y_row[i], dot)) << "cols=" << cols << " t=" << t << " r=" << r;
        EXPECT_TRUE(same_bits(y_gemm[i], cols % 16 == 0 ? gemm : dot)) << "f32_gemm cols=" << cols;
        differ += cols % 16 == 0 && !same_bits(gemm, dot);
      }
    if (cols == 256) {
      EXPECT_GT(differ, 0) << "the data should make the two orders differ";
    }
  }
}
