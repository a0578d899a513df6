// i-quant kernel tests (IQ2_XXS, IQ2_XS, IQ3_XXS, IQ2_S, IQ3_S, IQ1_S, IQ1_M, and the ternary TQ1_0): the codebook and sign tables against the
// properties that define them, hand-built blocks, the scalar dot against a
// dequantize-then-dot, every SIMD kernel against the scalar reference, the 4-row
// and 4-activation kernels bit for bit against the single row, and the quantizer
// (error bound, exact recovery of representable values, edge inputs).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/iq_grids.h"
#include "kernels/random_fill.h"
#include "kernels/types.h"
#include "kernel_test_util.h"

using namespace deltafin;
using namespace deltafin::kern;

namespace {

const DType kIqTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ3_XXS, DType::IQ2_S,
                          DType::IQ3_S,   DType::IQ1_S,  DType::IQ1_M,   DType::TQ1_0};

std::string name(DType t) { return std::string(dtype_name(t)); }

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_row_bytes(t, x.size()));
  type_traits_ref(t)->from_float(x.data(), q.data(), int64_t(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const void* q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  type_traits_ref(t)->to_float(q, y.data(), n);
  return y;
}

std::vector<uint8_t> random_row(DType t, int64_t n, uint64_t seed) {
  std::vector<uint8_t> w(dtype_row_bytes(t, uint64_t(n)));
  EXPECT_TRUE(fill_random(t, seed, n, 1.0f, w.data()));
  return w;
}

std::vector<uint8_t> q8k_row(const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_row_bytes(DType::Q8_K, x.size()));
  type_traits_ref(DType::Q8_K)->from_float(x.data(), q.data(), int64_t(x.size()));
  return q;
}

double rel_rms(const std::vector<float>& y, const std::vector<float>& x) {
  double e2 = 0, x2 = 0;
  for (size_t i = 0; i < x.size(); ++i) e2 += double(y[i] - x[i]) * (y[i] - x[i]), x2 += double(x[i]) * x[i];
  return std::sqrt(e2 / x2);
}

}  // namespace

// ---- tables --------------------------------------------------------------------------

TEST(IqTables, Iq2xxsGridIsE8Codebook) {
  std::set<uint64_t> points;
  for (int i = 0; i < 256; ++i) {
    if (i > 0) {
      EXPECT_LT(kIq2xxsLevels[i - 1], kIq2xxsLevels[i]) << "codes ascend, so all 256 differ";
    }
    int lattice_sum = 0;
    for (int j = 0; j < 8; ++j) {
      const int level = (kIq2xxsLevels[i] >> (2 * j)) & 3;
      ASSERT_LE(level, 2) << "point " << i;
      lattice_sum += 2 * level + 1;  // the coordinate as an odd lattice number 1, 3, 5
      const int byte = int((kIq2xxsGrid[size_t(i)] >> (8 * j)) & 255);
      EXPECT_EQ(byte, int(kIq2xxsMagnitudes[level])) << "point " << i << " coordinate " << j;
    }
    // Half-integer coset of E8: coordinates (2l+1)/2 sum to an even integer.
    EXPECT_EQ(lattice_sum % 4, 0) << "point " << i;
    // The codebook holds the small points: at most three coordinates above the least.
    EXPECT_LE(lattice_sum, 24) << "point " << i;
    points.insert(kIq2xxsGrid[size_t(i)]);
  }
  EXPECT_EQ(points.size(), 256u);
  EXPECT_EQ(kIq2xxsGrid[0], 0x0808080808080808ULL);            // the all-smallest point
  EXPECT_EQ(kIq2xxsGrid[1], 0x080808080808082bULL);            // level 2 in coordinate 0
  EXPECT_EQ(kIq2xxsGrid[255], 0x2b2b2b1908081908ULL);            // levels 0xa904
}

