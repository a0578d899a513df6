// quant/hf_codecs: the published checkpoint encodings against values computed here
// from the formats' definitions (never from the code under test):
//   E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal
//     (m/8 * 2^-6); S.1111.111 is NaN; no infinities.
//   E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
//   E8M0: 2^(e - 127).
//   INT4 pack-quantized: int32 word j of a row holds elements 8j..8j+7, element 8j+k
//     in bits 4k..4k+3, stored as q + 8.
// BF16 rounding (to nearest even) is done here with frexp/nearbyint, not bit tricks.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/types.h"
#include "quant/hf_codecs.h"

using namespace deltafin;

namespace {

double e4m3_value(int code) {  // NaN for the two NaN codes
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10);
  return s ? -mag : mag;
}

double e2m1_value(int code) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -mag[code & 7] : mag[code & 7];
}

// The BF16 nearest to a finite float, ties to even: bits of the result.
uint16_t bf16_round(float f) {
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  int e;
  std::frexp(double(f), &e);  // f = m * 2^e, |m| in [0.5, 1)
  // BF16 keeps 8 significant bits; below 2^-126 its quantum stays 2^-133.
  const int q = std::max(e - 8, -133);
  double r = std::nearbyint(std::ldexp(double(f), -q));  // current mode: to nearest even
  float back = float(std::ldexp(r, q));                  // exact, or overflows to inf
  return uint16_t(std::bit_cast<uint32_t>(back) >> 16);
}

bool bf16_is_nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

float bf16_value(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

}  // namespace

TEST(HfCodecs, Fp8EveryCodeTimesScales) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  // Two rows of 128 codes: one 128 x 128 block, one scale.
  std::vector<uint8_t> w(256);
  for (int i = 0; i < 256; ++i) w[size_t(i)] = uint8_t(i);
  // 1, an arbitrary scale, one that pushes small products below 2^-126 (BF16
  // subnormals) and one that pushes large ones near the top of the range.
  for (float scale : {1.0f, 0.0123456f, 0x1p-130f, 3.1e35f, -2.5f}) {
    std::vector<uint16_t> out(256);
    fp8_block_to_bf16(w.data(), &scale, 2, 128, out.data());
    for (int i = 0; i < 256; ++i) {
      const double v = e4m3_value(i);
      SCOPED_TRACE("code " + std::to_string(i) + " scale " + std::to_string(scale));
      if (std::isnan(v)) {
        EXPECT_TRUE(bf16_is_nan(out[size_t(i)]));  // a NaN's sign carries no meaning
        continue;
      }
      const float product = float(v * double(scale));  // exact in double, then to F32
      EXPECT_EQ(out[size_t(i)], bf16_round(product));
    }
  }
}

TEST(HfCodecs, Fp8PartialEdgeBlocks) {
  // 130 x 200: block rows of 128 and 2, block columns of 128 and 72.
  const int64_t rows = 130, cols = 200;
  std::mt19937 rng(7);
  std::vector<uint8_t> w(size_t(rows * cols));
  for (auto& b : w) {
    b = uint8_t(rng());
    if ((b & 0x7f) == 0x7f) b &= 0xfe;  // no NaN here
  }
  const float scale[4] = {0.5f, 1.75e-3f, 3.0f, 6.1e-5f};
  std::vector<uint16_t> out(w.size());
  fp8_block_to_bf16(w.data(), scale, rows, cols, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = scale[(r >= 128) * 2 + (c >= 128)];
      const float product = float(e4m3_value(w[size_t(r * cols + c)]) * double(s));
      ASSERT_EQ(out[size_t(r * cols + c)], bf16_round(product)) << r << "," << c;
    }
}

TEST(HfCodecs, Fp8EncoderBlocks) {
  const int64_t rows = 131, cols = 260;  // 2 x 3 blocks, the last ones partial
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  for (auto& v : x) v = nd(rng);
  x[size_t(129 * cols + 259)] = 40.0f;  // the largest value sits in the corner block
  std::vector<uint8_t> w(x.size());
  std::vector<float> s(2 * 3);
  f32_to_fp8_block(x.data(), rows, cols, w.data(), s.data());
  EXPECT_FLOAT_EQ(s[5], 40.0f / 448.0f);
  EXPECT_EQ(w[size_t(129 * cols + 259)], 0x7e);  // 448
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double sc = s[size_t((r / 128) * 3 + c / 128)];
      const double got = e4m3_value(w[size_t(r * cols + c)]) * sc, want = x[size_t(r * cols + c)];
      // Three mantissa bits: half an ulp is 1/16 relative; subnormals: 2^-10 * scale.
      ASSERT_LE(std::fabs(got - want), std::fabs(want) / 16 + sc * 0x1p-10 + 1e-12) << r << "," << c;
    }
}

