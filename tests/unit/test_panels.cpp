// Row panels (kernels/panels.h): the conversion keeps every value of every row, the
// scalar reference agrees with the row reference within float summation error, every
// instruction set's panel kernels give the reference's bits for one and four tokens
// over panels and over the file's rows, and matmul_panels gives the same bits at every
// batch size and thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/panels.h"
#include "kernels/types.h"
#include "kernel_test_util.h"

using namespace deltafin;

namespace {

const DType kPanelTypes[] = {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::MXFP4, DType::Q4_K, DType::Q5_K};

// Columns for a type: `q32` where its blocks are 32 values, nine super-blocks
// (the file-row kernels fold eight at a time, then one) where they are 256.
int64_t cols_for(DType type, int64_t q32) { return block_geometry(type).block_elems == 32 ? q32 : 9 * 256; }

// The activation type of a panel type's kernels (Q8_0, or Q8_K for Q4_K and Q5_K).
DType act_type(DType type) { return type_traits_ref(type)->vec_dot_type; }

// A rows x cols matrix of `type` quantized from Gaussian values, in the file's order.
std::vector<uint8_t> matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> w = gaussian(size_t(rows * cols), seed);
  const size_t row = dtype_row_bytes(type, uint64_t(cols));
  std::vector<uint8_t> q(row * size_t(rows));
  for (int64_t r = 0; r < rows; ++r) type_traits_ref(type)->from_float(w.data() + r * cols, q.data() + r * row, cols);
  return q;
}

std::vector<uint8_t> panels(DType type, std::vector<uint8_t> q, int64_t rows, int64_t cols) {
  to_panels(type, q.data(), rows, cols);
  return q;
}

// n activation rows of `type`'s activation type, quantized by the reference.
std::vector<uint8_t> acts(DType type, int64_t n, int64_t cols, uint32_t seed) {
  const std::vector<float> x = gaussian(size_t(n * cols), seed);
  const size_t row = dtype_row_bytes(act_type(type), uint64_t(cols));
  std::vector<uint8_t> q(row * size_t(n));
  const TypeTraits* q8 = type_traits_ref(act_type(type));
  for (int64_t t = 0; t < n; ++t) q8->from_float(x.data() + t * cols, q.data() + t * row, cols);
  return q;
}

// sum |w_e x_e| of a weight row and an activation row (`type`'s activation type), as
// the reference dequantizes them.
float abs_dot(DType type, const uint8_t* w, const void* x, int64_t cols) {
  std::vector<float> wf(static_cast<size_t>(cols)), xf(static_cast<size_t>(cols));
  type_traits_ref(type)->to_float(w, wf.data(), cols);
  type_traits_ref(act_type(type))->to_float(x, xf.data(), cols);
  double s = 0;
  for (int64_t e = 0; e < cols; ++e) s += std::fabs(double(wf[size_t(e)]) * xf[size_t(e)]);
  return float(s);
}

// Calls f(type, traits) for each type and instruction set that has panel kernels on
// this CPU (with a trace naming them); returns how many.
template <class F>
int for_each_panel_set(F f) {
  int n = 0;
  for (Isa isa : {Isa::AVX2, Isa::AVX512, Isa::NEON}) {
    for (DType type : kPanelTypes) {
      const TypeTraits* tt = type_traits_isa(type, isa);
      if (tt == nullptr || tt->panel_dot == nullptr) continue;
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(type)));
      f(type, *tt);
      ++n;
    }
  }
  return n;
}

}  // namespace

// The reference on panels against the row reference on the file's rows: both sum
// exact integer block products and differ only in the order of the float additions,
// so a value lost or moved by to_panels shows far beyond the bound.
TEST(Panels, ReferenceMatchesRowReference) {
  const int64_t rows = 24;
  for (DType type : kPanelTypes) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const int64_t cols = cols_for(type, 320);
    const auto w = matrix(type, rows, cols, 1);
    const auto p = panels(type, w, rows, cols);
    ASSERT_EQ(p.size(), w.size());
    EXPECT_NE(std::memcmp(p.data(), w.data(), w.size()), 0) << "to_panels left the bytes as they were";
    const auto x = acts(type, 3, cols, 2);
    const size_t wrow = dtype_row_bytes(type, uint64_t(cols)), xrow = dtype_row_bytes(act_type(type), uint64_t(cols));
    for (int64_t g = 0; g < rows / kPanelRows; ++g) {
      const void* xs[3] = {x.data(), x.data() + xrow, x.data() + 2 * xrow};
      float out[3 * kPanelRows];
      panel_dot_ref(type, cols, out, p.data() + size_t(g) * kPanelRows * wrow, xs, 3);
      for (int t = 0; t < 3; ++t)
        for (int r = 0; r < kPanelRows; ++r) {
          const uint8_t* row = w.data() + size_t(g * kPanelRows + r) * wrow;
          float want = 0;
          type_traits_ref(type)->vec_dot(cols, &want, row, xs[t]);
          // Q4_K's and Q5_K's scaled sums and mins cancel each other per super-block,
          // so their rounding scales with sum |w x| (about 1e3 here) rather than the
          // result: a bound of 1e-6 of it (about 1e-3) where one moved or lost code
          // costs about 1.
          const float mag = block_geometry(type).block_elems == 256 ? abs_dot(type, row, xs[t], cols) : 0.0f;
          EXPECT_NEAR(out[t * kPanelRows + r], want, 1e-5f * (1.0f + std::fabs(want)) + 1e-6f * mag)
              << "row " << g * 8 + r;
        }
    }
  }
}

