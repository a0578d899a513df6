// Kernel tests: GGUF block layouts (hand-built blocks and an independent, streaming
// transcription of each layout), quantization error bounds per type, every SIMD
// kernel against the scalar reference (each ISA this CPU has, odd block counts),
// matmul against a dequantize-then-float reference, and the random block filler.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "core/platform.h"
#include "core/thread_pool.h"
#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/kernels_impl.h"
#include "kernels/matmul.h"
#include "kernels/random_fill.h"
#include "kernels/types.h"
#include "model/ops.h"
#include "kernel_test_util.h"

using namespace deltafin;
using namespace deltafin::kern;

namespace {

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::MXFP4,
                              DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                              DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS,
                              DType::TQ2_0};
const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::MXFP4,
                           DType::Q8_K, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                           DType::Q8_1, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS,
                           DType::TQ2_0};
// The i-quants and TQ1_0: their kernels are checked in test_iq_kernels.cpp; here only
// that the NEON table has all of them (every NEON weight type has an r4 kernel).
const DType kIqTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ3_XXS, DType::IQ2_S,
                          DType::IQ3_S,   DType::IQ1_S,  DType::IQ1_M,   DType::TQ1_0};

std::string name(DType t) { return std::string(dtype_name(t)); }

std::vector<uint8_t> quantize(const TypeTraits* tt, const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_row_bytes(tt->type, x.size()));
  tt->from_float(x.data(), q.data(), int64_t(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const void* q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  type_traits_ref(t)->to_float(q, y.data(), n);
  return y;
}

std::vector<Isa> simd_isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::AVX2, Isa::AVX512, Isa::NEON}) {
    if (isa_supported(isa)) v.push_back(isa);
  }
  return v;
}

// Block-size multiple of both the weight type and its activation type.
int64_t unit(DType t) {
  const TypeTraits* tt = type_traits_ref(t);
  return std::max(tt->block_elems, type_traits_ref(tt->vec_dot_type)->block_elems);
}

// Q8_1 stores each block's d * sum(q) rounded to fp16 (ggml's format), which the
// offset types' (Q4_1, Q5_1) m multiplies: the bound that rounding (2^-11 relative)
// adds to a dot against dequantized values; 0 for other types.
double q8_1_sum_rounding(DType t, const void* w, const void* x, int64_t n) {
  if (t != DType::Q4_1 && t != DType::Q5_1) return 0;
  const uint32_t wb = type_traits_ref(t)->block_bytes;
  double bound = 0;
  for (int64_t i = 0; i < n / 32; ++i) {
    uint16_t m, s;
    std::memcpy(&m, static_cast<const uint8_t*>(w) + i * wb + 2, 2);  // d, m
    std::memcpy(&s, static_cast<const uint8_t*>(x) + i * sizeof(BlockQ8_1) + 2, 2);  // d, s
    bound += std::fabs(double(fp16_to_f32(m)) * fp16_to_f32(s)) * 0x1p-11;
  }
  return bound;
}

}  // namespace

// ---- layouts -------------------------------------------------------------------------

TEST(KernelLayout, TableMatchesGeometry) {
  for (DType t : kAllTypes) {
    const TypeTraits* tt = type_traits(t);
    ASSERT_NE(tt, nullptr) << name(t);
    EXPECT_EQ(tt->block_elems, block_geometry(t).block_elems) << name(t);
    EXPECT_EQ(tt->block_bytes, block_geometry(t).block_bytes) << name(t);
    EXPECT_NE(tt->vec_dot, nullptr);
    EXPECT_NE(tt->vec_dot_x4, nullptr);
  }
  EXPECT_EQ(type_traits(DType::F64), nullptr);
  EXPECT_EQ(type_traits(DType::Q4_K)->vec_dot_type, DType::Q8_K);
  EXPECT_EQ(type_traits(DType::Q2_K)->vec_dot_type, DType::Q8_K);
  EXPECT_EQ(type_traits(DType::MXFP4)->vec_dot_type, DType::Q8_0);
  EXPECT_EQ(type_traits(DType::Q4_0)->vec_dot_type, DType::Q8_0);
  EXPECT_EQ(type_traits(DType::Q5_0)->vec_dot_type, DType::Q8_0);
  EXPECT_EQ(type_traits(DType::IQ4_NL)->vec_dot_type, DType::Q8_0);
  EXPECT_EQ(type_traits(DType::Q4_1)->vec_dot_type, DType::Q8_1);
  EXPECT_EQ(type_traits(DType::Q5_1)->vec_dot_type, DType::Q8_1);
  EXPECT_EQ(type_traits(DType::IQ4_XS)->vec_dot_type, DType::Q8_K);
  EXPECT_EQ(type_traits(DType::TQ2_0)->vec_dot_type, DType::Q8_K);
  EXPECT_EQ(type_traits(DType::F16)->vec_dot_type, DType::F16);
  EXPECT_EQ(type_traits(DType::BF16)->vec_dot_type, DType::BF16);
}

TEST(KernelLayout, Fp16Conversions) {
  EXPECT_EQ(f32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);           // ties to even -> infinity
  EXPECT_EQ(f32_to_fp16(0x1p-24f), 0x0001);           // smallest subnormal
  EXPECT_EQ(f32_to_fp16(1.0f + 0x1p-11f), 0x3c00);    // tie, to even
  EXPECT_EQ(f32_to_fp16(1.0f + 0x1.8p-11f), 0x3c01);  // above the tie
  EXPECT_EQ(fp16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_f32(0x3555), 0.333251953125f);
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every finite half round-trips
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(f32_to_fp16(fp16_to_f32(uint16_t(h))), h) << h;
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(e8m0_half_to_f32(128), 1.0f);
  EXPECT_EQ(e8m0_half_to_f32(127), 0.5f);
  EXPECT_EQ(e8m0_half_to_f32(0), 0x1p-128f);
  EXPECT_EQ(e8m0_half_to_f32(1), 0x1p-127f);
}

// The vector F16 rounding of the attention path equals the scalar one bit for bit,
// over every 2^-16-th float bit pattern (all exponents: subnormals, overflow to
// infinity, ties) and at odd lengths that leave a scalar tail.
TEST(KernelLayout, RoundFp16VectorEqualsScalar) {
  std::vector<float> x;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521) {
    float f;
    const uint32_t b = uint32_t(u);
    std::memcpy(&f, &b, 4);
    if (!std::isnan(f)) x.push_back(f);
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 1.0f + 0x1p-11f, -0.0f}) x.push_back(f);
  for (size_t n : {x.size(), size_t(7), size_t(13)}) {
    std::vector<float> y(n), in(x.begin(), x.begin() + long(n));
    deltafin::round_fp16_n(in.data(), y.data(), int64_t(n));
    for (size_t i = 0; i < n; ++i) {
      const float want = deltafin::round_fp16(in[i]);
      ASSERT_EQ(std::memcmp(&y[i], &want, 4), 0) << in[i] << " -> " << y[i] << " want " << want;
    }
    deltafin::round_fp16_n(in.data(), in.data(), int64_t(n));  // in place
    ASSERT_EQ(std::memcmp(in.data(), y.data(), n * 4), 0);
  }
}

TEST(KernelLayout, Q8_0HandBuilt) {
  BlockQ8_0 b;
  b.d = f32_to_fp16(0.5f);
  for (int i = 0; i < 32; ++i) b.qs[i] = int8_t(i + 1);
  auto y = dequantize(DType::Q8_0, &b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.5f * (i + 1));
}

TEST(KernelLayout, Q4_0HandBuilt) {
  BlockQ4_0 b;
  b.d = f32_to_fp16(2.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  auto y = dequantize(DType::Q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * (j - 8));
    EXPECT_EQ(y[j + 16], 2.0f * (7 - j));
  }
}

