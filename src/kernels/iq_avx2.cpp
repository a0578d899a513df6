// AVX2 dot products of the i-quants against Q8_K. IQ2_XXS: per group of 32 values
// the four codebook points and the four sign patterns (+1/-1 bytes) are gathered
// from the tables with scalar loads, the signs move onto the activations
// (vpsignb), maddubs forms the pair products (at most 43 * 127 * 2, no saturation)
// and madd multiplies them by the group's odd scale into int32 lanes; one float FMA
// per super-block, 1/8 at the end, as ggml's AVX2 kernel. IQ2_XS the same with a
// 9-bit index and sign code per eight values and a scale per 16. IQ3_XXS the same with
// eight four-byte points per group (products at most 62 * 127 * 2) and 1/4.
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"

namespace deltafin::kern {
namespace {

template <int NR, int NT>
struct DotIq2xxs {
  static void run(int64_t n, float* out, const BlockIQ2_XXS* const* a, const BlockQ8_K* const* y) {
    const uint64_t* grid = kIq2xxsGrid.data();
    const uint64_t* signs = kEvenSignBytes.data();
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
      for (int ib = 0; ib < 8; ++ib) {
        __m256i q8[NT];
        DF_UNROLL
        for (int t = 0; t < NT; ++t) q8[t] = loadu256(y[t][i].qs + 32 * ib);
        DF_UNROLL
        for (int r = 0; r < NR; ++r) {
          uint32_t w[2];
          std::memcpy(w, a[r][i].qs + 4 * ib, 8);
          const __m256i g = _mm256_set_epi64x(int64_t(grid[w[0] >> 24]), int64_t(grid[(w[0] >> 16) & 255]),
                                              int64_t(grid[(w[0] >> 8) & 255]), int64_t(grid[w[0] & 255]));
          const __m256i s = _mm256_set_epi64x(int64_t(signs[(w[1] >> 21) & 127]), int64_t(signs[(w[1] >> 14) & 127]),
                                              int64_t(signs[(w[1] >> 7) & 127]), int64_t(signs[w[1] & 127]));
          const __m256i sc = _mm256_set1_epi16(short(2 * (w[1] >> 28) + 1));
          DF_UNROLL
          for (int t = 0; t < NT; ++t) {
            const __m256i p = _mm256_maddubs_epi16(g, _mm256_sign_epi8(q8[t], s));
            sumi[r][t] = _mm256_add_epi32(sumi[r][t], _mm256_madd_epi16(p, sc));
          }
        }
      }
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        const float d = h2f(a[r][i].d);
        DF_UNROLL
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[t][i].d), _mm256_cvtepi32_ps(sumi[r][t]), acc[r][t]);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) out[r * NT + t] = 0.125f * hsum8(acc[r][t]);
    }
  }
};

DF_ALWAYS_INLINE __m256i iq2xs_group(const BlockIQ2_XS& b, int ib, __m256i* s) {
  const uint64_t* grid = kIq2xsGrid.data();
  const uint64_t* signs = kEvenSignBytes.data();
  const uint16_t* q = b.qs + 4 * ib;
  *s = _mm256_set_epi64x(int64_t(signs[q[3] >> 9]), int64_t(signs[q[2] >> 9]), int64_t(signs[q[1] >> 9]),
                         int64_t(signs[q[0] >> 9]));
  return _mm256_set_epi64x(int64_t(grid[q[3] & 511]), int64_t(grid[q[2] & 511]), int64_t(grid[q[1] & 511]),
                           int64_t(grid[q[0] & 511]));
}
DF_ALWAYS_INLINE __m256i iq2xs_scales(const BlockIQ2_XS& b) { return odd_scale_bytes_of_nibbles8(b.scales); }
DF_ALWAYS_INLINE float iq2xs_d(const BlockIQ2_XS& b) { return h2f(b.d); }

template <int NR, int NT>
struct DotIq2xs {
  static void run(int64_t n, float* out, const BlockIQ2_XS* const* a, const BlockQ8_K* const* y) {
    iq256_dot<NR, NT, false, __m256i, iq2xs_d, iq2xs_scales, iq2xs_group, add_group>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq3xxs {
  static void run(int64_t n, float* out, const BlockIQ3_XXS* const* a, const BlockQ8_K* const* y) {
    const uint64_t* signs = kEvenSignBytes.data();
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
      // Unrolled (Zen 5, AVX2: pp64 209 -> 221 tok/s, tg32 85 -> 90; IQ2_XXS and IQ2_XS
      // measured slower so).
      DF_UNROLL
      for (int ib = 0; ib < 8; ++ib) {
        __m256i q8[NT];
        DF_UNROLL
        for (int t = 0; t < NT; ++t) q8[t] = loadu256(y[t][i].qs + 32 * ib);
        DF_UNROLL
        for (int r = 0; r < NR; ++r) {
          uint32_t w;
          std::memcpy(&w, a[r][i].qs + 64 + 4 * ib, 4);
          const __m256i g = iq3xxs_points(a[r][i], ib);
          const __m256i s = _mm256_set_epi64x(int64_t(signs[(w >> 21) & 127]), int64_t(signs[(w >> 14) & 127]),
                                              int64_t(signs[(w >> 7) & 127]), int64_t(signs[w & 127]));
          const __m256i sc = _mm256_set1_epi16(short(2 * (w >> 28) + 1));
          DF_UNROLL
          for (int t = 0; t < NT; ++t) {
            const __m256i p = _mm256_maddubs_epi16(g, _mm256_sign_epi8(q8[t], s));
            sumi[r][t] = _mm256_add_epi32(sumi[r][t], _mm256_madd_epi16(p, sc));
          }
        }
      }
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        const float d = h2f(a[r][i].d);
        DF_UNROLL
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[t][i].d), _mm256_cvtepi32_ps(sumi[r][t]), acc[r][t]);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) out[r * NT + t] = 0.25f * hsum8(acc[r][t]);
    }
  }
};

}  // namespace

void install_iq_avx2(TypeTraits* t) {
  install_iq_row<BlockIQ2_XXS, DotIq2xxs>(t[uint32_t(DType::IQ2_XXS)], Isa::AVX2);
  install_iq_row<BlockIQ2_XS, DotIq2xs>(t[uint32_t(DType::IQ2_XS)], Isa::AVX2);
  install_iq_row<BlockIQ3_XXS, DotIq3xxs>(t[uint32_t(DType::IQ3_XXS)], Isa::AVX2);
}

}  // namespace deltafin::kern
