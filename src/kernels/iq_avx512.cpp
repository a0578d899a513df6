// AVX-512 (BW + VNNI) dot products of the i-quants against Q8_K. IQ2_XXS: each
// 512-bit vector covers two groups of 32 (64 consecutive values): eight codebook
// points gathered with scalar loads, the 64 sign bits (eight 7-bit codes completed
// to even parity) become a mask that negates the activations, maddubs forms pair
// products and vpdpwssd multiplies them by the two groups' odd scales and
// accumulates. One float FMA per super-block, 1/8 at the end. IQ2_XS the same with
// a 9-bit index and sign code per eight values and a scale per 16. IQ3_XXS the same with
// sixteen four-byte points per vector, and 1/4; it decodes a group at a time in 256 bits.
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"

namespace deltafin::kern {
namespace {

// The 64 sign bits of two groups of 32 from their sign/scale words (four 7-bit codes
// in bits 0..27 of each): every code completed to even parity (bit 7 = the parity of
// bits 0..6), as kEvenSigns holds them, the eight at once.
inline uint64_t even_sign_mask(uint32_t s0, uint32_t s1) {
  const __m256i w = _mm256_setr_epi32(int(s0), int(s0), int(s0), int(s0), int(s1), int(s1), int(s1), int(s1));
  __m256i v = _mm256_and_si256(_mm256_srlv_epi32(w, _mm256_setr_epi32(0, 7, 14, 21, 0, 7, 14, 21)), _mm256_set1_epi32(127));
  __m256i p = _mm256_xor_si256(v, _mm256_srli_epi32(v, 4));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
  v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi32(1)), 7));
  return uint64_t(_mm_cvtsi128_si64(_mm256_cvtepi32_epi8(v)));
}

// Groups 2c and 2c + 1 of an IQ2_XXS block: the points, sign mask and scales.
DF_ALWAYS_INLINE __m512i iq2xxs_pair(const BlockIQ2_XXS& b, int c, __mmask64* neg, __m512i* sc) {
  const uint64_t* grid = kIq2xxsGrid.data();
  uint32_t w[4];  // group 2c: w[0] points, w[1] signs + scale; group 2c + 1: w[2], w[3]
  std::memcpy(w, b.qs + 8 * c, 16);
  *neg = _cvtu64_mask64(even_sign_mask(w[1], w[3]));
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * (w[1] >> 28) + 1))),
                           _mm256_set1_epi16(short(2 * (w[3] >> 28) + 1)), 1);
  return _mm512_set_epi64(int64_t(grid[w[2] >> 24]), int64_t(grid[(w[2] >> 16) & 255]),
                          int64_t(grid[(w[2] >> 8) & 255]), int64_t(grid[w[2] & 255]), int64_t(grid[w[0] >> 24]),
                          int64_t(grid[(w[0] >> 16) & 255]), int64_t(grid[(w[0] >> 8) & 255]),
                          int64_t(grid[w[0] & 255]));
}

// The sign bytes of eight runs from their IQ2_XS words (sign code in bits 9..15):
// each 7-bit code completed to even parity (bit 7 = the parity of bits 0..6), as
// kEvenSigns holds them, computed for the eight at once.
inline uint64_t sign_bytes8(const uint16_t* q) {
  __m128i v = _mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)), 9);
  __m128i p = _mm_xor_si128(v, _mm_srli_epi16(v, 4));
  p = _mm_xor_si128(p, _mm_srli_epi16(p, 2));
  p = _mm_xor_si128(p, _mm_srli_epi16(p, 1));
  v = _mm_or_si128(v, _mm_slli_epi16(_mm_and_si128(p, _mm_set1_epi16(1)), 7));
  return uint64_t(_mm_cvtsi128_si64(_mm_packus_epi16(v, v)));
}

// Runs 8c .. 8c + 7 of an IQ2_XS block; lane l (16 values) takes group 4c + l's odd scale.
DF_ALWAYS_INLINE __m512i iq2xs_pair(const BlockIQ2_XS& b, int c, __mmask64* neg, __m512i* sc) {
  const uint64_t* grid = kIq2xsGrid.data();
  const uint16_t* q = b.qs + 8 * c;
  *neg = _cvtu64_mask64(sign_bytes8(q));
  *sc = group_scales_of_chunk(odd_scales16(b.scales), c);
  return _mm512_set_epi64(int64_t(grid[q[7] & 511]), int64_t(grid[q[6] & 511]), int64_t(grid[q[5] & 511]),
                          int64_t(grid[q[4] & 511]), int64_t(grid[q[3] & 511]), int64_t(grid[q[2] & 511]),
                          int64_t(grid[q[1] & 511]), int64_t(grid[q[0] & 511]));
}