TEST(KernelLayout, Q4_1HandBuilt) {
  BlockQ4_1 b;
  b.d = f32_to_fp16(2.0f);
  b.m = f32_to_fp16(-3.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  auto y = dequantize(DType::Q4_1, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * j - 3.0f);
    EXPECT_EQ(y[j + 16], 2.0f * (15 - j) - 3.0f);
  }
}

// Q5_0 / Q5_1: element e's fifth bit is bit e of qh (little-endian), for e < 32.
TEST(KernelLayout, Q5HandBuilt) {
  BlockQ5_0 b;
  BlockQ5_1 c;
  b.d = c.d = f32_to_fp16(0.5f);
  c.m = f32_to_fp16(1.0f);
  const uint32_t h = 0xa5c3f00fu;
  std::memcpy(b.qh, &h, 4);
  std::memcpy(c.qh, &h, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = c.qs[j] = uint8_t(j | ((15 - j) << 4));
  auto y = dequantize(DType::Q5_0, &b, 32), z = dequantize(DType::Q5_1, &c, 32);
  for (int e = 0; e < 32; ++e) {
    const int code = (e < 16 ? e : 31 - e) | int((h >> e) & 1) << 4;
    EXPECT_EQ(y[e], 0.5f * (code - 16)) << e;
    EXPECT_EQ(z[e], 0.5f * code + 1.0f) << e;
  }
}

// The IQ4_NL levels: 16 distinct, increasing, from -127 to 113, and a nibble selects one.
TEST(KernelLayout, IQ4_NLHandBuilt) {
  for (int c = 1; c < 16; ++c) EXPECT_LT(kIq4nlValues[c - 1], kIq4nlValues[c]);
  EXPECT_EQ(kIq4nlValues[0], -127);
  EXPECT_EQ(kIq4nlValues[15], 113);
  int sum = 0;
  for (int8_t v : kIq4nlValues) sum += v;
  EXPECT_EQ(sum, -94);
  BlockIQ4_NL b;
  b.d = f32_to_fp16(0.25f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  auto y = dequantize(DType::IQ4_NL, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * kIq4nlValues[j]);
    EXPECT_EQ(y[j + 16], 0.25f * kIq4nlValues[15 - j]);
  }
}

// IQ4_XS: sub-block j's scale is (low nibble j % 2 of scales_l[j / 2]) | (bits 2j..2j+1
// of scales_h) << 4, minus 32; its codes are the nibbles of qs[16j..16j+15].
TEST(KernelLayout, IQ4_XSHandBuilt) {
  BlockIQ4_XS b;
  b.d = f32_to_fp16(0.5f);
  const int ls[8] = {0, 63, 31, 32, 1, 47, 16, 62};  // stored values, all bit patterns of the top bits
  b.scales_h = 0;
  std::memset(b.scales_l, 0, 4);
  for (int j = 0; j < 8; ++j) {
    b.scales_l[j / 2] |= uint8_t((ls[j] & 15) << 4 * (j % 2));
    b.scales_h |= uint16_t((ls[j] >> 4) << 2 * j);
  }
  for (int k = 0; k < 128; ++k) b.qs[k] = uint8_t((k % 16) | ((15 - k % 16) << 4));
  auto y = dequantize(DType::IQ4_XS, &b, 256);
  for (int j = 0; j < 8; ++j) {
    for (int e = 0; e < 16; ++e) {
      EXPECT_EQ(y[32 * j + e], 0.5f * (ls[j] - 32) * kIq4nlValues[e]) << j << " " << e;
      EXPECT_EQ(y[32 * j + 16 + e], 0.5f * (ls[j] - 32) * kIq4nlValues[15 - e]) << j << " " << e;
    }
  }
}

// TQ2_0: element 128h + 32l + k is bits 2l..2l+1 of qs[32h + k], x = d * (code - 1).
TEST(KernelLayout, TQ2_0HandBuilt) {
  BlockTQ2_0 b;
  b.d = f32_to_fp16(0.5f);
  for (int k = 0; k < 64; ++k) b.qs[k] = uint8_t(k * 37 + 11);
  auto y = dequantize(DType::TQ2_0, &b, 256);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 4; ++l)
      for (int k = 0; k < 32; ++k) {
        const int code = (uint8_t(k * 37 + 11 + h * 32 * 37) >> 2 * l) & 3;
        EXPECT_EQ(y[128 * h + 32 * l + k], 0.5f * (code - 1)) << h << " " << l << " " << k;
      }
}

TEST(KernelLayout, MXFP4HandBuilt) {
  // E2M1 codes: 0..7 = 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 = sign. Scale 2^(e-127).
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  BlockMXFP4 b;
  b.e = 129;  // 2^2
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  auto y = dequantize(DType::MXFP4, &b, 32);
  for (int j = 0; j < 16; ++j) {
    auto val = [&](int c) { return (c & 8 ? -1.0f : 1.0f) * e2m1[c & 7] * 4.0f; };
    EXPECT_EQ(y[j], val(j));
    EXPECT_EQ(y[j + 16], val(15 - j));
  }
}

TEST(KernelLayout, Q4_KHandBuilt) {
  BlockQ4_K b;
  b.d = f32_to_fp16(1.0f);
  b.dmin = f32_to_fp16(0.5f);
  const uint8_t s[12] = {10 | 0x40, 11, 12, 13, 20, 21, 22, 23, 0x21, 0x43, 0x65, 0x87};
  std::memcpy(b.scales, s, 12);
  // sc = 10 11 12 13 | 1+16 3 5 7, m = 20 21 22 23 | 2 4 6 8
  std::memset(b.qs, 0x53, sizeof b.qs);  // low nibble 3, high nibble 5
  auto y = dequantize(DType::Q4_K, &b, 256);
  EXPECT_EQ(y[0], 10 * 3 - 0.5f * 20);    // sub-block 0, low nibbles
  EXPECT_EQ(y[32], 11 * 5 - 0.5f * 21);   // sub-block 1, high nibbles
  EXPECT_EQ(y[128], 17 * 3 - 0.5f * 2);   // sub-block 4
  EXPECT_EQ(y[160], 3 * 5 - 0.5f * 4);    // sub-block 5
  EXPECT_EQ(y[255], 7 * 5 - 0.5f * 8);    // sub-block 7
}

TEST(KernelLayout, Q6_KHandBuilt) {
  BlockQ6_K b{};
  b.d = f32_to_fp16(1.0f);
  for (auto& s : b.scales) s = 1;
  b.scales[15] = -2;
  b.ql[0] = 0x21;       // elements 0 (low nibble 1) and 64 (high nibble 2)
  b.qh[0] = 0b11100100;  // top bits of elements 0, 32, 64, 96: 0, 1, 2, 3
  b.ql[127] = 0xf0;     // element 255: high nibble of ql[64 + 63]
  b.qh[63] = 0xc0;      // element 255: top bits 3
  auto y = dequantize(DType::Q6_K, &b, 256);
  EXPECT_EQ(y[0], 1 - 32);
  EXPECT_EQ(y[32], 16 - 32);
  EXPECT_EQ(y[64], 2 + 32 - 32);
  EXPECT_EQ(y[96], 48 - 32);
  EXPECT_EQ(y[255], -2.0f * (63 - 32));
}