TEST(IqTables, Iq2xsGridIsE8Codebook) {
  std::set<uint64_t> points;
  for (int i = 0; i < 512; ++i) {
    if (i > 0) {
      EXPECT_LT(kIq2xsLevels[i - 1], kIq2xsLevels[i]) << "codes ascend, so all 512 differ";
    }
    int lattice_sum = 0;
    for (int j = 0; j < 8; ++j) {
      const int level = (kIq2xsLevels[i] >> (2 * j)) & 3;
      ASSERT_LE(level, 2) << "point " << i;
      lattice_sum += 2 * level + 1;
    }
    EXPECT_EQ(lattice_sum % 4, 0) << "point " << i;
    points.insert(kIq2xsGrid[size_t(i)]);
  }
  EXPECT_EQ(points.size(), 512u);
  EXPECT_EQ(kIq2xsGrid[2], 0x0808080808081919ULL);
  EXPECT_EQ(kIq2xsGrid[510], 0x2b2b2b2b2b190819ULL);
  EXPECT_EQ(kIq2xsGrid[511], 0x2b2b2b2b2b2b2b2bULL);
}

TEST(IqTables, Iq3xxsGridIsD4Codebook) {
  std::set<uint32_t> points;
  for (int i = 0; i < 256; ++i) {
    if (i > 0) {
      EXPECT_LT(kIq3xxsLevels[i - 1], kIq3xxsLevels[i]) << "codes ascend, so all 256 differ";
    }
    ASSERT_LT(kIq3xxsLevels[i], 4096) << "four 3-bit levels";
    int lattice_sum = 0;
    for (int j = 0; j < 4; ++j) {
      const int level = (kIq3xxsLevels[i] >> (3 * j)) & 7;
      lattice_sum += 2 * level + 1;
      EXPECT_EQ(int((kIq3xxsGrid[size_t(i)] >> (8 * j)) & 255), int(kIq3xxsMagnitudes[level])) << i;
    }
    EXPECT_EQ(lattice_sum % 4, 0) << "point " << i << " is not in the half-integer coset of D4";
    points.insert(kIq3xxsGrid[size_t(i)]);
  }
  EXPECT_EQ(points.size(), 256u);
  // Level l is 8 l + 4 except the largest (62, not 60).
  for (int l = 0; l < 7; ++l) EXPECT_EQ(kIq3xxsMagnitudes[l], 8 * l + 4);
  EXPECT_EQ(kIq3xxsGrid[0], 0x04040404u);
  EXPECT_EQ(kIq3xxsGrid[17], 0x040c142cu);
  EXPECT_EQ(kIq3xxsGrid[127], 0x141c0c24u);
  EXPECT_EQ(kIq3xxsGrid[255], 0x3e341c04u);
}

TEST(IqTables, Iq2sGridIsE8Codebook) {
  int members = 0;
  for (uint64_t w : kIq2sMembers) members += std::popcount(w);
  EXPECT_EQ(members, 1024);
  EXPECT_EQ(kIq2sMembers[102] >> (6561 - 64 * 102), 0u) << "no key beyond 3^8";
  std::set<uint64_t> points;
  for (size_t i = 0; i < 1024; ++i) {
    int lattice_sum = 0;
    for (int j = 0; j < 8; ++j) {
      const int byte = int((kIq2sGrid[i] >> (8 * j)) & 255);
      const int level = byte == 8 ? 0 : byte == 25 ? 1 : byte == 43 ? 2 : -1;
      ASSERT_GE(level, 0) << "point " << i;
      lattice_sum += 2 * level + 1;
    }
    EXPECT_EQ(lattice_sum % 4, 0) << "point " << i << " is not in the half-integer coset of E8";
    points.insert(kIq2sGrid[i]);
  }
  EXPECT_EQ(points.size(), 1024u);
  EXPECT_EQ(kIq2sGrid[0], 0x0808080808080808ULL);
  EXPECT_EQ(kIq2sGrid[1], 0x080808080808082bULL);
  EXPECT_EQ(kIq2sGrid[500], 0x190808082b2b0819ULL);
  EXPECT_EQ(kIq2sGrid[1023], 0x2b2b2b2b2b2b2b2bULL);
}