// Groups 2c and 2c + 1 of an IQ3_XXS block: sixteen four-byte points.
DF_ALWAYS_INLINE __m512i iq3xxs_pair(const BlockIQ3_XXS& b, int c, __mmask64* neg, __m512i* sc) {
  uint32_t w[2];
  std::memcpy(w, b.qs + 64 + 8 * c, 8);
  *neg = _cvtu64_mask64(even_sign_mask(w[0], w[1]));
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * (w[0] >> 28) + 1))),
                           _mm256_set1_epi16(short(2 * (w[1] >> 28) + 1)), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(iq3xxs_points(b, 2 * c)), iq3xxs_points(b, 2 * c + 1), 1);
}

// Decode of IQ3_XXS: a group of 32 values in 256 bits (iq256_dot), its points and sign
// mask from scalar lookups (kEvenSigns), the eight groups' scales once per super-block
// in group_scales' form. Its int32 lanes sum the same values per (row, token) as
// iq512_dot's halves folded (Fold256), so batch and decode agree bit for bit.
DF_ALWAYS_INLINE __m256i iq3xxs_group256(const BlockIQ3_XXS& b, int ib, __mmask32* neg) {
  const uint8_t* es = kEvenSigns.data();
  uint32_t w;
  std::memcpy(&w, b.qs + 64 + 4 * ib, 4);
  *neg = _cvtu32_mask32(es[w & 127] | uint32_t(es[(w >> 7) & 127]) << 8 | uint32_t(es[(w >> 14) & 127]) << 16 |
                        uint32_t(es[(w >> 21) & 127]) << 24);
  return iq3xxs_points(b, ib);
}
DF_ALWAYS_INLINE __m256i iq3xxs_scales256(const BlockIQ3_XXS& b) {
  const __m128i s = _mm256_cvtepi32_epi16(_mm256_srli_epi32(loadu256(b.qs + 64), 28));
  const __m128i o = _mm_add_epi16(_mm_add_epi16(s, s), _mm_set1_epi16(1));
  return _mm256_broadcastsi128_si256(_mm_or_si128(o, _mm_slli_epi16(o, 8)));
}

template <int NR, int NT>
struct DotIq2xxs512 {
  static void run(int64_t n, float* out, const BlockIQ2_XXS* const* a, const BlockQ8_K* const* y) {
    iq512_dot<NR, NT, iq_d<BlockIQ2_XXS>, iq2xxs_pair>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq2xs512 {
  static void run(int64_t n, float* out, const BlockIQ2_XS* const* a, const BlockQ8_K* const* y) {
    iq512_dot<NR, NT, iq_d<BlockIQ2_XS>, iq2xs_pair>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq3xxs512 {
  static void run(int64_t n, float* out, const BlockIQ3_XXS* const* a, const BlockQ8_K* const* y) {
    if constexpr (NT >= 4)
      iq512_dot<NR, NT, iq_d<BlockIQ3_XXS>, iq3xxs_pair, BlockIQ3_XXS, true>(n, out, a, y, 0.25f);
    else
      iq256_dot<NR, NT, true, __mmask32, iq_d<BlockIQ3_XXS>, iq3xxs_scales256, iq3xxs_group256, add_group_masked>(
          n, out, a, y, 0.25f);
  }
};

}  // namespace

void install_iq_avx512(TypeTraits* t) {
  install_iq_row<BlockIQ2_XXS, DotIq2xxs512>(t[uint32_t(DType::IQ2_XXS)], Isa::AVX512);
  install_iq_row<BlockIQ2_XS, DotIq2xs512>(t[uint32_t(DType::IQ2_XS)], Isa::AVX512);
  install_iq_row<BlockIQ3_XXS, DotIq3xxs512>(t[uint32_t(DType::IQ3_XXS)], Isa::AVX512);
}

}  // namespace deltafin::kern