// Independent transcription of each K-quant layout, written as a stream over the
// output (the way the GGUF producers write it), not per element like the kernels.
namespace {
std::vector<float> stream_dequant(DType t, const void* src, int n) {
  std::vector<float> out;
  for (int i = 0; i < n / 256; ++i) {
    if (t == DType::Q2_K) {
      const auto& b = static_cast<const BlockQ2_K*>(src)[i];
      const uint8_t* q = b.qs;
      int is = 0;
      for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2) {
          for (int part = 0; part < 2; ++part) {
            uint8_t sc = b.scales[is++];
            for (int l = 0; l < 16; ++l)
              out.push_back(fp16_to_f32(b.d) * (sc & 15) * ((q[16 * part + l] >> shift) & 3) - fp16_to_f32(b.dmin) * (sc >> 4));
          }
        }
      }
    } else if (t == DType::Q3_K) {
      const auto& b = static_cast<const BlockQ3_K*>(src)[i];
      int8_t sc[16];
      for (int j = 0; j < 16; ++j) {  // 4 low bits: bytes 0..7 low then high nibbles; 2 high bits: bytes 8..11
        int low = (b.scales[j % 8] >> (4 * (j / 8))) & 15;
        int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = int8_t((low | (high << 4)) - 32);
      }
      const uint8_t* q = b.qs;
      uint8_t m = 1;
      int is = 0;
      for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
          for (int part = 0; part < 2; ++part) {
            float dl = fp16_to_f32(b.d) * sc[is++];
            for (int l = 16 * part; l < 16 * part + 16; ++l)
              out.push_back(dl * (((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4)));
          }
        }
      }
    } else if (t == DType::Q4_K || t == DType::Q5_K) {
      const bool five = t == DType::Q5_K;
      const uint8_t* scales = five ? static_cast<const BlockQ5_K*>(src)[i].scales : static_cast<const BlockQ4_K*>(src)[i].scales;
      const uint8_t* qs = five ? static_cast<const BlockQ5_K*>(src)[i].qs : static_cast<const BlockQ4_K*>(src)[i].qs;
      const uint8_t* qh = five ? static_cast<const BlockQ5_K*>(src)[i].qh : nullptr;
      uint16_t dh = five ? static_cast<const BlockQ5_K*>(src)[i].d : static_cast<const BlockQ4_K*>(src)[i].d;
      uint16_t mh = five ? static_cast<const BlockQ5_K*>(src)[i].dmin : static_cast<const BlockQ4_K*>(src)[i].dmin;
      for (int c = 0; c < 4; ++c) {
        for (int nib = 0; nib < 2; ++nib) {
          int j = 2 * c + nib;
          int sc = j < 4 ? scales[j] & 63 : (scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4);
          int mn = j < 4 ? scales[j + 4] & 63 : (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
          for (int l = 0; l < 32; ++l) {
            int q = (qs[32 * c + l] >> (4 * nib)) & 15;
            if (five && (qh[l] & (1 << j))) q += 16;
            out.push_back(fp16_to_f32(dh) * sc * q - fp16_to_f32(mh) * mn);
          }
        }
      }
    } else if (t == DType::Q6_K) {
      const auto& b = static_cast<const BlockQ6_K*>(src)[i];
      float tmp[256];
      const uint8_t *ql = b.ql, *qh = b.qh;
      const int8_t* sc = b.scales;
      for (int base = 0; base < 256; base += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; ++l) {
          int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                      (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
          for (int k = 0; k < 4; ++k) tmp[base + l + 32 * k] = fp16_to_f32(b.d) * sc[l / 16 + 2 * k] * (q[k] - 32);
        }
      }
      out.insert(out.end(), tmp, tmp + 256);
    }
  }
  return out;
}
}  // namespace

TEST(KernelLayout, KQuantsMatchStreamingTranscription) {
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int n = 256 * 5;
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    ASSERT_TRUE(fill_random(t, 7, n, 1.0f, q.data()));
    auto a = dequantize(t, q.data(), n);
    auto b = stream_dequant(t, q.data(), n);
    ASSERT_EQ(a.size(), b.size());
    for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(a[i], b[i]) << name(t) << " element " << i;
  }
}

// ---- quantization error --------------------------------------------------------------

// Bounds on rms(dequant(quant(x)) - x) / rms(x) for Gaussian x (measured values are
// about 60-80% of these).
TEST(KernelQuant, RoundTripError) {
  struct Bound {
    DType t;
    double rel_rms;
  };
  // TQ2_0 is ternary with d = max|x| (llama.cpp's rule), made for ternary-trained
  // weights: most of a Gaussian rounds to 0.
  const Bound bounds[] = {{DType::F32, 0},         {DType::F16, 4e-4},     {DType::BF16, 3e-3},
                          {DType::Q8_0, 0.0085},   {DType::Q8_K, 0.0085},  {DType::Q6_K, 0.025},
                          {DType::Q5_K, 0.045},    {DType::Q4_K, 0.09},    {DType::Q4_0, 0.12},
                          {DType::MXFP4, 0.15},    {DType::Q3_K, 0.2},     {DType::Q2_K, 0.4},
                          {DType::Q8_1, 0.0085},   {DType::Q5_1, 0.05},    {DType::Q5_0, 0.06},
                          {DType::Q4_1, 0.1},      {DType::IQ4_NL, 0.1},   {DType::IQ4_XS, 0.1},
                          {DType::TQ2_0, 0.9}};
  const int n = 256 * 64;
  auto x = gaussian(n, 1);
  for (const Bound& b : bounds) {
    for (Isa isa : {Isa::Scalar, Isa::AVX2, Isa::AVX512, Isa::NEON}) {
      const TypeTraits* tt = type_traits_isa(b.t, isa);
      if (tt == nullptr) continue;
      auto q = quantize(tt, x);
      auto y = dequantize(b.t, q.data(), n);
      double e2 = 0, x2 = 0;
      for (int i = 0; i < n; ++i) e2 += double(y[i] - x[i]) * (y[i] - x[i]), x2 += double(x[i]) * x[i];
      double rel = std::sqrt(e2 / x2);
      EXPECT_LE(rel, b.rel_rms) << name(b.t) << " " << isa_name(isa);
      if (isa == Isa::Scalar) std::printf("  %-6s rel rms error %.5f (bound %.4f)\n", name(b.t).c_str(), rel, b.rel_rms);
    }
  }
}

TEST(KernelQuant, EdgeInputs) {
  // All zeros, constant blocks, a huge outlier: valid blocks, finite output.
  for (DType t : kAllTypes) {
    const TypeTraits* tt = type_traits_ref(t);
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<float> x(512, pattern == 1 ? -3.0f : 0.0f);
      if (pattern == 2) x[17] = 3e4f, x[300] = -1e-3f;
      auto q = quantize(tt, x);
      auto y = dequantize(t, q.data(), 512);
      for (int i = 0; i < 512; ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << name(t) << " pattern " << pattern;
        if (pattern == 0) {
          ASSERT_EQ(y[i], 0.0f) << name(t);
        }
      }
      if (pattern == 1) {
        EXPECT_NEAR(y[5], -3.0f, 0.05) << name(t);
      }
    }
  }
}

TEST(KernelQuant, SimdQuantizersMatchReferenceBytes) {
  // The activation quantizers/converters must produce the reference's exact bytes.
  auto x = gaussian(256 * 9 + 0, 5, 3.0f);
  x[3] = 0;
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
  for (DType t : {DType::Q8_0, DType::Q8_K, DType::Q8_1, DType::F16, DType::BF16}) {
    auto want = quantize(type_traits_ref(t), x);
    for (Isa isa : simd_isas()) {
      auto got = quantize(type_traits_isa(t, isa), x);
      EXPECT_EQ(got, want) << name(t) << " " << isa_name(isa);
      std::vector<float> a(x.size()), b(x.size());
      type_traits_ref(t)->to_float(want.data(), a.data(), int64_t(x.size()));
      type_traits_isa(t, isa)->to_float(want.data(), b.data(), int64_t(x.size()));
      EXPECT_EQ(a, b) << name(t) << " " << isa_name(isa);
    }
  }
}

// ---- dot products --------------------------------------------------------------------

