// Block layouts of the other 32-value types, byte-for-byte as GGUF stores them: the
// offset types Q4_1 and Q5_1 with their activation type Q8_1, the 5-bit Q5_0, and the
// non-linear IQ4_NL. Internal to src/kernels, like blocks.h.
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

static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18);

// The sixteen levels of IQ4_NL (and IQ4_XS), part of the format: a non-uniform grid,
// denser near zero, from -127 to 113.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace deltafin::kern
