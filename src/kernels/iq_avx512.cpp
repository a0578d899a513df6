// AVX-512 (BW + VNNI) dot products of the i-quants against Q8_K. IQ2_XXS: each
// 512-bit vector covers two groups of 32 (64 consecutive values): eight codebook
// points gathered with scalar loads, the 64 sign bits (eight 7-bit codes completed
// to even parity) become a mask that negates the activations, maddubs forms pair
// products and vpdpwssd multiplies them by the two groups' odd scales and
// accumulates. One float FMA per super-block, 1/8 at the end. IQ2_XS the same with
// a 9-bit index and sign code per eight values and a scale per 16. IQ3_XXS the same with
// sixteen four-byte points per vector, and 1/4.
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

template <int NR, int NT>
struct DotIq2xxs512 {
  static void run(int64_t n, float* out, const BlockIQ2_XXS* const* a, const BlockQ8_K* const* y) {
    const uint64_t* grid = kIq2xxsGrid.data();
    __m512 acc[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
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
          uint32_t w[4];  // group 2c: w[0] points, w[1] signs + scale; group 2c + 1: w[2], w[3]
          std::memcpy(w, a[r][i].qs + 8 * c, 16);
          const __m512i g = _mm512_set_epi64(
              int64_t(grid[w[2] >> 24]), int64_t(grid[(w[2] >> 16) & 255]), int64_t(grid[(w[2] >> 8) & 255]),
              int64_t(grid[w[2] & 255]), int64_t(grid[w[0] >> 24]), int64_t(grid[(w[0] >> 16) & 255]),
              int64_t(grid[(w[0] >> 8) & 255]), int64_t(grid[w[0] & 255]));
          const __mmask64 neg = _cvtu64_mask64(even_sign_mask(w[1], w[3]));
          const __m512i sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * (w[1] >> 28) + 1))),
                                                _mm256_set1_epi16(short(2 * (w[3] >> 28) + 1)), 1);
          DF_UNROLL
          for (int t = 0; t < NT; ++t) {
            const __m512i qs = _mm512_mask_sub_epi8(q8[t], neg, _mm512_setzero_si512(), q8[t]);
            sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(g, qs), sc);
          }
        }
      }
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        const float d = h2f(a[r][i].d);
        DF_UNROLL
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(d * y[t][i].d), _mm512_cvtepi32_ps(sumi[r][t]), acc[r][t]);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) out[r * NT + t] = 0.125f * _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

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

template <int NR, int NT>
struct DotIq2xs512 {
  static void run(int64_t n, float* out, const BlockIQ2_XS* const* a, const BlockQ8_K* const* y) {
    const uint64_t* grid = kIq2xsGrid.data();
    __m512 acc[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQK; ++i) {
      __m512i sumi[NR][NT];
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        DF_UNROLL
        for (int t = 0; t < NT; ++t) sumi[r][t] = _mm512_setzero_si512();
      }
      __m512i scales[NR];  // 2 ls + 1 of the 16 groups as 16-bit words 0..15
      DF_UNROLL
      for (int r = 0; r < NR; ++r) scales[r] = odd_scales16(a[r][i].scales);
      DF_UNROLL
      for (int c = 0; c < 4; ++c) {
        __m512i q8[NT];
        DF_UNROLL
        for (int t = 0; t < NT; ++t) q8[t] = _mm512_loadu_si512(y[t][i].qs + 64 * c);
        DF_UNROLL
        for (int r = 0; r < NR; ++r) {
          const uint16_t* q = a[r][i].qs + 8 * c;  // runs 8c .. 8c + 7
          const __m512i g = _mm512_set_epi64(int64_t(grid[q[7] & 511]), int64_t(grid[q[6] & 511]),
                                             int64_t(grid[q[5] & 511]), int64_t(grid[q[4] & 511]),
                                             int64_t(grid[q[3] & 511]), int64_t(grid[q[2] & 511]),
                                             int64_t(grid[q[1] & 511]), int64_t(grid[q[0] & 511]));
          const __mmask64 neg = _cvtu64_mask64(sign_bytes8(q));
          // Lane l (16 values) of this chunk takes group 4c + l's odd scale.
          const __m512i sc = group_scales_of_chunk(scales[r], c);
          DF_UNROLL
          for (int t = 0; t < NT; ++t) {
            const __m512i qs = _mm512_mask_sub_epi8(q8[t], neg, _mm512_setzero_si512(), q8[t]);
            sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(g, qs), sc);
          }
        }
      }
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        const float d = h2f(a[r][i].d);
        DF_UNROLL
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(d * y[t][i].d), _mm512_cvtepi32_ps(sumi[r][t]), acc[r][t]);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) out[r * NT + t] = 0.125f * _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

template <int NR, int NT>
struct DotIq3xxs512 {
  static void run(int64_t n, float* out, const BlockIQ3_XXS* const* a, const BlockQ8_K* const* y) {
    const uint32_t* grid = kIq3xxsGrid.data();
    __m512 acc[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
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
          const uint8_t* q = a[r][i].qs + 16 * c;  // the points of groups 2c and 2c + 1
          uint32_t w[2];
          std::memcpy(w, a[r][i].qs + 64 + 8 * c, 8);
          const __m512i g = _mm512_set_epi32(
              int(grid[q[15]]), int(grid[q[14]]), int(grid[q[13]]), int(grid[q[12]]), int(grid[q[11]]),
              int(grid[q[10]]), int(grid[q[9]]), int(grid[q[8]]), int(grid[q[7]]), int(grid[q[6]]), int(grid[q[5]]),
              int(grid[q[4]]), int(grid[q[3]]), int(grid[q[2]]), int(grid[q[1]]), int(grid[q[0]]));
          const __mmask64 neg = _cvtu64_mask64(even_sign_mask(w[0], w[1]));
          const __m512i sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * (w[0] >> 28) + 1))),
                                                _mm256_set1_epi16(short(2 * (w[1] >> 28) + 1)), 1);
          DF_UNROLL
          for (int t = 0; t < NT; ++t) {
            const __m512i qs = _mm512_mask_sub_epi8(q8[t], neg, _mm512_setzero_si512(), q8[t]);
            sumi[r][t] = _mm512_dpwssd_epi32(sumi[r][t], _mm512_maddubs_epi16(g, qs), sc);
          }
        }
      }
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        const float d = h2f(a[r][i].d);
        DF_UNROLL
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(d * y[t][i].d), _mm512_cvtepi32_ps(sumi[r][t]), acc[r][t]);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) out[r * NT + t] = 0.25f * _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

}  // namespace

void install_iq_avx512(TypeTraits* t) {
  install_iq_row<BlockIQ2_XXS, DotIq2xxs512, true>(t[uint32_t(DType::IQ2_XXS)], Isa::AVX512);
  install_iq_row<BlockIQ2_XS, DotIq2xs512, true>(t[uint32_t(DType::IQ2_XS)], Isa::AVX512);
  install_iq_row<BlockIQ3_XXS, DotIq3xxs512, true>(t[uint32_t(DType::IQ3_XXS)], Isa::AVX512);
}

}  // namespace deltafin::kern