namespace {
// Weights and activations for a dot test: from quantizing Gaussians (realistic) or
// from fill_random (every code and scale pattern).
struct DotCase {
  std::vector<uint8_t> w, x;  // x holds 4 activation rows, x_stride apart
  size_t x_stride;
  double abs_sum;  // sum |w_i x_i| over dequantized values of row 0
};

DotCase make_case(DType t, int64_t n, bool random_blocks, uint32_t seed) {
  const TypeTraits* tt = type_traits_ref(t);
  const TypeTraits* at = type_traits_ref(tt->vec_dot_type);
  DotCase c;
  auto wf = gaussian(size_t(n), seed);
  if (random_blocks) {
    c.w.resize(dtype_row_bytes(t, n));
    fill_random(t, seed, n, 1.0f, c.w.data());
  } else {
    c.w = quantize(tt, wf);
  }
  c.x_stride = dtype_row_bytes(at->type, n);
  c.x.resize(4 * c.x_stride);
  for (int k = 0; k < 4; ++k) {
    auto xf = gaussian(size_t(n), seed * 7 + k + 1, 2.0f);
    at->from_float(xf.data(), c.x.data() + k * c.x_stride, n);
  }
  auto wd = dequantize(t, c.w.data(), n), xd = dequantize(at->type, c.x.data(), n);
  c.abs_sum = 0;
  for (int64_t i = 0; i < n; ++i) c.abs_sum += std::fabs(double(wd[i]) * xd[i]);
  return c;
}

// Four weight rows of make_case's (random blocks in the even rows, or the odd ones),
// `stride` bytes apart with 0xcd in any gap; row r from seed n * seed_mul + r.
std::vector<uint8_t> four_rows(DType t, int64_t n, size_t stride, bool random_even, uint32_t seed_mul) {
  const size_t row = dtype_row_bytes(t, uint64_t(n));
  std::vector<uint8_t> w(4 * stride, 0xcd);
  for (int r = 0; r < 4; ++r) {
    DotCase c = make_case(t, n, (r % 2 == 0) == random_even, uint32_t(n) * seed_mul + uint32_t(r));
    std::memcpy(w.data() + r * stride, c.w.data(), row);
  }
  return w;
}

std::vector<int64_t> dot_lengths(DType t) {
  int64_t u = unit(t);
  if (u == 1) return {1, 7, 16, 33, 100, 1001, 4096};
  if (u == 32) return {32, 96, 160, 544, 608, 1056, 4096};  // blocks: 1 3 5 17 19 33 128
  return {256, 768, 1280, 4096};
}
}  // namespace

// Batch invariance: a token's result must not depend on whether the matmul put its
// row in a group of four (vec_dot_x4) or computed it alone (vec_dot), so a sequence
// gets bit-identical logits whether it is evaluated alone or batched with others
// (the server's continuous batching relies on it).
TEST(KernelDot, X4EqualsSingleBitForBit) {
  std::vector<Isa> isas = simd_isas();
  isas.push_back(Isa::Scalar);
  for (DType t : kWeightTypes) {
    for (Isa isa : isas) {
      const TypeTraits* tt = isa == Isa::Scalar ? type_traits_ref(t) : type_traits_isa(t, isa);
      for (int64_t n : dot_lengths(t)) {
        DotCase c = make_case(t, n, true, uint32_t(n) + 5);
        const void* rows[4];
        for (int k = 0; k < 4; ++k) rows[k] = c.x.data() + k * c.x_stride;
        float got4[4];
        tt->vec_dot_x4(n, got4, c.w.data(), rows);
        for (int k = 0; k < 4; ++k) {
          float one;
          tt->vec_dot(n, &one, c.w.data(), rows[k]);
          EXPECT_EQ(std::memcmp(&one, &got4[k], sizeof(float)), 0)
              << name(t) << " " << isa_name(isa) << " n=" << n << " k=" << k << ": " << one << " vs " << got4[k];
        }
        if (tt->vec_dot_x8 == nullptr) continue;
        // Eight rows: the four in a scrambled order with repeats, as a padded group has.
        const int order[8] = {3, 1, 0, 2, 2, 0, 3, 3};
        const void* rows8[8];
        for (int k = 0; k < 8; ++k) rows8[k] = rows[order[k]];
        float got8[8];
        tt->vec_dot_x8(n, got8, c.w.data(), rows8);
        for (int k = 0; k < 8; ++k)
          EXPECT_EQ(std::bit_cast<uint32_t>(got8[k]), std::bit_cast<uint32_t>(got4[order[k]]))
              << name(t) << " x8 " << isa_name(isa) << " n=" << n << " k=" << k;
      }
    }
  }
}

// The 512-bit IQ4_XS kernel forms the same int32 lanes as the 256-bit one (its halves
// are added before the float step), so the two instruction sets agree exactly.
TEST(KernelDot, Iq4xsAvx512EqualsAvx2BitForBit) {
  const TypeTraits* t2 = type_traits_isa(DType::IQ4_XS, Isa::AVX2);
  const TypeTraits* t5 = type_traits_isa(DType::IQ4_XS, Isa::AVX512);
  if (t2 == nullptr || t5 == nullptr) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (int64_t n : dot_lengths(DType::IQ4_XS)) {
    for (bool random_blocks : {false, true}) {
      DotCase c = make_case(DType::IQ4_XS, n, random_blocks, uint32_t(n) + 3);
      for (int k = 0; k < 4; ++k) {
        float a, b;
        t2->vec_dot(n, &a, c.w.data(), c.x.data() + k * c.x_stride);
        t5->vec_dot(n, &b, c.w.data(), c.x.data() + k * c.x_stride);
        EXPECT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << "n=" << n << " k=" << k << ": " << a << " vs " << b;
      }
    }
  }
}

// The decode kernel (four weight rows against one activation row) must give each
// row exactly what vec_dot gives it, so decode equals batched prefill bit for bit.
TEST(KernelDot, R4EqualsSingleBitForBit) {
  int checked = 0;
  for (DType t : kWeightTypes) {
    for (Isa isa : simd_isas()) {
      const TypeTraits* tt = type_traits_isa(t, isa);
      if (tt->vec_dot_r4 == nullptr) continue;
      for (int64_t n : dot_lengths(t)) {
        const size_t row = dtype_row_bytes(t, uint64_t(n));
        for (size_t stride : {row, row + tt->block_bytes}) {  // packed rows and a gap between them
          const std::vector<uint8_t> w = four_rows(t, n, stride, false, 3);
          DotCase c0 = make_case(t, n, true, uint32_t(n) + 17);
          float got[4];
          tt->vec_dot_r4(n, got, w.data(), stride, c0.x.data());
          for (int r = 0; r < 4; ++r) {
            float one;
            tt->vec_dot(n, &one, w.data() + r * stride, c0.x.data());
            EXPECT_EQ(std::memcmp(&one, &got[r], sizeof(float)), 0)
                << name(t) << " " << isa_name(isa) << " n=" << n << " row " << r << ": " << one << " vs " << got[r];
          }
          ++checked;
        }
      }
    }
  }
  if (isa_supported(Isa::AVX2)) {
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::MXFP4, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                    DType::IQ4_XS, DType::TQ2_0})
      EXPECT_NE(type_traits_isa(t, Isa::AVX2)->vec_dot_r4, nullptr);
  }
  if (isa_supported(Isa::AVX512)) {
    EXPECT_NE(type_traits_isa(DType::Q8_0, Isa::AVX512)->vec_dot_r4, nullptr);
    EXPECT_NE(type_traits_isa(DType::Q4_0, Isa::AVX512)->vec_dot_r4, nullptr);
    EXPECT_NE(type_traits_isa(DType::MXFP4, Isa::AVX512)->vec_dot_r4, nullptr);
    EXPECT_NE(type_traits_isa(DType::Q4_K, Isa::AVX512)->vec_dot_r4, nullptr);
    EXPECT_NE(type_traits_isa(DType::Q6_K, Isa::AVX512)->vec_dot_r4, nullptr);
    for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::TQ2_0})
      EXPECT_NE(type_traits_isa(t, Isa::AVX512)->vec_dot_r4, nullptr);
  }
  if (isa_supported(Isa::NEON)) {
    for (DType t : kWeightTypes) EXPECT_NE(type_traits_isa(t, Isa::NEON)->vec_dot_r4, nullptr) << name(t);
    for (DType t : kIqTypes) EXPECT_NE(type_traits_isa(t, Isa::NEON)->vec_dot_r4, nullptr) << name(t);
  }
  if (checked == 0) GTEST_SKIP() << "no vec_dot_r4 kernel on this CPU";
}

