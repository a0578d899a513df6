// Shared frame of the x86 i-quant kernels (iq_avx2.cpp, iq_avx512.cpp): one kernel
// body computes NR weight rows against NT activation rows, so vec_dot (1 x 1), the
// batched x4 (1 x 4) and the decode r4 (4 x 1) run the same operations in the same
// order for every (row, activation) pair and agree bit for bit. Internal linkage, as
// x86_common.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/iq_grids.h"
#include "kernels/types.h"
#include "kernels/x86_common.h"

// For the per-group helpers the kernels call: GCC otherwise declines to inline some
// of them (IQ1_M's, IQ2_S's), passing vectors through memory at half the speed.
#define DF_ALWAYS_INLINE inline __attribute__((always_inline))
#define DF_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))

namespace deltafin::kern {
namespace {

// A block's scales once per super-block (AVX2 IQ2_XS, IQ2_S, IQ3_S, IQ1_M), as the odd
// bytes 2 * s + 1 in both 128-bit lanes, byte 2 * ib + h for group ib's half h (IQ3_S:
// one scale a group, repeated); a group's words then come from one shuffle
// (group_scales), where extracting and broadcasting its scale cost six instructions a
// group and row.
DF_ALWAYS_INLINE __m256i odd_scale_bytes(__m128i halves) {
  const __m128i v = _mm_add_epi8(halves, halves);
  return _mm256_broadcastsi128_si256(_mm_add_epi8(v, _mm_set1_epi8(1)));
}
// Nibble pairs (low first) to bytes.
DF_ALWAYS_INLINE __m128i nibbles_to_bytes(__m128i x) {
  const __m128i m = _mm_set1_epi8(15);
  return _mm_unpacklo_epi8(_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16(x, 4), m));
}
// The sixteen 4-bit scales of IQ2_XS and IQ2_S (scales[8], low nibble first) so.
DF_ALWAYS_INLINE __m256i odd_scale_bytes_of_nibbles8(const uint8_t* scales) {
  return odd_scale_bytes(nibbles_to_bytes(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales))));
}
// Group ib's scales as words: its first 16 values' in the low lane, the last 16's in
// the high one.
DF_ALWAYS_INLINE __m256i group_scales(__m256i scale_bytes, int ib) {
  const short lo = short(0x8000 | (2 * ib)), hi = short(0x8000 | (2 * ib + 1));
  return _mm256_shuffle_epi8(scale_bytes, _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)));
}

// IQ3_S's scale bytes (group_scales: one scale a group, repeated).
DF_ALWAYS_INLINE __m256i iq3s_scales(const BlockIQ3_S& b) {
  uint32_t raw;
  std::memcpy(&raw, b.scales, 4);
  const __m128i e = nibbles_to_bytes(_mm_cvtsi32_si128(int(raw)));
  return odd_scale_bytes(_mm_unpacklo_epi8(e, e));
}

// The eight points of IQ3_S group ib. Their indices q[k] | bit k of qh[ib] as bit 8 are
// made and used in scalar code: the kernels are bound by the vector ports, which a
// vector of indices (and a vpgatherdd, or extracts to eight loads) kept busy. Zen 5,
// AVX2, against the indices in a vector: decode tg64 76 -> 81 tok/s through eight
// extracts, pp64 210 -> 225 through a gather.
DF_ALWAYS_INLINE __m256i iq3s_points(const BlockIQ3_S& b, int ib) {
  const uint32_t* grid = kIq3sGrid.data();
  const uint8_t* q = b.qs + 8 * ib;
  const uint32_t h = b.qh[ib];
  auto k = [&](int j) { return q[j] | ((h << (8 - j)) & 256); };
  return _mm256_setr_epi32(int(grid[k(0)]), int(grid[k(1)]), int(grid[k(2)]), int(grid[k(3)]), int(grid[k(4)]),
                           int(grid[k(5)]), int(grid[k(6)]), int(grid[k(7)]));
}

// The eight four-byte points of IQ3_XXS group ib (8-bit indices q[k]).
DF_ALWAYS_INLINE __m256i iq3xxs_points(const BlockIQ3_XXS& b, int ib) {
  const uint32_t* grid = kIq3xxsGrid.data();
  const uint8_t* q = b.qs + 8 * ib;
  return _mm256_setr_epi32(int(grid[q[0]]), int(grid[q[1]]), int(grid[q[2]]), int(grid[q[3]]), int(grid[q[4]]),
                           int(grid[q[5]]), int(grid[q[6]]), int(grid[q[7]]));
}

// K<NR, NT>::run(n, out[NR * NT] row-major by weight row, weight rows, activation
// rows) is the kernel; these wrap it as the traits table's three entry points.
template <class Block, template <int, int> class K>
void iq_one(int64_t n, float* out, const void* w, const void* x) {
  const Block* a[1] = {static_cast<const Block*>(w)};
  const BlockQ8_K* y[1] = {static_cast<const BlockQ8_K*>(x)};
  K<1, 1>::run(n, out, a, y);
}

