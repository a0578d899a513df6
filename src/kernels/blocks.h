// Block layouts of the quantized types, byte-for-byte as GGUF stores them, and the
// scalar number conversions every kernel shares (fp16, bf16, e8m0). Internal to
// src/kernels: other layers see types only through the traits table (types.h).
//
// Notation used across the kernels: a "block" holds block_elems values; element e
// of a block is written x[e]. K-quants group 256 values in a super-block with
// sub-blocks of 16 or 32 values, each with its own (quantized) scale.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>

namespace deltafin::kern {

constexpr int kQ32 = 32;   // values per block of Q8_0, Q4_0, MXFP4
constexpr int kQK = 256;   // values per K-quant super-block

// x[e] = d * qs[e]
struct BlockQ8_0 {
  uint16_t d;  // fp16
  int8_t qs[32];
};
// x[e] = d * ((qs[e] & 15) - 8), x[e + 16] = d * ((qs[e] >> 4) - 8), e < 16
struct BlockQ4_0 {
  uint16_t d;  // fp16
  uint8_t qs[16];
};
// Nibbles as in Q4_0, each an E2M1 code; x = kMxfp4Values[code] * 2^(e - 128)
// (the table holds twice the E2M1 value, hence -128 rather than -127).
struct BlockMXFP4 {
  uint8_t e;  // E8M0 shared exponent
  uint8_t qs[16];
};
// Activation type of the K-quants. bsums[j] = sum of qs[16j .. 16j+15].
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
// 16 sub-blocks of 16: x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q in 0..3.
// Element 128h + 32s + l (h < 2, s < 4, l < 32) is bits 2s..2s+1 of qs[32h + l];
// its sub-block is (128h + 32s + l) / 16.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;  // fp16
};
// 16 sub-blocks of 16: x = d * (sc[j] - 32) * (q - 4), q in 0..7. Low two bits of q
// as in Q2_K; the third is bit 4h + s of hmask[l]. The 6-bit sc[j] are packed in
// scales[12]: low nibble in byte j (j < 8) or high nibble of byte j - 8, top two
// bits in bits 2*(j / 4) of byte 8 + j % 4.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;  // fp16
};
// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q in 0..15, 6-bit sc/m packed
// in scales[12] (see unpack_scales_k4). Element 64c + l is the low nibble of
// qs[32c + l], element 64c + 32 + l the high nibble.
struct BlockQ4_K {
  uint16_t d, dmin;  // fp16
  uint8_t scales[12];
  uint8_t qs[128];
};
// As Q4_K with a fifth bit: element 64c + l has bit 2c of qh[l], element 64c + 32 + l
// bit 2c + 1.
struct BlockQ5_K {
  uint16_t d, dmin;  // fp16
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q in 0..63. In half h (128
// values), for l < 32: q(l) low nibble of ql[64h + l], q(l + 32) low nibble of
// ql[64h + 32 + l], q(l + 64) and q(l + 96) the high nibbles of those bytes; the top
// two bits of q(l + 32k) are bits 2k..2k+1 of qh[32h + l].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // fp16
};

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// E2M1 code -> twice its value (integers, so dot products stay in int8).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ---- scalar conversions ------------------------------------------------------------

// Internal linkage on purpose: the SIMD translation units include these too, and an
// out-of-line copy compiled with -mavx512f must never be the one the linker picks
// for the scalar code.
namespace {

inline float fp16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    float f = float(man) * 0x1p-24f;
    return sign ? -f : f;
  }
  uint32_t bits = exp == 0x1f ? (sign | 0x7f800000u | (man << 13))
                              : (sign | ((exp + 112u) << 23) | (man << 13));
  return std::bit_cast<float>(bits);
}

// Round to nearest even, overflow to infinity, NaN stays NaN (as F16C does).
inline uint16_t f32_to_fp16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (ax < 0x38800000u) {                        // below 2^-14: subnormal result
    // Adding 0.5 leaves the value's 2^-24 multiples in the low mantissa bits, rounded.
    float a = std::bit_cast<float>(ax) + 0.5f;
    return uint16_t(sign | (std::bit_cast<uint32_t>(a) - 0x3f000000u));
  }
  ax += 0xfffu + ((ax >> 13) & 1u);
  return uint16_t(sign | ((ax - (112u << 23)) >> 13));
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// Round to nearest even; NaN is kept a (quiet) NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// 2^(e - 128): the MXFP4 block scale with the table's factor 2 folded in. Exact for
// every e (e < 2 gives float subnormals).
inline float e8m0_half_to_f32(uint8_t e) {
  uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e) - 1u) << 23;
  return std::bit_cast<float>(bits);
}

// The j-th (j < 8) 6-bit scale and min of a Q4_K / Q5_K super-block. Bytes 0..3 hold
// sc[0..3] in bits 0..5 and the top bits of sc[4..7] in bits 6..7; bytes 4..7 the
// same for the mins; bytes 8..11 the low nibbles of sc[4..7] (bits 0..3) and of
// m[4..7] (bits 4..7).
inline void scale_min_k4(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = uint8_t((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
    *m = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Unpacks all eight: sc[0..7], m[0..7].
inline void unpack_scales_k4(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 8; ++j) scale_min_k4(j, s, &sc[j], &m[j]);
}

// Inverse of unpack_scales_k4 (values must be < 64).
inline void pack_scales_k4(const uint8_t* sc, const uint8_t* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = uint8_t(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = uint8_t((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// The sixteen 6-bit Q3_K scales, returned as (stored - 32) in -32..31.
inline void unpack_scales_q3k(const uint8_t* s, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    int lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
    int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    out[j] = int8_t((lo | (hi << 4)) - 32);
  }
}

// Inverse of unpack_scales_q3k; v[j] in -32..31.
inline void pack_scales_q3k(const int8_t* v, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 16; ++j) {
    int u = v[j] + 32;
    if (j < 8) s[j] |= uint8_t(u & 15);
    else s[j - 8] |= uint8_t((u & 15) << 4);
    s[8 + (j & 3)] |= uint8_t((u >> 4) << (2 * (j >> 2)));
  }
}

}  // namespace
}  // namespace deltafin::kern