// Every instruction set's conversion gives the scalar one's bytes, on random bytes (every
// nibble, sign and scale pattern) at an odd block count, panel after panel.
TEST(Panels, EverySetPacksTheScalarBytes) {
  const int64_t rows = 24;
  const int checked = for_each_panel_set([&](DType type, const TypeTraits& tt) {
    ASSERT_NE(tt.panel_pack, nullptr);
    const int64_t cols = cols_for(type, 1120), nb = cols / block_geometry(type).block_elems;  // 35 or 9 blocks
    const size_t wrow = dtype_row_bytes(type, uint64_t(cols)), panel = wrow * kPanelRows;
    std::vector<uint8_t> w(wrow * rows);
    std::mt19937 g(uint32_t(w.size()) + uint32_t(type));
    for (uint8_t& b : w) b = uint8_t(g());
    std::vector<uint8_t> want(w.size(), 0), got(w.size(), 0xAA);
    for (int64_t p = 0; p < rows / kPanelRows; ++p) {
      panel_pack_ref(type, w.data() + p * panel, wrow, nb, want.data() + p * panel);
      tt.panel_pack(w.data() + p * panel, wrow, nb, got.data() + p * panel);
    }
    EXPECT_NE(want, w) << "the conversion left the bytes as they were";
    EXPECT_EQ(got, want);
  });
#if defined(DELTAFIN_X86) || defined(DELTAFIN_ARM)
  EXPECT_GT(checked, 0) << "no SIMD set with a conversion on this CPU";
#endif
}

// Every instruction set that has panel kernels: one token and four tokens, over panels
// and over the file's rows, each the reference's bits.
TEST(Panels, KernelsEqualReferenceBitForBit) {
  const int64_t rows = 16;
  const int checked = for_each_panel_set([&](DType type, const TypeTraits& tt) {
    // 35 blocks or 9 super-blocks: the file-row kernels take eight at a time, then the rest.
    const int64_t cols = cols_for(type, 1120);
    ASSERT_NE(tt.panel_dot_x4, nullptr);
    ASSERT_NE(tt.panel_rows, nullptr);
    ASSERT_NE(tt.panel_rows_x4, nullptr);
    const auto file_rows = matrix(type, rows, cols, 3);
    const auto p = panels(type, file_rows, rows, cols);
    const auto x = acts(type, 4, cols, 4);
    const size_t wrow = dtype_row_bytes(type, uint64_t(cols)), xrow = dtype_row_bytes(act_type(type), uint64_t(cols));
    const void* xs[4] = {x.data(), x.data() + xrow, x.data() + 2 * xrow, x.data() + 3 * xrow};
    // The kernels read the activation rows as panel_prep leaves them.
    ASSERT_NE(tt.panel_prep, nullptr);
    const size_t prow = tt.panel_prep_bytes(cols);
    std::vector<uint8_t> prepared(4 * prow);
    const void* ps[4];
    for (int t = 0; t < 4; ++t) {
      tt.panel_prep(cols, prepared.data() + t * prow, xs[t]);
      ps[t] = prepared.data() + t * prow;
    }
    for (int64_t g = 0; g < rows / kPanelRows; ++g) {
      const uint8_t* w = p.data() + size_t(g) * kPanelRows * wrow;
      float ref[4 * kPanelRows], four[4 * kPanelRows];
      panel_dot_ref(type, cols, ref, w, xs, 4);
      const uint8_t* fw = file_rows.data() + size_t(g) * kPanelRows * wrow;
      tt.panel_dot_x4(cols, four, w, ps);
      EXPECT_EQ(std::memcmp(four, ref, sizeof(ref)), 0) << "four tokens";
      for (int r = 0; r < kPanelRows; ++r) {
        float y[4];
        tt.panel_rows_x4(cols, y, fw + r * wrow, ps);
        for (int t = 0; t < 4; ++t)
          EXPECT_EQ(std::memcmp(&y[t], &ref[t * kPanelRows + r], sizeof(float)), 0)
              << "file row " << r << " token " << t;
      }
      for (int t = 0; t < 4; ++t) {
        float one[kPanelRows];
        tt.panel_dot(cols, one, w, ps[t]);
        EXPECT_EQ(std::memcmp(one, ref + t * kPanelRows, sizeof(one)), 0) << "token " << t << " alone";
        for (int r = 0; r < kPanelRows; ++r) {
          float y;
          tt.panel_rows(cols, &y, fw + r * wrow, ps[t]);
          EXPECT_EQ(std::memcmp(&y, &ref[t * kPanelRows + r], sizeof(float)), 0)
              << "file row " << r << " token " << t << " alone";
        }
      }
    }
  });
#if defined(DELTAFIN_X86)
  if (isa_supported(Isa::AVX2)) {
    EXPECT_GE(checked, 6) << "AVX2 has panel kernels for Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K and Q5_K";
  }
#elif defined(DELTAFIN_ARM)
  EXPECT_EQ(checked, 6) << "NEON has panel kernels for Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K and Q5_K";
#endif
}