// The batch tiles (types.h vec_dot_tile) over prepared activation rows: every one of
// the 16 results bit-identical to vec_dot, at block counts that take the 16-block
// steps, the pair steps and the odd last block.
TEST(KernelDot, TileEqualsVecDotBitForBit) {
  int checked = 0;
  for (DType t : kWeightTypes) {
    for (Isa isa : simd_isas()) {
      const TypeTraits* tt = type_traits_isa(t, isa);
      if (tt->vec_dot_tile == nullptr) continue;
      ASSERT_EQ(tt->prep == nullptr, tt->prep_bytes == nullptr) << name(t);
      for (int64_t n : dot_lengths(t)) {
        const size_t row = dtype_row_bytes(t, uint64_t(n)), stride = row + tt->block_bytes;
        const std::vector<uint8_t> w = four_rows(t, n, stride, true, 5);
        DotCase c0 = make_case(t, n, true, uint32_t(n) + 29);
        // Prepared rows, or the rows as they are for a kernel that needs no prep.
        const size_t pb = tt->prep != nullptr ? tt->prep_bytes(n) : 0;
        std::vector<uint8_t> prepared(4 * pb + 64, 0xee);
        const void* xp[4];
        for (int k = 0; k < 4; ++k) {
          xp[k] = c0.x.data() + k * c0.x_stride;
          if (tt->prep == nullptr) continue;
          tt->prep(n, prepared.data() + k * pb, xp[k]);
          xp[k] = prepared.data() + k * pb;
        }
        float got[16];
        tt->vec_dot_tile(n, got, w.data(), stride, xp);
        for (int r = 0; r < 4; ++r)
          for (int k = 0; k < 4; ++k) {
            float one;
            tt->vec_dot(n, &one, w.data() + r * stride, c0.x.data() + k * c0.x_stride);
            EXPECT_EQ(std::memcmp(&one, &got[4 * r + k], sizeof(float)), 0)
                << name(t) << " " << isa_name(isa) << " n=" << n << " row " << r << " token " << k << ": " << one
                << " vs " << got[4 * r + k];
          }
        ++checked;
      }
    }
  }
  if (isa_supported(Isa::AVX512)) {
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::MXFP4, DType::IQ4_NL}) {
      EXPECT_NE(type_traits_isa(t, Isa::AVX512)->vec_dot_tile, nullptr) << name(t);
    }
  }
  if (isa_supported(Isa::AVX2)) {
    for (DType t : {DType::Q4_0, DType::MXFP4, DType::Q4_K, DType::Q5_K}) {
      EXPECT_NE(type_traits_isa(t, Isa::AVX2)->vec_dot_tile, nullptr) << name(t);
    }
  }
  if (checked == 0) GTEST_SKIP() << "no vec_dot_tile kernel on this CPU";
}

// The decode kernels over a prepared row (types.h vec_dot_prep, vec_dot_prep_r4):
// vec_dot's bits, one row and four.
TEST(KernelDot, PreparedDecodeEqualsVecDotBitForBit) {
  int checked = 0;
  for (DType t : kWeightTypes) {
    for (Isa isa : simd_isas()) {
      const TypeTraits* tt = type_traits_isa(t, isa);
      if (tt->vec_dot_prep == nullptr) continue;
      ASSERT_NE(tt->prep, nullptr) << name(t);
      for (int64_t n : dot_lengths(t)) {
        const size_t row = dtype_row_bytes(t, uint64_t(n)), stride = row + tt->block_bytes;
        const std::vector<uint8_t> w = four_rows(t, n, stride, true, 7);
        DotCase c0 = make_case(t, n, true, uint32_t(n) + 31);
        std::vector<uint8_t> prepared(tt->prep_bytes(n) + 64, 0xee);
        tt->prep(n, prepared.data(), c0.x.data());
        float four[4];
        if (tt->vec_dot_prep_r4 != nullptr) tt->vec_dot_prep_r4(n, four, w.data(), stride, prepared.data());
        for (int r = 0; r < 4; ++r) {
          float want, one;
          tt->vec_dot(n, &want, w.data() + r * stride, c0.x.data());
          tt->vec_dot_prep(n, &one, w.data() + r * stride, prepared.data());
          EXPECT_EQ(std::memcmp(&want, &one, sizeof(float)), 0)
              << name(t) << " " << isa_name(isa) << " n=" << n << " row " << r << ": " << want << " vs " << one;
          if (tt->vec_dot_prep_r4 != nullptr) {
            EXPECT_EQ(std::memcmp(&want, &four[r], sizeof(float)), 0)
                << name(t) << " " << isa_name(isa) << " n=" << n << " r4 row " << r << ": " << want << " vs " << four[r];
          }
        }
        ++checked;
      }
    }
  }
  if (isa_supported(Isa::AVX2)) {
    for (DType t : {DType::Q4_0, DType::MXFP4, DType::Q4_K, DType::Q5_K}) {
      EXPECT_NE(type_traits_isa(t, Isa::AVX2)->vec_dot_prep, nullptr) << name(t);
    }
  }
  if (checked == 0) GTEST_SKIP() << "no vec_dot_prep kernel on this CPU";
}

TEST(KernelDot, ReferenceEqualsDequantizedDot) {
  for (DType t : kAllTypes) {
    const TypeTraits* tt = type_traits_ref(t);
    for (int64_t n : dot_lengths(t)) {
      DotCase c = make_case(t, n, false, 11);
      auto wd = dequantize(t, c.w.data(), n), xd = dequantize(tt->vec_dot_type, c.x.data(), n);
      double want = 0;
      for (int64_t i = 0; i < n; ++i) want += double(wd[i]) * xd[i];
      const double s_round = q8_1_sum_rounding(t, c.w.data(), c.x.data(), n);
      float got;
      tt->vec_dot(n, &got, c.w.data(), c.x.data());
      EXPECT_NEAR(got, want, 2e-6 * c.abs_sum + s_round + 1e-30) << name(t) << " n=" << n;
    }
  }
}

TEST(KernelDot, SimdMatchesReference) {
  auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no SIMD instruction set on this CPU";
  for (DType t : kAllTypes) {
    const TypeTraits* ref = type_traits_ref(t);
    for (int64_t n : dot_lengths(t)) {
      for (bool random_blocks : {false, true}) {
        DotCase c = make_case(t, n, random_blocks, uint32_t(n) + random_blocks);
        float want[4];
        for (int k = 0; k < 4; ++k) ref->vec_dot(n, &want[k], c.w.data(), c.x.data() + k * c.x_stride);
        for (Isa isa : isas) {
          const TypeTraits* tt = type_traits_isa(t, isa);
          const double tol = 2e-6 * c.abs_sum + 1e-30;
          float got;
          tt->vec_dot(n, &got, c.w.data(), c.x.data());
          EXPECT_NEAR(got, want[0], tol) << name(t) << " " << isa_name(isa) << " n=" << n << " random=" << random_blocks;
          // Four rows in scrambled order: the x4 kernels take arbitrary row pointers.
          const int order[4] = {2, 0, 3, 1};
          const void* rows[4];
          for (int k = 0; k < 4; ++k) rows[k] = c.x.data() + order[k] * c.x_stride;
          float got4[4];
          tt->vec_dot_x4(n, got4, c.w.data(), rows);
          for (int k = 0; k < 4; ++k) {
            EXPECT_NEAR(got4[k], want[order[k]], 2e-6 * c.abs_sum * 4 + 1e-30)
                << name(t) << " x4 " << isa_name(isa) << " n=" << n << " k=" << k;
          }
        }
      }
    }
  }
}

