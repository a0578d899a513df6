// Shared frame of the x86 i-quant kernels (iq_avx2.cpp, iq_avx512.cpp): one kernel
// body computes NR weight rows against NT activation rows, so vec_dot (1 x 1), the
// batched x4 (1 x 4) and the decode r4 (4 x 1) run the same operations in the same
// order for every (row, activation) pair and agree bit for bit. Internal linkage, as
// x86_common.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/types.h"
#include "kernels/x86_common.h"

// For the per-group helpers the kernels call: GCC otherwise declines to inline some
// of them (IQ1_M's, IQ2_S's), passing vectors through memory at half the speed.
#define DF_ALWAYS_INLINE inline __attribute__((always_inline))

namespace deltafin::kern {
namespace {

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

// Sets a traits row's kernels to K's: vec_dot, x4, r4 and, with X8 (AVX-512, whose 32
// registers hold eight accumulator chains), the eight-token batch kernel.
template <class Block, template <int, int> class K, bool X8>
void install_iq_row(TypeTraits& row, Isa isa) {
  row.vec_dot = iq_one<Block, K>;
  row.vec_dot_x4 = iq_x4<Block, K>;
  row.vec_dot_r4 = iq_r4<Block, K>;
  if constexpr (X8) row.vec_dot_x8 = iq_x8<Block, K>;
  else row.vec_dot_x8 = nullptr;
  row.isa = isa;
}

#if defined(__AVX512BW__)
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
