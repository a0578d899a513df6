// Internal: the panel blocks of the types with panel kernels (Q8_0; the 4-bit Q4_0,
// IQ4_NL, MXFP4 with their level tables; Q4_K, Q5_K), shared by panels.cpp and the SIMD panel
// kernels, and the activation rows those kernels read.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/kernels_impl.h"  // DF_UNROLL, TypeTraits

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

// Q4_K's super-block i of eight rows (256 values each, eight sub-blocks of 32 with a
// 6-bit scale and min apiece): the fp16 scales, the sub-block scales and mins, then the
// codes. Piece k (k < 8) of sub-block pair p (p < 4), the 32 bytes at 256p + 32k, holds
// in byte 4r + j row r's code 4k + j of sub-block 2p (low nibble) and of sub-block
// 2p + 1 (high nibble): the file's 4-byte word 8p + k of each row, moved, not changed.
// The 6-bit scales and mins, slot b = 16 (r / 4) + 4 (r % 4) + j for row r and j < 4:
// sclo[b] holds the low four bits of sub-block j's scale (low nibble) and of sub-block
// j + 4's (high nibble), mlo[b] the same of the mins, hi[b] their top two bits (scale j
// in bits 0-1, scale j + 4 in 2-3, min j in 4-5, min j + 4 in 6-7). A vector of a
// field thus gives rows 0-3 in its low 128-bit lane and rows 4-7 in the high one.
struct PanelQ4Kx8 {
  uint16_t d[8], dmin[8];
  uint8_t sclo[32], mlo[32], hi[32];
  uint8_t qs[1024];
};
static_assert(sizeof(PanelQ4Kx8) == 8 * sizeof(BlockQ4_K));
// Q5_K's: as Q4_K's, with the fifth bits: the 32 bytes at 32k of qh hold in byte
// 4r + j row r's qh[4k + j] (bit 2p of it for sub-block 2p, bit 2p + 1 for 2p + 1).
struct PanelQ5Kx8 {
  uint16_t d[8], dmin[8];
  uint8_t sclo[32], mlo[32], hi[32];
  uint8_t qh[256];
  uint8_t qs[1024];
};
static_assert(sizeof(PanelQ5Kx8) == 8 * sizeof(BlockQ5_K));
// The file block and the panel block of Q4_K (Bits 4) or Q5_K (5).
template <int Bits>
using BlockQ45K = std::conditional_t<Bits == 4, BlockQ4_K, BlockQ5_K>;
template <int Bits>
using PanelQ45Kx8 = std::conditional_t<Bits == 4, PanelQ4Kx8, PanelQ5Kx8>;

// The scale slot of row r, sub-block j % 4 (PanelQ4Kx8).
constexpr int q4k_panel_slot(int r, int j) { return 16 * (r / 4) + 4 * (r % 4) + j % 4; }

// The levels of Q4_0's codes (code - 8), as IQ4_NL's kIq4nlValues and MXFP4's
// kMxfp4Values.
inline constexpr int8_t kQ4_0Levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

// A panel scale as a float: fp16, or 2^(e - 128) (MXFP4's factor 2 folded in).
inline float panel_scale(uint16_t d) { return fp16_to_f32(d); }
inline float panel_scale(uint8_t e) { return e8m0_half_to_f32(e); }

// The prepared activation rows below have internal linkage: every kernel file that
// includes this is compiled for its own instruction set, and the linker must not hand
// one set's copy to another (as x86_common.h and neon_common.h).
namespace {

// A token's Q8_0 row prepared for the panel kernels: each block's 32 value bytes,
// then per block S = -K x the sum of its values (int32; K: the offset that makes the
// kernel's weights unsigned, 0 where they stay signed), then per block its scale.
struct PanelAct {
  const uint8_t* y = nullptr;
  const int32_t* s = nullptr;
  const float* d = nullptr;
  PanelAct() = default;
  PanelAct(const void* p, int64_t nb)
      : y(static_cast<const uint8_t*>(p)),
        s(reinterpret_cast<const int32_t*>(y + size_t(nb) * 32)),
        d(reinterpret_cast<const float*>(s + nb)) {}
};
// NT prepared rows.
template <int NT>
struct PanelActs {
  PanelAct a[NT];
  PanelActs(const void* const* xp, int64_t nb) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) a[t] = PanelAct(xp[t], nb);
  }
  const PanelAct& operator[](int t) const { return a[t]; }
};
inline size_t panel_prep_bytes(int64_t n) { return size_t(n / kQ32) * (32 + sizeof(int32_t) + sizeof(float)); }

// Row r's scales and mins (a Q4_K / Q5_K block's 12 packed bytes) into the panel
// block's slot-ordered fields (PanelQ4Kx8).
template <class Panel>
void q45k_panel_put_scales(Panel& p, int r, const uint8_t* scales) {
  uint8_t sc[8], m[8];
  unpack_scales_k4(scales, sc, m);
  for (int j = 0; j < 4; ++j) {
    const int s = q4k_panel_slot(r, j);
    p.sclo[s] = uint8_t((sc[j] & 15) | (sc[j + 4] & 15) << 4);
    p.mlo[s] = uint8_t((m[j] & 15) | (m[j + 4] & 15) << 4);
    p.hi[s] = uint8_t(sc[j] >> 4 | (sc[j + 4] >> 4) << 2 | (m[j] >> 4) << 4 | (m[j + 4] >> 4) << 6);
  }
}

template <int K>
void panel_prep(int64_t n, void* dst, const void* x) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  const int64_t nb = n / kQ32;
  auto* y = static_cast<uint8_t*>(dst);
  auto* s = reinterpret_cast<int32_t*>(y + size_t(nb) * 32);
  auto* d = reinterpret_cast<float*>(s + nb);
  for (int64_t i = 0; i < nb; ++i) {
    std::memcpy(y + 32 * i, b[i].qs, 32);
    int sum = 0;
    for (int e = 0; e < 32; ++e) sum += b[i].qs[e];
    s[i] = -K * sum;
    d[i] = fp16_to_f32(b[i].d);
  }
}

// A kernel over NT tokens as the one-token signature of TypeTraits.
template <auto F>
void one_token(int64_t n, float* out, const void* w, const void* x) {
  F(n, out, w, &x);
}

// Sets one type's panel kernels: Dot over panels and Rows over the file's rows, each
// for one and four tokens (template <int NT> in the set's file), reading activation
// rows prepared with offset K.
template <int K, auto Dot1, auto Dot4, auto Rows1, auto Rows4>
void set_panel_kernels(TypeTraits& r) {
  r.panel_prep_bytes = panel_prep_bytes;
  r.panel_prep = panel_prep<K>;
  r.panel_dot = one_token<Dot1>;
  r.panel_dot_x4 = Dot4;
  r.panel_rows = one_token<Rows1>;
  r.panel_rows_x4 = Rows4;
}

}  // namespace

}  // namespace deltafin::kern