TEST(IqTables, Iq3sGridIsOddLevels) {
  int members = 0;
  for (uint64_t w : kIq3sMembers) members += std::popcount(w);
  EXPECT_EQ(members, 512);
  std::set<uint32_t> points;
  for (size_t i = 0; i < 512; ++i) {
    for (int j = 0; j < 4; ++j) {
      const int byte = int((kIq3sGrid[i] >> (8 * j)) & 255);
      ASSERT_TRUE(byte % 2 == 1 && byte <= 15) << "point " << i;
    }
    points.insert(kIq3sGrid[i]);
  }
  EXPECT_EQ(points.size(), 512u);
  EXPECT_EQ(kIq3sGrid[0], 0x01010101u);
  EXPECT_EQ(kIq3sGrid[1], 0x01010103u);
  EXPECT_EQ(kIq3sGrid[300], 0x07030503u);
  EXPECT_EQ(kIq3sGrid[511], 0x0f0f0101u);
}

TEST(IqTables, Iq1sGridIsTernaryCodebook) {
  int members = 0;
  for (uint64_t w : kIq1sMembers) members += std::popcount(w);
  EXPECT_EQ(members, 2048);
  EXPECT_EQ(kIq1sMembers[102] >> (6561 - 64 * 102), 0u) << "no key beyond 3^8";
  std::set<uint64_t> points;
  int prev_key = -1, small = 0;
  for (size_t i = 0; i < 2048; ++i) {
    int key = 0, pow3 = 1, nonzero = 0;
    for (int k = 0; k < 8; ++k, pow3 *= 3) {
      const int c = int8_t((kIq1sGrid[i] >> (8 * k)) & 255);
      ASSERT_TRUE(c >= -1 && c <= 1) << "point " << i;
      key += (c + 1) * pow3, nonzero += c != 0;
    }
    EXPECT_GT(key, prev_key) << "points ascend by key, so all 2048 differ: " << i;
    prev_key = key;
    small += nonzero <= 2;
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(int8_t((kIq1sGrid8[i] >> (8 * j)) & 255), 8 * int8_t((kIq1sGrid[i] >> (8 * j)) & 255)) << i;
    points.insert(kIq1sGrid[i]);
  }
  EXPECT_EQ(points.size(), 2048u);
  EXPECT_EQ(small, 1 + 16 + 112) << "every point with at most two nonzero coordinates";
  EXPECT_EQ(kIq1sGrid[0], 0xffffffffffffffffULL);     // all -1: key 0
  EXPECT_EQ(kIq1sGrid[1], 0xffffffffffffff01ULL);     // coordinate 0 (least digit) +1
  EXPECT_EQ(kIq1sGrid[1000], 0x00000000ffff00ffULL);
  EXPECT_EQ(kIq1sGrid[2047], 0x0101010101010101ULL);  // all +1: the largest key
}

TEST(IqTables, EvenSigns) {
  for (int s = 0; s < 128; ++s) {
    EXPECT_EQ(kEvenSigns[size_t(s)] & 127, s);
    EXPECT_EQ(std::popcount(unsigned(kEvenSigns[size_t(s)])) % 2, 0) << s;
    for (int j = 0; j < 8; ++j) {
      const auto b = int8_t((kEvenSignBytes[size_t(s)] >> (8 * j)) & 255);
      EXPECT_EQ(b, (kEvenSigns[size_t(s)] >> j) & 1 ? -1 : 1);
    }
  }
}

// ---- layout --------------------------------------------------------------------------

TEST(IqLayout, Iq2xxsHandBuilt) {
  BlockIQ2_XXS b{};
  b.d = f32_to_fp16(2.0f);
  // Group 1: points 1 and 255 in runs 0 and 3, sign code 3 (values 0, 1 negative)
  // in run 0, scale code 5: step 2 * 11 / 8.
  const uint32_t w0 = 1u | (255u << 24), w1 = 3u | (5u << 28);
  std::memcpy(b.qs + 4, &w0, 4);
  std::memcpy(b.qs + 6, &w1, 4);
  auto y = dequantize(DType::IQ2_XXS, &b, 256);
  const float step = 2.0f * 11.0f / 8.0f, step0 = 2.0f * 1.0f / 8.0f;
  EXPECT_EQ(y[0], step0 * 8);  // group 0: point 0, no signs, scale code 0
  EXPECT_EQ(y[32], -step * 43);
  EXPECT_EQ(y[33], -step * 8);
  EXPECT_EQ(y[34], step * 8);
  EXPECT_EQ(y[40], step * 8);  // run 1: point 0
  for (int j = 0; j < 8; ++j)
    EXPECT_EQ(y[size_t(56 + j)], step * float((kIq2xxsGrid[255] >> (8 * j)) & 255)) << j;
}