// On aarch64 every computed type has NEON kernels, and the NEON table holds the build
// with the dot-product extension exactly when the CPU has it (HWCAP / sysctl). Under
// qemu, scripts/test-aarch64 states what the emulated CPU has in
// DELTAFIN_EXPECT_DOTPROD (0 or 1), which checks the detection itself.
TEST(KernelDot, NeonSetFollowsCpuFeatures) {
#if !defined(DELTAFIN_ARM)
  GTEST_SKIP() << "not an AArch64 build";
#else
  EXPECT_EQ(best_isa(), Isa::NEON);
  const bool sdot = platform::cpu_has_arm_dotprod();
  if (const char* want = std::getenv("DELTAFIN_EXPECT_DOTPROD")) {
    EXPECT_EQ(sdot, std::string(want) == "1");
  }
  std::vector<TypeTraits> with(kDTypeCount), without(kDTypeCount);
  install_neon_all(with.data(), true);
  install_neon_all(without.data(), false);
  std::vector<DType> types(std::begin(kAllTypes), std::end(kAllTypes));
  types.insert(types.end(), std::begin(kIqTypes), std::end(kIqTypes));
  for (DType t : types) {
    const TypeTraits* tt = type_traits_isa(t, Isa::NEON);
    EXPECT_EQ(tt->isa, Isa::NEON) << name(t) << " has no NEON kernel";
    if (t == DType::F32 || t == DType::F16 || t == DType::BF16) continue;  // no integer dot
    const TypeTraits& want = sdot ? with[uint32_t(t)] : without[uint32_t(t)];
    EXPECT_EQ(tt->vec_dot, want.vec_dot) << name(t);
    EXPECT_NE(with[uint32_t(t)].vec_dot, without[uint32_t(t)].vec_dot) << name(t);
    EXPECT_EQ(tt->panel_dot, want.panel_dot) << name(t);
    EXPECT_EQ(tt->panel_rows, want.panel_rows) << name(t);
  }
#endif
}

TEST(KernelDot, DispatchPicksBestIsa) {
  for (DType t : kAllTypes) {
    const TypeTraits* tt = type_traits(t);
    EXPECT_EQ(tt, type_traits_isa(t, best_isa())) << name(t);
  }
  if (isa_supported(Isa::AVX512)) {
    for (DType t : {DType::Q8_0, DType::Q4_K, DType::MXFP4, DType::Q6_K, DType::F32, DType::F16, DType::BF16,
                    DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::TQ2_0})
      EXPECT_EQ(type_traits(t)->isa, Isa::AVX512) << name(t);
  }
}

// select_isa (deltafin's $DELTAFIN_ISA) switches what type_traits() hands out; a set
// the CPU lacks, or an unknown name, changes nothing.
TEST(KernelDot, SelectIsaSwitchesDispatch) {
  ASSERT_EQ(selected_isa(), best_isa());
  ASSERT_TRUE(select_isa(Isa::Scalar));
  EXPECT_EQ(selected_isa(), Isa::Scalar);
  for (DType t : kAllTypes) EXPECT_EQ(type_traits(t), type_traits_isa(t, Isa::Scalar)) << name(t);
  for (Isa i : {Isa::AVX2, Isa::AVX512, Isa::NEON}) {
    if (!isa_supported(i)) {
      EXPECT_FALSE(select_isa(i)) << isa_name(i);
    }
  }
  EXPECT_EQ(selected_isa(), Isa::Scalar);
  Isa parsed;
  EXPECT_TRUE(isa_from_name("avx2", &parsed) && parsed == Isa::AVX2);
  EXPECT_FALSE(isa_from_name("sse9", &parsed));
  ASSERT_TRUE(select_isa(best_isa()));  // as every other test expects
  for (DType t : kAllTypes) EXPECT_EQ(type_traits(t), type_traits_isa(t, best_isa())) << name(t);
}

// ---- agreement with llama.cpp -------------------------------------------------------

// Golden outputs of ggml's CPU backend (ggml_mul_mat, 1 thread; llama.cpp checkout of
// this project, ggml 0.25.1) for W = golden_weights(type, 4, 512) and X =
// golden_acts(2, 512): Y[t * 4 + r]. ggml quantizes X to the same vec_dot_type, so
// only float summation order differs (measured within 3e-7 of max |Y| on AVX-512).
namespace {
// Valid weight bytes independent of any quantizer or of fill_random: LCG bytes as
// codes (and as int8 / 64 for the float types), scale fields set to fixed values.
std::vector<uint8_t> golden_weights(DType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> w(dtype_row_bytes(t, uint64_t(cols)) * size_t(rows));
  uint64_t s = 0x9e3779b97f4a7c15ULL ^ uint64_t(t);
  for (auto& b : w) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    b = uint8_t(s >> 56);
  }
  const int64_t n = rows * cols, nb = n / block_geometry(t).block_elems;
  auto val = [&](int64_t i) { return float(int8_t(w[size_t(i)] | 1)) / 64.0f; };  // from the random bytes
  switch (t) {
    case DType::F32: {
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = val(i);
      std::memcpy(w.data(), v.data(), w.size());
      break;
    }
    case DType::F16:
    case DType::BF16: {
      std::vector<uint16_t> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = t == DType::F16 ? f32_to_fp16(val(i)) : f32_to_bf16(val(i));
      std::memcpy(w.data(), v.data(), w.size());
      break;
    }
    default:
      break;
  }
  for (int64_t i = 0; i < nb; ++i) {
    const float d = 0.001f * float(3 + i % 5), dmin = 0.0005f * float(1 + i % 3);
    switch (t) {
      case DType::Q8_0: {
        auto* b = reinterpret_cast<BlockQ8_0*>(w.data()) + i;
        b->d = f32_to_fp16(4 * d);
        for (auto& q : b->qs) q = q == -128 ? int8_t(-127) : q;
        break;
      }
      case DType::Q4_0: reinterpret_cast<BlockQ4_0*>(w.data())[i].d = f32_to_fp16(i % 2 ? 8 * d : -8 * d); break;
      case DType::MXFP4: reinterpret_cast<BlockMXFP4*>(w.data())[i].e = uint8_t(118 + i % 6); break;
      case DType::Q2_K:
        reinterpret_cast<BlockQ2_K*>(w.data())[i].d = f32_to_fp16(d);
        reinterpret_cast<BlockQ2_K*>(w.data())[i].dmin = f32_to_fp16(dmin);
        break;
      case DType::Q3_K: reinterpret_cast<BlockQ3_K*>(w.data())[i].d = f32_to_fp16(d); break;
      case DType::Q4_K:
        reinterpret_cast<BlockQ4_K*>(w.data())[i].d = f32_to_fp16(d);
        reinterpret_cast<BlockQ4_K*>(w.data())[i].dmin = f32_to_fp16(dmin);
        break;
      case DType::Q5_K:
        reinterpret_cast<BlockQ5_K*>(w.data())[i].d = f32_to_fp16(d);
        reinterpret_cast<BlockQ5_K*>(w.data())[i].dmin = f32_to_fp16(dmin);
        break;
      case DType::Q6_K: reinterpret_cast<BlockQ6_K*>(w.data())[i].d = f32_to_fp16(d / 8); break;
      default: break;
    }
  }
  return w;
}

