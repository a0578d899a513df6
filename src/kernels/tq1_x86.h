// TQ1_0's digit unpacking, shared by tq1_avx2.cpp and tq1_avx512.cpp: the eight
// 32-byte vectors whose bytes, read as base-3 fractions, lead with the digit of
// elements 32c .. 32c + 31 (c < 8), in element order (layout in blocks_legacy.h).
// Multiplying a byte by 3 modulo 256 moves the next digit to the front, so the
// vectors are the packed bytes times 3^k, which byte additions form. Internal
// linkage, as x86_common.h.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/blocks_legacy.h"
#include "kernels/x86_common.h"

namespace deltafin::kern {
namespace {

inline __m256i times3(__m256i v) { return _mm256_add_epi8(_mm256_add_epi8(v, v), v); }
inline __m128i times3(__m128i v) { return _mm_add_epi8(_mm_add_epi8(v, v), v); }

inline void tq1_digit_bytes(const BlockTQ1_0& b, __m256i* v) {
  v[0] = loadu256(b.qs);  // elements 0..159: qs[0..31] times 1, 3, 9, 27, 81
  for (int k = 1; k < 5; ++k) v[k] = times3(v[k - 1]);
  // Elements 160..239: qs[32..47] times 3^k, two powers a vector (low lane first).
  __m256i p[5];
  p[0] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32)));
  for (int k = 1; k < 5; ++k) p[k] = times3(p[k - 1]);
  v[5] = _mm256_blend_epi32(p[0], p[1], 0xf0);
  v[6] = _mm256_blend_epi32(p[2], p[3], 0xf0);
  // Elements 240..255: qh[0..3] times 1, 3, 9, 27 (one 32-bit word each).
  uint32_t h;
  std::memcpy(&h, b.qh, 4);
  const __m128i h1 = _mm_set1_epi32(int(h)), h3 = times3(h1), h9 = times3(h3), h27 = times3(h9);
  const __m128i hv = _mm_blend_epi32(_mm_blend_epi32(h1, h3, 0x2), _mm_blend_epi32(h9, h27, 0x8), 0xc);
  v[7] = _mm256_set_m128i(hv, _mm256_castsi256_si128(p[4]));
}

}  // namespace
}  // namespace deltafin::kern