template <class Block, template <int, int> class K>
void iq_x4(int64_t n, float* out, const void* w, const void* const* x) {
  const Block* a[1] = {static_cast<const Block*>(w)};
  const BlockQ8_K* y[4];
  for (int t = 0; t < 4; ++t) y[t] = static_cast<const BlockQ8_K*>(x[t]);
  K<1, 4>::run(n, out, a, y);
}

template <class Block, template <int, int> class K>
void iq_x8(int64_t n, float* out, const void* w, const void* const* x) {
  const Block* a[1] = {static_cast<const Block*>(w)};
  const BlockQ8_K* y[8];
  for (int t = 0; t < 8; ++t) y[t] = static_cast<const BlockQ8_K*>(x[t]);
  K<1, 8>::run(n, out, a, y);
}

template <class Block, template <int, int> class K>
void iq_r4(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  const Block* a[4];
  for (int r = 0; r < 4; ++r) a[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * w_stride);
  const BlockQ8_K* y[1] = {static_cast<const BlockQ8_K*>(x)};
  K<4, 1>::run(n, out, a, y);
}

// Sets a traits row's kernels to K's: vec_dot, x4, r4 and the eight-token batch kernel
// (on both sets: on AVX2 too the codebook gather and sign work per row costs more than
// the spills of eight chains in 16 registers; Zen 5, AVX2 prefill 1.04-1.19x over four
// tokens per unpacked row).
template <class Block, template <int, int> class K>
void install_iq_row(TypeTraits& row, Isa isa) {
  row.vec_dot = iq_one<Block, K>;
  row.vec_dot_x4 = iq_x4<Block, K>;
  row.vec_dot_r4 = iq_r4<Block, K>;
  row.vec_dot_x8 = iq_x8<Block, K>;
  row.isa = isa;
}

// iq256_dot's Add for signs as +1 / -1 bytes (sign_bytes): a group's products, added
// to sumi.
DF_ALWAYS_INLINE __m256i add_group(__m256i sumi, __m256i g, __m256i q8, __m256i s, __m256i sc) {
  return _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(g, _mm256_sign_epi8(q8, s)), sc));
}

// The 256-bit kernel body of IQ2_XS, IQ2_S and IQ3_S (AVX2) and of the AVX-512 IQ3_S and
// IQ3_XXS decode: NR weight rows against NT Q8_K rows, a group of 32 values a step. Group(block, ib, &signs)
// gives group ib's points and its signs in the form Add takes, Scales(block) the
// block's scale bytes (group_scales), Add(sumi, points, q8, signs, scales) adds the
// group's scaled pair products to the int32 lanes; one float FMA per super-block by
// Super(block) * d_x, `scale` at the end. Unroll: the eight groups unrolled, which
// keeps their scale shuffles constant (Zen 5, AVX2: IQ3_S pp64 187 -> 197 tok/s; IQ2_S
// measured slower so, pp64 245 -> 217, and keeps the loop).
template <int NR, int NT, bool Unroll, class Signs, auto Super, auto Scales, auto Group, auto Add, class Block>
DF_ALWAYS_INLINE void iq256_dot(int64_t n, float* out, const Block* const* a, const BlockQ8_K* const* y, float scale) {
  __m256 acc[NR][NT];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m256i sumi[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) sumi[r][t] = _mm256_setzero_si256();
    }
    __m256i scale_bytes[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) scale_bytes[r] = Scales(a[r][i]);
    auto group = [&](int ib) DF_ALWAYS_INLINE_LAMBDA {
      __m256i q8[NT];
      DF_UNROLL
      for (int t = 0; t < NT; ++t) q8[t] = loadu256(y[t][i].qs + 32 * ib);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        Signs s;
        const __m256i g = Group(a[r][i], ib, &s);
        const __m256i sc = group_scales(scale_bytes[r], ib);
        DF_UNROLL
        for (int t = 0; t < NT; ++t) sumi[r][t] = Add(sumi[r][t], g, q8[t], s, sc);
      }
    };
    if constexpr (Unroll) {
      DF_UNROLL
      for (int ib = 0; ib < 8; ++ib) group(ib);
    } else {
      for (int ib = 0; ib < 8; ++ib) group(ib);
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const float d = Super(a[r][i]);
      DF_UNROLL
      for (int t = 0; t < NT; ++t)
        acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[t][i].d), _mm256_cvtepi32_ps(sumi[r][t]), acc[r][t]);
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) out[r * NT + t] = scale * hsum8(acc[r][t]);
  }
}

#if defined(__AVX512BW__)

// A block's fp16 super-block scale d as float (Super of iq512_dot for most types).
template <class Block>
DF_ALWAYS_INLINE float iq_d(const Block& b) {
  return h2f(b.d);
}