// The driver: any number of tokens (padded groups of four, one alone), one thread
// (tp null) or a pool's, panels or the file's rows, every set and the reference alike:
// the same bits as each token alone through the reference. And a type or shape without
// panel kernels is not asked for them.
static void check_matmul(ThreadPool* tp) {
  RestoreIsa restore;
  const int64_t rows = 48;
  for (DType type : kPanelTypes) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const int64_t cols = cols_for(type, 352);
    const auto file_rows = matrix(type, rows, cols, 5);
    const auto p = panels(type, file_rows, rows, cols);
    const size_t wrow = dtype_row_bytes(type, uint64_t(cols));
    const int64_t max_tok = 9;
    const std::vector<float> X = gaussian(size_t(max_tok * cols), 6);
    const auto xq = [&] {
      std::vector<uint8_t> q(dtype_row_bytes(act_type(type), uint64_t(cols)) * size_t(max_tok));
      for (int64_t t = 0; t < max_tok; ++t)
        type_traits_ref(act_type(type))->from_float(X.data() + t * cols, q.data() + t * (q.size() / max_tok), cols);
      return q;
    }();
    std::vector<float> want(size_t(max_tok * rows));
    for (int64_t t = 0; t < max_tok; ++t) {
      const void* xs[1] = {xq.data() + t * (xq.size() / max_tok)};
      for (int64_t g = 0; g < rows / kPanelRows; ++g)
        panel_dot_ref(type, cols, want.data() + t * rows + g * kPanelRows, p.data() + size_t(g) * kPanelRows * wrow,
                      xs, 1);
    }
    for (Isa isa : {Isa::Scalar, Isa::AVX2, Isa::AVX512, Isa::NEON}) {
      if (!select_isa(isa)) continue;
      const bool has = type_traits(type)->panel_dot != nullptr;
      for (bool in_panels : {true, false}) {
        if (!in_panels && !has) continue;  // the file's rows only with a set's kernels
        for (int64_t n : {1, 2, 3, 4, 5, 9}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " tokens " + std::to_string(n) + (tp ? " two threads" : "") +
                       (in_panels ? " panels" : " file rows"));
          std::vector<float> Y(size_t(n * rows), -1.0f);
          matmul_panels(tp, type, (in_panels ? p : file_rows).data(), rows, cols, X.data(), n, cols, Y.data(), rows,
                        in_panels);
          EXPECT_EQ(std::memcmp(Y.data(), want.data(), Y.size() * sizeof(float)), 0);
        }
      }
      EXPECT_EQ(panels_wanted(type, rows, cols), has);
      EXPECT_FALSE(panels_wanted(type, rows + 4, cols)) << "rows not a multiple of eight";
    }
  }
  EXPECT_FALSE(panels_wanted(DType::Q6_K, 64, 256));
  EXPECT_FALSE(panels_wanted(DType::F32, 64, 256));
}

TEST(Panels, MatmulEqualsReferenceAtEveryBatchSize) { check_matmul(nullptr); }

// Apart, so that scripts/test-aarch64 can leave out what starts threads under qemu.
TEST(Panels, ThreadedMatmulEqualsReference) {
  ThreadPool pool(2);
  check_matmul(&pool);
}