TEST(HfCodecs, Mxfp4RepackValuesAndRoundTrip) {
  const int64_t rows = 9, cols = 256;  // 8 blocks a row, 72 in all
  std::mt19937 rng(11);
  std::vector<uint8_t> packed(size_t(rows * cols / 2)), scales(size_t(rows * cols / 32));
  for (auto& b : packed) b = uint8_t(rng());
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = uint8_t(i * 3 % 255);  // 0..254
  std::vector<uint8_t> blocks(scales.size() * 17);
  mxfp4_ct_to_gguf(packed.data(), scales.data(), rows, cols, blocks.data());

  const TypeTraits* t = type_traits(DType::MXFP4);
  ASSERT_NE(t, nullptr);
  std::vector<float> deq(size_t(rows * cols));
  t->to_float(blocks.data(), deq.data(), rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t byte = packed[size_t(r * cols / 2 + c / 2)];
      const int code = (c % 2) ? byte >> 4 : byte & 15;  // element 2i low, 2i+1 high
      const int e = scales[size_t(r * cols / 32 + c / 32)];
      const float want = float(std::ldexp(e2m1_value(code), e - 127));
      ASSERT_EQ(deq[size_t(r * cols + c)], want)  // -0 == +0: ggml's table has one zero
          << r << "," << c << " code " << code << " e " << e;
    }

  std::vector<uint8_t> packed2(packed.size()), scales2(scales.size());
  mxfp4_gguf_to_ct(blocks.data(), rows, cols, packed2.data(), scales2.data());
  EXPECT_EQ(packed2, packed);
  EXPECT_EQ(scales2, scales);
  // And the other way: any GGUF block bytes survive ct and back.
  std::vector<uint8_t> any(blocks.size()), back(blocks.size());
  for (auto& b : any) b = uint8_t(rng());
  mxfp4_gguf_to_ct(any.data(), rows, cols, packed2.data(), scales2.data());
  mxfp4_ct_to_gguf(packed2.data(), scales2.data(), rows, cols, back.data());
  EXPECT_EQ(back, any);
}

TEST(HfCodecs, Int4PackingOrderAndValues) {
  // One row of 32: word j = 0x76543210 + ..., so element 8j + k has code (k + j) & 15.
  const int64_t rows = 3, cols = 64;
  std::vector<int32_t> packed(size_t(rows * cols / 8));
  for (size_t j = 0; j < packed.size(); ++j) {
    uint32_t word = 0;
    for (int k = 0; k < 8; ++k) word |= uint32_t((k + j) & 15) << (4 * k);
    packed[j] = int32_t(word);
  }
  // Scales with low mantissa bits set, so (code - 8) * scale needs BF16 rounding.
  std::vector<uint16_t> scales = {0x3c81, 0x3f7f, 0xbb05, 0x0081, 0x4b3f, 0x3f80};
  std::vector<uint16_t> out(size_t(rows * cols));
  int4_pack_to_bf16(packed.data(), scales.data(), rows, cols, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t j = r * cols / 8 + c / 8;
      const int code = int((c % 8 + j) & 15);
      const float product = float(double(code - 8) * bf16_value(scales[size_t(r * cols / 32 + c / 32)]));
      ASSERT_EQ(out[size_t(r * cols + c)], bf16_round(product)) << r << "," << c;
    }
}

TEST(HfCodecs, Int4EncoderRoundTrip) {
  const int64_t rows = 5, cols = 96;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> x(size_t(rows * cols));
  for (auto& v : x) v = nd(rng);
  std::vector<int32_t> packed(size_t(rows * cols / 8));
  std::vector<uint16_t> scales(size_t(rows * cols / 32)), out(x.size());
  f32_to_int4_pack(x.data(), rows, cols, packed.data(), scales.data());
  int4_pack_to_bf16(packed.data(), scales.data(), rows, cols, out.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float s = bf16_value(scales[size_t(i / 32)]);
    EXPECT_GT(s, 0.0f);
    // Rounding to the grid loses s/2; clipping at +7 (x/s up to 7.5, times 1 + 2^-8 for
    // the scale's own rounding) a little more; the BF16 output adds 2^-8 relative.
    EXPECT_LE(std::fabs(bf16_value(out[size_t(i)]) - x[size_t(i)]), 0.55f * s + std::fabs(x[size_t(i)]) / 256)
        << i;
  }
}