// iq512_dot's float accumulator: 512 bits, or 256 with Fold256 (a specialization, where
// std::conditional_t on the vector types drew GCC's -Wignored-attributes).
template <bool Fold256>
struct FloatAcc {
  using type = __m512;
};
template <>
struct FloatAcc<true> {
  using type = __m256;
};

// The AVX-512 i-quant kernel body: NR weight rows against NT Q8_K rows. Per 64 values
// Pair(block, c, &neg, &sc) gives the weights' magnitudes, their signs as the mask that
// negates the activations, and the scales as words; maddubs forms the pair products and
// vpdpwssd multiplies them by the scales and sums per super-block in int32, then one
// FMA by Super(block) * d_x, and `scale` at the end. Fold256 adds the two 256-bit halves
// before the float step (IQ4_XS: the lanes of its 256-bit kernel, so the same bits).
template <int NR, int NT, auto Super, auto Pair, class Block, bool Fold256 = false>
DF_ALWAYS_INLINE void iq512_dot(int64_t n, float* out, const Block* const* a, const BlockQ8_K* const* y, float scale) {
  typename FloatAcc<Fold256>::type acc[NR][NT];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      if constexpr (Fold256) acc[r][t] = _mm256_setzero_ps();
      else acc[r][t] = _mm512_setzero_ps();
    }
  }
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m512i sumi[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) sumi[r][t] = _mm512_setzero_si512();
    }
    DF_UNROLL
    for (int c = 0; c < 4; ++c) {
      __m512i q8[NT];
      DF_UNROLL
      for (int t = 0; t < NT; ++t) q8[t] = _mm512_loadu_si512(y[t][i].qs + 64 * c);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __mmask64 neg;
        __m512i sc;
        const __m512i aw = Pair(a[r][i], c, &neg, &sc);
        DF_UNROLL
        for (int t = 0; t < NT; ++t) {
          const __m512i qs = _mm512_mask_sub_epi8(q8[t], neg, _mm512_setzero_si512(), q8[t]);
          sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(aw, qs), sc);
        }
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const float d = Super(a[r][i]);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) {
        if constexpr (Fold256) {
          const __m256i s8 =
              _mm256_add_epi32(_mm512_castsi512_si256(sumi[r][t]), _mm512_extracti64x4_epi64(sumi[r][t], 1));
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[t][i].d), _mm256_cvtepi32_ps(s8), acc[r][t]);
        } else {
          acc[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(d * y[t][i].d), _mm512_cvtepi32_ps(sumi[r][t]), acc[r][t]);
        }
      }
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      if constexpr (Fold256) out[r * NT + t] = scale * hsum8(acc[r][t]);
      else out[r * NT + t] = scale * _mm512_reduce_add_ps(acc[r][t]);
    }
  }
}

// iq256_dot's Add with AVX-512VL and VNNI (decode of IQ3_S and IQ3_XXS): the sign bits
// as the mask of a masked subtract, vpdpwssd for the scales.
DF_ALWAYS_INLINE __m256i add_group_masked(__m256i sumi, __m256i g, __m256i q8, __mmask32 neg, __m256i sc) {
  const __m256i qs = _mm256_mask_sub_epi8(q8, neg, _mm256_setzero_si256(), q8);
  return _mm256_dpwssd_epi32(sumi, _mm256_maddubs_epi16(g, qs), sc);
}

// 2 ls + 1 of the 16 groups of 16 of an IQ2_XS / IQ2_S super-block (4-bit codes, low
// nibble first) as 16-bit words 0..15.
DF_ALWAYS_INLINE __m512i odd_scales16(const uint8_t* scales) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales));
  const __m128i nib = _mm_and_si128(_mm_unpacklo_epi8(b, _mm_srli_epi16(b, 4)), _mm_set1_epi8(15));
  const __m256i w = _mm256_cvtepu8_epi16(nib);
  return _mm512_castsi256_si512(_mm256_add_epi16(_mm256_add_epi16(w, w), _mm256_set1_epi16(1)));
}

// The scales of chunk c (values 64c .. 64c + 63) in the words of a vector: 128-bit
// lane l (16 values) gets group 4c + l's.
DF_ALWAYS_INLINE __m512i group_scales_of_chunk(__m512i scales16, int c) {
  const __m512i lane_of_word = _mm512_set_epi32(0x30003, 0x30003, 0x30003, 0x30003, 0x20002, 0x20002, 0x20002,
                                                0x20002, 0x10001, 0x10001, 0x10001, 0x10001, 0, 0, 0, 0);
  return _mm512_permutexvar_epi16(_mm512_add_epi16(_mm512_set1_epi16(short(4 * c)), lane_of_word), scales16);
}
#endif

}  // namespace
}  // namespace deltafin::kern