TEST(IqLayout, Iq3xxsHandBuilt) {
  BlockIQ3_XXS b{};
  b.d = f32_to_fp16(2.0f);
  // Group 2: points 255 and 17 in its runs of four 0 and 1 (values 64..71), sign code
  // 5 (values 0 and 2 of the first eight negative), scale code 3: step 2 * 7 / 4.
  b.qs[16] = 255, b.qs[17] = 17;
  const uint32_t w = 5u | (3u << 28);
  std::memcpy(b.qs + 64 + 8, &w, 4);
  auto y = dequantize(DType::IQ3_XXS, &b, 256);
  const float step = 2.0f * 7.0f / 4.0f;
  EXPECT_EQ(y[0], 2.0f * 1.0f / 4.0f * 4);  // group 0: point 0, no signs, scale code 0
  const float want[8] = {-4, 28, -52, 62, 44, 20, 12, 4};  // 0x3e341c04, then 0x040c142c
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(64 + j)], step * want[j]) << j;
  EXPECT_EQ(y[72], step * 4);
}

TEST(IqLayout, Iq2xsHandBuilt) {
  BlockIQ2_XS b{};
  b.d = f32_to_fp16(2.0f);
  // Run 3 (values 24..31, group 1): point 511 with sign code 3; group 1's scale code
  // 6 (high nibble of scales[0]): step 2 * 13 / 8. Run 2 (group 1 too): point 2.
  b.qs[3] = uint16_t(511 | (3 << 9));
  b.qs[2] = 2;
  b.scales[0] = 6 << 4;
  auto y = dequantize(DType::IQ2_XS, &b, 256);
  const float step = 2.0f * 13.0f / 8.0f;
  EXPECT_EQ(y[0], 2.0f / 8.0f * 8);  // group 0: point 0, scale code 0
  EXPECT_EQ(y[16], step * 25);
  EXPECT_EQ(y[18], step * 8);
  EXPECT_EQ(y[24], -step * 43);
  EXPECT_EQ(y[25], -step * 43);
  EXPECT_EQ(y[26], step * 43);
  EXPECT_EQ(y[32], 2.0f / 8.0f * 8);
}

TEST(IqLayout, Iq2sHandBuilt) {
  BlockIQ2_S b{};
  b.d = f32_to_fp16(2.0f);
  // Run 6 (values 48..55; group 1, run 2, in its second half): point 1023 (low byte
  // in qs[6], high bits 3 in qh[1] bits 4..5), sign byte 0x81 (values 0 and 7
  // negative); the half's scale code 6 (high nibble of scales[1]): step 2 * 13 / 8.
  b.qs[6] = 1023 & 255;
  b.qh[1] = 3 << 4;
  b.qs[32 + 6] = 0x81;
  b.scales[1] = 6 << 4;
  auto y = dequantize(DType::IQ2_S, &b, 256);
  const float step = 2.0f * 13.0f / 8.0f;
  EXPECT_EQ(y[0], 2.0f / 8.0f * 8);  // point 0, code 0
  EXPECT_EQ(y[48], -step * 43);
  for (int j = 1; j < 7; ++j) EXPECT_EQ(y[size_t(48 + j)], step * 43) << j;
  EXPECT_EQ(y[55], -step * 43);
  EXPECT_EQ(y[56], step * 8);         // run 7: point 0, the same half
  EXPECT_EQ(y[32], 2.0f / 8.0f * 8);  // the first half: code 0
}

