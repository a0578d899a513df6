// Internal: the panel blocks of the 32-value types with panel kernels (Q8_0, and the
// 4-bit Q4_0, IQ4_NL, MXFP4 with their level tables), shared by panels.cpp and the SIMD
// panel kernels.
#pragma once
#include <cstdint>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"

namespace deltafin::kern {

// Block i of eight rows: their scales (fp16, or MXFP4's E8M0 exponents), then their
// codes so that byte 4r + j of the 32-byte piece k (k < 4, j < 4) holds row r's code
// 8k + j in its low nibble and code 8k + 4 + j in its high one. A vector of piece k's
// low nibbles thus holds values 8k..8k+3 of every row, its high nibbles 8k+4..8k+7.
template <class Scale>
struct PanelQ4x8T {
  Scale d[8];
  uint8_t qs[128];
};
using PanelQ4x8 = PanelQ4x8T<uint16_t>;   // Q4_0, IQ4_NL
using PanelMXx8 = PanelQ4x8T<uint8_t>;    // MXFP4
static_assert(sizeof(PanelQ4x8) == 8 * sizeof(BlockIQ4_NL) && sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0));

// Q8_0's block i of eight rows: the scales, then byte 4r + j of the 32-byte piece k
// (k < 8, j < 4) holds row r's value 4k + j.
struct PanelQ8x8 {
  uint16_t d[8];
  int8_t qs[256];
};
static_assert(sizeof(PanelQ8x8) == 8 * sizeof(BlockQ8_0));
static_assert(sizeof(PanelMXx8) == 8 * sizeof(BlockMXFP4));

// The levels of Q4_0's codes (code - 8), as IQ4_NL's kIq4nlValues and MXFP4's
// kMxfp4Values.
inline constexpr int8_t kQ4_0Levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

// A panel scale as a float: fp16, or 2^(e - 128) (MXFP4's factor 2 folded in).
inline float panel_scale(uint16_t d) { return fp16_to_f32(d); }
inline float panel_scale(uint8_t e) { return e8m0_half_to_f32(e); }

}  // namespace deltafin::kern