std::vector<float> golden_acts(int64_t n_tok, int64_t cols) {
  std::vector<float> x(size_t(n_tok * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * float(1 + i % 7);
  return x;
}
}  // namespace

TEST(KernelGolden, MatchesGgmlCpuBackend) {
  struct Golden {
    DType type;
    float y[8];
  };
  const Golden golden[] = {
{DType::F32, {2.48797035f, -126.814125f, -66.7214966f, -14.7014236f, 97.3365097f, -98.6156311f, 87.2114105f, 61.403862f}},
      {DType::F16, {135.491425f, 84.6083069f, -24.1674995f, 15.6278877f, 114.080376f, 69.890152f, 43.5551529f, 101.825417f}},
      {DType::BF16, {13.0598068f, 87.3360291f, 77.8876877f, -79.8525391f, -45.2522583f, 39.9511719f, 6.47732162f, -45.7712479f}},
      {DType::Q8_0, {-61.084713f, 68.129364f, -1.6423111f, -106.263985f, -50.5125771f, -1.26283264f, 34.3632431f, -114.488342f}},
      {DType::Q4_0, {2.09174109f, -8.43257141f, 0.847568035f, 0.658108711f, 5.48265362f, 4.669137f, 14.9073105f, -10.1924229f}},
      {DType::MXFP4, {2.29905391f, 4.56204462f, -2.21209383f, -6.01758099f, 3.85359836f, 10.3263674f, -11.3536329f, -3.81521344f}},
      {DType::Q2_K, {-0.088752985f, -1.01597619f, 3.03090215f, 1.84636879f, -0.239242792f, -1.94112873f, 0.0440502167f, -0.363700747f}},
      {DType::Q3_K, {-8.30107403f, 4.31524658f, 4.8927145f, -29.3104153f, -7.84333038f, 16.706686f, 15.2235928f, -14.435071f}},
      {DType::Q4_K, {-17.9671078f, -12.2926064f, 35.2154198f, -38.6820679f, 46.7731476f, -135.680069f, 39.6808319f, 71.3562164f}},
      {DType::Q5_K, {36.853241f, -13.7855701f, -217.368912f, 28.2976398f, -61.5936966f, 173.672256f, -96.0795898f, 283.444763f}},
      {DType::Q6_K, {-2.21046829f, 47.6456871f, 68.0699768f, -48.3478851f, 8.40070724f, 103.108574f, 69.6642532f, 5.52735901f}},
  };
  const int64_t rows = 4, cols = 512, n_tok = 2;
  const auto x = golden_acts(n_tok, cols);
  for (const Golden& g : golden) {
    const auto w = golden_weights(g.type, rows, cols);
    float y[8];
    matmul(nullptr, g.type, w.data(), rows, cols, x.data(), n_tok, cols, y, rows);
    float ymax = 0;
    for (float v : g.y) ymax = std::max(ymax, std::fabs(v));
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], g.y[i], 2e-6f * ymax) << name(g.type) << " output " << i;
    for (Isa isa : {Isa::Scalar, Isa::AVX2, Isa::AVX512, Isa::NEON}) {  // each kernel set on its own
      const TypeTraits* tt = type_traits_isa(g.type, isa);
      if (tt == nullptr) continue;
      const TypeTraits* at = type_traits_ref(tt->vec_dot_type);
      std::vector<uint8_t> xq(dtype_row_bytes(at->type, cols));
      at->from_float(x.data(), xq.data(), cols);
      float y0;
      tt->vec_dot(cols, &y0, w.data(), xq.data());
      EXPECT_NEAR(y0, g.y[0], 2e-6f * ymax) << name(g.type) << " " << isa_name(isa);
    }
  }
}

// ---- matmul --------------------------------------------------------------------------

TEST(KernelMatmul, ThreadedEqualsSerialAndReference) {
  ThreadPool pool(3);
  const int64_t rows = 67, cols = 512;
  for (DType t : kWeightTypes) {
    std::vector<uint8_t> w(dtype_row_bytes(t, cols) * rows);
    ASSERT_TRUE(fill_random(t, 3, rows * cols, 0.05f, w.data()));
    auto wd = dequantize(t, w.data(), rows * cols);
    for (int64_t n_tok : {1, 2, 3, 4, 7, 9}) {
      const int64_t x_stride = cols + 5, y_stride = rows + 3;
      auto X = gaussian(size_t(n_tok * x_stride), uint32_t(n_tok));
      std::vector<float> y1(size_t(n_tok * y_stride), -1.0f), y2 = y1;
      matmul(nullptr, t, w.data(), rows, cols, X.data(), n_tok, x_stride, y1.data(), y_stride);
      matmul(&pool, t, w.data(), rows, cols, X.data(), n_tok, x_stride, y2.data(), y_stride);
      EXPECT_EQ(y1, y2) << name(t) << " n_tok=" << n_tok;

      QuantizedActs acts;
      quantize_acts(nullptr, t, X.data(), n_tok, cols, x_stride, &acts);
      ASSERT_EQ(acts.type, acts_type_for(t));
      for (int64_t tk = 0; tk < n_tok; ++tk) {
        auto xd = dequantize(acts.type, acts.row(tk), cols);
        for (int64_t r = 0; r < rows; ++r) {
          double exact = 0, abs_sum = 0, exact_f = 0, norm = 0;
          for (int64_t i = 0; i < cols; ++i) {
            double wv = wd[size_t(r * cols + i)];
            exact += wv * xd[size_t(i)], abs_sum += std::fabs(wv * xd[size_t(i)]);
            exact_f += wv * X[size_t(tk * x_stride + i)], norm += wv * wv;
          }
          float got = y1[size_t(tk * y_stride + r)];
          // Against the dequantized activations: summation order only.
          const double s_round = q8_1_sum_rounding(t, w.data() + r * dtype_row_bytes(t, cols), acts.row(tk), cols);
          ASSERT_NEAR(got, exact, 1e-5 * abs_sum + s_round + 1e-30) << name(t) << " r=" << r << " t=" << tk;
          // Against float activations: activation quantization error (8-bit: <1% of |w||x|).
          ASSERT_NEAR(got, exact_f, 0.01 * std::sqrt(norm * cols)) << name(t) << " r=" << r << " t=" << tk;
        }
      }
      for (int64_t tk = 0; tk < n_tok; ++tk)  // padding between rows untouched
        for (int64_t r = rows; r < y_stride; ++r) ASSERT_EQ(y1[size_t(tk * y_stride + r)], -1.0f);
    }
  }
}

TEST(KernelMatmul, TokenSubsetsAndRowRanges) {
  // An expert's routed tokens, picked from one quantization of the whole batch.
  ThreadPool pool(2);
  const int64_t rows = 37, cols = 512, n_tok = 11;
  auto X = gaussian(size_t(n_tok * cols), 4);
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::MXFP4, DType::F16}) {
    std::vector<uint8_t> w(dtype_row_bytes(t, cols) * rows);
    fill_random(t, 8, rows * cols, 0.1f, w.data());
    QuantizedActs acts;
    quantize_acts(&pool, t, X.data(), n_tok, cols, cols, &acts);
    std::vector<float> all(size_t(n_tok * rows));
    matmul_q(nullptr, t, w.data(), rows, cols, acts, all.data(), rows);
    const std::vector<int32_t> tokens = {9, 0, 4, 4, 10, 7};  // any order, repeats allowed
    const int64_t n = int64_t(tokens.size());
    std::vector<float> sub(size_t(n * rows)), sub_mt(sub.size()), parts(sub.size());
    matmul_q_tokens(nullptr, t, w.data(), rows, cols, acts, tokens.data(), n, sub.data(), rows);
    matmul_q_tokens(&pool, t, w.data(), rows, cols, acts, tokens.data(), n, sub_mt.data(), rows);
    matmul_q_rows(t, w.data(), cols, 0, 20, acts, tokens.data(), n, parts.data(), rows);
    matmul_q_rows(t, w.data(), cols, 20, rows, acts, tokens.data(), n, parts.data(), rows);
    EXPECT_EQ(sub, sub_mt) << name(t);
    EXPECT_EQ(sub, parts) << name(t);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = 0; r < rows; ++r) {
        // Same kernel result whichever batch grouping the row landed in (x4 or x1).
        ASSERT_NEAR(sub[size_t(i * rows + r)], all[size_t(tokens[size_t(i)] * rows + r)],
                    1e-5 * (1 + std::fabs(all[size_t(tokens[size_t(i)] * rows + r)])))
            << name(t);
      }
    }
  }
}

