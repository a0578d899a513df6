// Block layouts of the other 32-value types, byte-for-byte as GGUF stores them: the
// offset types Q4_1 and Q5_1 with their activation type Q8_1, the 5-bit Q5_0, the
// non-linear IQ4_NL, IQ4_XS (IQ4_NL's levels in 256-value super-blocks), and the
// ternary TQ2_0 and TQ1_0. Internal to src/kernels, like blocks.h.
#pragma once
#include <cstdint>

namespace deltafin::kern {

// Activation type of Q4_1 / Q5_1: x[e] = d * qs[e]; s = d * sum(qs), rounded to fp16,
// carries the block sum that the weights' offset m multiplies.
struct BlockQ8_1 {
  uint16_t d, s;  // fp16
  int8_t qs[32];
};
// x[e] = d * (qs[e] & 15) + m, x[e + 16] = d * (qs[e] >> 4) + m, e < 16
struct BlockQ4_1 {
  uint16_t d, m;  // fp16
  uint8_t qs[16];
};
// As Q4_0 with a fifth bit: element e (e < 32) has bit e of qh (little-endian
// uint32) as bit 4 of its code; x = d * (code - 16).
struct BlockQ5_0 {
  uint16_t d;  // fp16
  uint8_t qh[4];
  uint8_t qs[16];
};
// Codes as Q5_0; x = d * code + m.
struct BlockQ5_1 {
  uint16_t d, m;  // fp16
  uint8_t qh[4];
  uint8_t qs[16];
};
// Nibbles as in Q4_0, each an index into kIq4nlValues; x = d * kIq4nlValues[code].
struct BlockIQ4_NL {
  uint16_t d;  // fp16
  uint8_t qs[16];
};

// 8 sub-blocks of 32: x = d * (ls[j] - 32) * kIq4nlValues[code], ls[j] 6 bits: low
// nibble (j even: low, j odd: high) of scales_l[j / 2], top two bits at bit 2j of
// scales_h. Sub-block j's codes are the nibbles of qs[16j .. 16j + 15] as in IQ4_NL.
struct BlockIQ4_XS {
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

// Ternary, 2 bits a value: x = d * (q - 1), q in 0..2 (3 decodes to 2d). As Q2_K,
// element 128h + 32l + k (h < 2, l < 4, k < 32) is bits 2l..2l+1 of qs[32h + k].
struct BlockTQ2_0 {
  uint8_t qs[64];
  uint16_t d;  // fp16
};

// Ternary, base 3: x = d * (t - 1), t in 0..2, five digits a byte (four in qh). A
// byte b holds the digits of v = sum t_k 3^(4-k) as b = ceil(v * 256 / 243), so digit
// k is the integer part of 3 * frac((b * 3^k mod 256) / 256) = (uint8(b * 3^k) * 3)
// >> 8; every byte decodes to some digits. Element 32k + m (k < 5, m < 32) is digit k
// of qs[m]; 160 + 16k + m (k < 5, m < 16) digit k of qs[32 + m]; 240 + 4k + j (k < 4,
// j < 4) digit k of qh[j].
struct BlockTQ1_0 {
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;  // fp16
};

static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockTQ1_0) == 54);
static_assert(sizeof(BlockTQ2_0) == 66);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18);

// The sixteen levels of IQ4_NL (and IQ4_XS), part of the format: a non-uniform grid,
// denser near zero, from -127 to 113.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Internal linkage, as blocks.h's conversions: SIMD translation units include it too.
namespace {
// The 6-bit scale ls[j] (j < 8) of an IQ4_XS super-block, minus 32: -32..31.
inline int iq4xs_scale(const BlockIQ4_XS& b, int j) {
  return int(((b.scales_l[j / 2] >> 4 * (j % 2)) & 15) | (((b.scales_h >> 2 * j) & 3) << 4)) - 32;
}
}  // namespace

}  // namespace deltafin::kern