TEST(IqLayout, Iq3sHandBuilt) {
  BlockIQ3_S b{};
  b.d = f32_to_fp16(2.0f);
  // Group 3, cell 5 (values 116..119): point 511 (low byte in qs[29], ninth bit in
  // qh[3] bit 5), signs of run 2 of the group (signs[14]) bit 4: value 116 negative;
  // group 3's scale code 5 (high nibble of scales[1]): step 2 * 11.
  b.qs[29] = 511 & 255;
  b.qh[3] = 1 << 5;
  b.signs[14] = 1 << 4;
  b.scales[1] = 5 << 4;
  auto y = dequantize(DType::IQ3_S, &b, 256);
  EXPECT_EQ(y[0], 2.0f);  // point 0 (all 1), code 0
  const float want[4] = {-1, 1, 15, 15};  // 0x0f0f0101, value 0 negative
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[size_t(116 + j)], 22.0f * want[j]) << j;
  EXPECT_EQ(y[112], 22.0f);
}

TEST(IqLayout, Iq1sHandBuilt) {
  BlockIQ1_S b{};
  b.d = f32_to_fp16(2.0f);
  // Group 1, run 0: point 1000 (low byte 232 in qs[4], high bits 3 in qh[1] bits
  // 0..2); scale code 5 (step 2 * 11), delta sign set: x = 22 (g - 1/8).
  b.qs[4] = 1000 & 255;
  b.qh[1] = uint16_t(3 | 5 << 12 | 0x8000);
  auto y = dequantize(DType::IQ1_S, &b, 256);
  EXPECT_EQ(y[0], 2.0f * (-1 + 0.125f));  // group 0: point 0 (all -1), code 0, delta +
  const float want[8] = {-1, 0, -1, -1, 0, 0, 0, 0};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(32 + j)], 22.0f * (want[j] - 0.125f)) << j;
  EXPECT_EQ(y[40], 22.0f * (-1 - 0.125f));  // run 1: point 0
  EXPECT_EQ(y[64], 2.0f * (-1 + 0.125f));
}

TEST(IqLayout, Iq1mHandBuilt) {
  BlockIQ1_M b{};
  // d = 2 (fp16 0x4000): nibble w of the fp16 in the top of scale word w.
  const uint16_t words[4] = {uint16_t(6 << 6), 0, 0, 0x4000};  // half 2: scale code 6 (step 2 * 13)
  std::memcpy(b.scales, words, 8);
  // Run 5 (values 40..47, half 2): point 2047 (all +1), delta sign set (qh[2] bits 4..7).
  b.qs[5] = 2047 & 255;
  b.qh[2] = 0xf0;
  auto y = dequantize(DType::IQ1_M, &b, 256);
  EXPECT_EQ(y[0], 2.0f * (-1 + 0.125f));    // half 0: point 0, code 0, delta +
  EXPECT_EQ(y[32], 26.0f * (-1 + 0.125f));  // run 4: point 0, half 2's scale
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[size_t(40 + j)], 26.0f * (1 - 0.125f)) << j;
  EXPECT_EQ(y[48], 2.0f * (-1 + 0.125f));  // half 3: code 0
}

TEST(IqLayout, Tq1HandBuilt) {
  BlockTQ1_0 b{};
  b.d = f32_to_fp16(2.0f);
  // Digits 2 0 1 2 1 (v = 178) pack to ceil(178 * 256 / 243) = 188; 0 2 2 1 in qh
  // (v = 75, the fifth digit 0) to 80.
  b.qs[1] = 188, b.qs[33] = 188, b.qh[2] = 80;
  auto y = dequantize(DType::TQ1_0, &b, 256);
  const float five[5] = {1, -1, 0, 1, 0}, four[4] = {-1, 1, 1, 0};
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(y[size_t(32 * k + 1)], 2.0f * five[k]) << k;   // qs[1]: elements 32k + 1
    EXPECT_EQ(y[size_t(160 + 16 * k + 1)], 2.0f * five[k]) << k;  // qs[33]: 160 + 16k + 1
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(y[size_t(240 + 4 * k + 2)], 2.0f * four[k]) << k;  // qh[2]
  EXPECT_EQ(y[0], -2.0f);  // byte 0: all digits 0
  EXPECT_EQ(y[255], -2.0f);
  // Every byte decodes, and packing its digits again gives it back.
  auto q = quantize(DType::TQ1_0, y);
  EXPECT_EQ(std::memcmp(q.data(), &b, sizeof b), 0);
}