// Batch invariance of the whole driver: however many tokens a matmul takes (groups of
// eight, four, padded remainders, single rows), each token's outputs equal those of the
// same token computed alone (the decode path), bit for bit.
namespace {
// Random weights of `t`, X's first n_tok rows quantized for them, and every token's
// rows computed alone (y[token * rows + row]): what a batch must reproduce bit for bit.
struct Alone {
  std::vector<uint8_t> w;
  QuantizedActs acts;
  std::vector<float> y;
};
Alone each_token_alone(DType t, int64_t rows, int64_t cols, const std::vector<float>& X, int64_t n_tok, uint32_t seed) {
  Alone a;
  a.w.resize(dtype_row_bytes(t, uint64_t(cols)) * size_t(rows));
  EXPECT_TRUE(fill_random(t, seed, rows * cols, 0.05f, a.w.data()));
  quantize_acts(nullptr, t, X.data(), n_tok, cols, cols, &a.acts);
  a.y.resize(size_t(n_tok * rows));
  for (int32_t tk = 0; tk < n_tok; ++tk)
    matmul_q_tokens(nullptr, t, a.w.data(), rows, cols, a.acts, &tk, 1, a.y.data() + tk * rows, rows);
  return a;
}
}  // namespace

TEST(KernelMatmul, BatchEqualsEachTokenAloneBitForBit) {
  const int64_t rows = 13, cols = 512, max_tok = 19;
  auto X = gaussian(size_t(max_tok * cols), 21);
  std::vector<DType> types(std::begin(kWeightTypes), std::end(kWeightTypes));
  // The codebook i-quants, whose batches run in groups of eight (types.h vec_dot_x8).
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,
                  DType::IQ1_M, DType::TQ1_0})
    types.push_back(t);
  const RestoreIsa restore;
  for (Isa isa : simd_isas()) {
    ASSERT_TRUE(select_isa(isa));
    for (DType t : types) {
      const Alone a = each_token_alone(t, rows, cols, X, max_tok, 5);
      for (int64_t n = 2; n <= max_tok; ++n) {
        std::vector<int32_t> tokens(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = int32_t((i * 7 + n) % max_tok);
        std::vector<float> y(size_t(n * rows));
        matmul_q_tokens(nullptr, t, a.w.data(), rows, cols, a.acts, tokens.data(), n, y.data(), rows);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(i * rows + r)]),
                      std::bit_cast<uint32_t>(a.y[size_t(tokens[size_t(i)] * rows + r)]))
                << name(t) << " " << isa_name(isa) << " n=" << n << " token " << i << " row " << r;
      }
    }
  }
}

// The same through matmul for the 32-value types at 19 blocks a row (16-block steps,
// a pair step and an odd last block) and BF16 (608 = 9 x 64 + a 32-value tail), where
// batches of four or more that are not dense matmuls take the tiles.
TEST(KernelMatmul, TiledBatchEqualsEachTokenAloneBitForBit) {
  const int64_t rows = 11, cols = 608, max_tok = 11;
  auto X = gaussian(size_t(max_tok * cols), 23);
  const RestoreIsa restore;
  std::vector<std::pair<Isa, DType>> cases;
  for (Isa isa : simd_isas())
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::MXFP4, DType::IQ4_NL, DType::BF16}) cases.emplace_back(isa, t);
  for (const auto& [isa, t] : cases) {
    ASSERT_TRUE(select_isa(isa));
    const Alone a = each_token_alone(t, rows, cols, X, max_tok, 7);
    for (int64_t n = 2; n <= max_tok; ++n) {
      std::vector<float> y(size_t(n * rows));
      QuantizedActs first = a.acts;
      first.n_tok = n;
      matmul_q(nullptr, t, a.w.data(), rows, cols, first, y.data(), rows);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(std::bit_cast<uint32_t>(y[size_t(i * rows + r)]), std::bit_cast<uint32_t>(a.y[size_t(i * rows + r)]))
              << name(t) << " " << isa_name(isa) << " n=" << n << " token " << i << " row " << r;
    }
  }
}

// A batch longer than the tile path's chunk of prepared tokens (kernels/matmul.cpp),
// threaded: every token's rows as alone.
TEST(KernelMatmul, LongTiledBatchEqualsEachTokenAlone) {
  const int64_t rows = 9, cols = 128, n = 301;
  auto X = gaussian(size_t(n * cols), 29);
  ThreadPool pool(2);
  for (DType t : {DType::Q4_0, DType::BF16}) {
    const Alone a = each_token_alone(t, rows, cols, X, n, 9);
    std::vector<float> y(size_t(n * rows));
    matmul_q(&pool, t, a.w.data(), rows, cols, a.acts, y.data(), rows);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(a.y[i]))
          << name(t) << " token " << int64_t(i) / rows << " row " << int64_t(i) % rows;
  }
}

TEST(KernelMatmul, QuantizedActsReusedAcrossMatrices) {
  // One Q8_K quantization serves matrices of different K-quant types.
  const int64_t rows = 8, cols = 256;
  auto x = gaussian(cols, 9);
  QuantizedActs acts;
  quantize_acts(nullptr, DType::Q4_K, x.data(), 1, cols, cols, &acts);
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q2_K}) {
    std::vector<uint8_t> w(dtype_row_bytes(t, cols) * rows);
    fill_random(t, 1, rows * cols, 1.0f, w.data());
    std::vector<float> a(rows), b(rows);
    matmul_q(nullptr, t, w.data(), rows, cols, acts, a.data(), rows);
    matvec(nullptr, t, w.data(), rows, cols, x.data(), b.data());
    EXPECT_EQ(a, b) << name(t);
  }
}

// ---- random fill ---------------------------------------------------------------------

TEST(KernelRandomFill, FiniteWithRequestedStd) {
  ThreadPool pool(2);
  const int64_t n = 1 << 17;
  for (DType t : kAllTypes) {
    for (float sd : {0.02f, 1.0f}) {
      std::vector<uint8_t> q(dtype_row_bytes(t, n)), q2(q.size());
      ASSERT_TRUE(fill_random(t, 42, n, sd, q.data()));
      ASSERT_TRUE(fill_random(t, 42, n, sd, q2.data(), &pool));
      EXPECT_EQ(q, q2) << name(t) << ": output depends on the pool";
      auto y = dequantize(t, q.data(), n);
      double s = 0, s2 = 0;
      for (float v : y) {
        ASSERT_TRUE(std::isfinite(v)) << name(t);
        s += v, s2 += double(v) * v;
      }
      double mean = s / n, std = std::sqrt(s2 / n - mean * mean);
      EXPECT_NEAR(std / sd, 1.0, 0.12) << name(t) << " sd=" << sd;
      EXPECT_LT(std::fabs(mean), 0.1 * sd) << name(t) << " sd=" << sd;
    }
    std::vector<uint8_t> a(dtype_row_bytes(t, 1024)), b(a.size());
    fill_random(t, 1, 1024, 1.0f, a.data());
    fill_random(t, 2, 1024, 1.0f, b.data());
    EXPECT_NE(a, b) << name(t) << ": seed ignored";
  }
  std::vector<uint8_t> dummy(64);
  EXPECT_FALSE(fill_random(DType::Q4_K, 1, 100, 1.0f, dummy.data()));
  EXPECT_FALSE(fill_random(DType::F64, 1, 8, 1.0f, dummy.data()));
}