// ---- dot products --------------------------------------------------------------------

TEST(IqDot, ReferenceEqualsDequantizedDot) {
  for (DType t : kIqTypes) {
    for (int64_t n : {256, 768, 4096}) {
      for (bool random : {false, true}) {
        auto w = random ? random_row(t, n, uint64_t(n)) : quantize(t, gaussian(size_t(n), uint32_t(n)));
        auto x = q8k_row(gaussian(size_t(n), 3, 2.0f));
        auto wd = dequantize(t, w.data(), n), xd = dequantize(DType::Q8_K, x.data(), n);
        double want = 0, abs_sum = 0;
        for (int64_t i = 0; i < n; ++i) want += double(wd[i]) * xd[i], abs_sum += std::fabs(double(wd[i]) * xd[i]);
        float got;
        type_traits_ref(t)->vec_dot(n, &got, w.data(), x.data());
        EXPECT_NEAR(got, want, 2e-6 * abs_sum) << name(t) << " n=" << n;
      }
    }
  }
}

TEST(IqDot, SimdMatchesReferenceAndRowKernelsAreExact) {
  int checked = 0;
  for (DType t : kIqTypes) {
    EXPECT_EQ(type_traits_ref(t)->vec_dot_type, DType::Q8_K);
    for (Isa isa : {Isa::AVX2, Isa::AVX512, Isa::NEON}) {
      const TypeTraits* tt = type_traits_isa(t, isa);
      if (tt == nullptr) continue;
      EXPECT_EQ(tt->isa, isa) << name(t) << " has no " << isa_name(isa) << " kernel";
      ASSERT_NE(tt->vec_dot_r4, nullptr) << name(t) << " " << isa_name(isa);
      if ((isa == Isa::AVX512 || isa == Isa::AVX2) && t != DType::TQ1_0) {
        EXPECT_NE(tt->vec_dot_x8, nullptr) << name(t) << " " << isa_name(isa);
      }
      for (int64_t n : {256, 768, 1280, 4096}) {
        const size_t row = dtype_row_bytes(t, uint64_t(n));
        for (size_t stride : {row, row + tt->block_bytes}) {
          std::vector<uint8_t> w(4 * stride, 0xcd);
          for (int r = 0; r < 4; ++r) {
            auto wr = r % 2 ? random_row(t, n, uint64_t(n + r)) : quantize(t, gaussian(size_t(n), uint32_t(n + r)));
            std::memcpy(w.data() + r * stride, wr.data(), row);
          }
          std::vector<std::vector<uint8_t>> x;
          for (int k = 0; k < 4; ++k) x.push_back(q8k_row(gaussian(size_t(n), uint32_t(100 + k), 2.0f)));
          const void* xs[4] = {x[2].data(), x[0].data(), x[3].data(), x[1].data()};
          for (int r = 0; r < 4; ++r) {
            const uint8_t* wr = w.data() + r * stride;
            auto wd = dequantize(t, wr, n), xd = dequantize(DType::Q8_K, x[0].data(), n);
            double abs_sum = 0;
            for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(double(wd[i]) * xd[i]);
            float want, got;
            type_traits_ref(t)->vec_dot(n, &want, wr, x[0].data());
            tt->vec_dot(n, &got, wr, x[0].data());
            EXPECT_NEAR(got, want, 2e-6 * abs_sum) << name(t) << " " << isa_name(isa) << " n=" << n;
            float got4[4];
            tt->vec_dot_x4(n, got4, wr, xs);
            for (int k = 0; k < 4; ++k) {
              float one;
              tt->vec_dot(n, &one, wr, xs[k]);
              EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(got4[k])) << name(t) << " x4 k=" << k;
            }
            if (tt->vec_dot_x8 == nullptr) continue;
            // Eight rows, the four repeated in another order (a padded group's shape).
            const int order[8] = {1, 3, 0, 2, 2, 2, 1, 0};
            const void* xs8[8];
            for (int k = 0; k < 8; ++k) xs8[k] = xs[order[k]];
            float got8[8];
            tt->vec_dot_x8(n, got8, wr, xs8);
            for (int k = 0; k < 8; ++k)
              EXPECT_EQ(std::bit_cast<uint32_t>(got4[order[k]]), std::bit_cast<uint32_t>(got8[k]))
                  << name(t) << " " << isa_name(isa) << " x8 n=" << n << " k=" << k;
          }
          float r4[4];
          tt->vec_dot_r4(n, r4, w.data(), stride, x[1].data());
          for (int r = 0; r < 4; ++r) {
            float one;
            tt->vec_dot(n, &one, w.data() + r * stride, x[1].data());
            EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(r4[r]))
                << name(t) << " " << isa_name(isa) << " r4 n=" << n << " row " << r;
          }
          ++checked;
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD instruction set on this CPU";
}

// ---- quantizer -----------------------------------------------------------------------

// Bounds on rms(dequant(quant(x)) - x) / rms(x) for Gaussian x (measured ~85-90%).
TEST(IqQuant, RoundTripError) {
  const struct {
    DType t;
    double bound;
  } bounds[] = {{DType::IQ2_XXS, 0.36}, {DType::IQ2_XS, 0.32}, {DType::IQ3_XXS, 0.2}, {DType::IQ2_S, 0.27},
                {DType::IQ3_S, 0.15}, {DType::IQ1_S, 0.5}, {DType::IQ1_M, 0.46},
                {DType::TQ1_0, 0.85}};
  auto x = gaussian(256 * 32, 1);
  for (const auto& b : bounds) {
    auto y = dequantize(b.t, quantize(b.t, x).data(), int64_t(x.size()));
    double rel = rel_rms(y, x);
    std::printf("  %-8s rel rms error %.4f (bound %.3f)\n", name(b.t).c_str(), rel, b.bound);
    EXPECT_LE(rel, b.bound) << name(b.t);
  }
}

// Values a block can represent exactly come back (up to the fp16 super-scale), so
// the search reaches the best point rather than a near one.
TEST(IqQuant, RecoversRepresentableValues) {
  for (DType t : kIqTypes) {
    auto w = random_row(t, 256 * 8, 9);
    // Group 0 at the largest scale code fixes d (the top nibble of its sign/scale
    // word; IQ2_XS: the low nibble of scales[0]; IQ1_S: bits 12..14 of qh[0]; IQ1_M:
    // bits 0..2 of the first scale word).
    const size_t bb = block_geometry(t).block_bytes;
    size_t top = t == DType::IQ2_XXS ? 2 + 7 : t == DType::IQ2_XS ? 2 + 64 : 2 + 64 + 3;
    uint8_t bits = t == DType::IQ2_XS ? 0x0f : 0xf0;
    if (t == DType::IQ1_S) top = 2 + 32 + 1, bits = 0x70;
    if (t == DType::IQ1_M) top = 32 + 16, bits = 0x07;
    if (t == DType::TQ1_0) bits = 0;  // one scale, the largest value
    if (t == DType::IQ2_S) top = 2 + 64 + 8, bits = 0x0f;
    if (t == DType::IQ3_S) top = 2 + 64 + 8 + 32, bits = 0x0f;
    for (int i = 0; i < 8; ++i) w[i * bb + top] |= bits;
    auto x = dequantize(t, w.data(), 256 * 8);
    auto y = dequantize(t, quantize(t, x).data(), 256 * 8);
    EXPECT_LT(rel_rms(y, x), 2e-3) << name(t);
  }
}

TEST(IqQuant, EdgeInputs) {
  for (DType t : kIqTypes) {
    std::vector<float> zero(512, 0.0f), flat(512, -3.0f), spike(512, 0.0f);
    spike[17] = 3e4f, spike[300] = -1e-3f;
    for (float v : dequantize(t, quantize(t, zero).data(), 512)) ASSERT_EQ(v, 0.0f) << name(t);
    auto y = dequantize(t, quantize(t, flat).data(), 512);
    for (float v : y) ASSERT_NEAR(v, -3.0f, 0.01) << name(t);
    for (float v : dequantize(t, quantize(t, spike).data(), 512)) ASSERT_TRUE(std::isfinite(v)) << name(t);
  }
}
