// AVX2 dot product of TQ1_0 against Q8_K: the digit bytes of tq1_x86.h become the
// digits t in {0, 1, 2} by two unsigned comparisons (a byte b leads with digit 0
// below 86, 1 below 171, else 2), vpmaddubsw multiplies them with the activations and
// sums pairs in int16 (eight vectors: at most 8 * 508), the bsums (the -1 of t - 1)
// come off the int16 lanes; one madd to int32 and one float FMA per super-block.
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"
#include "kernels/tq1_x86.h"

namespace deltafin::kern {
namespace {

inline __m256i tq1_digits(__m256i b) {
  const __m256i x = _mm256_xor_si256(b, _mm256_set1_epi8(char(0x80)));  // unsigned order as signed
  const __m256i ge86 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(85 - 128));
  const __m256i ge171 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(170 - 128));
  return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(ge86, ge171));
}

template <int NR, int NT>
struct DotTq1 {
  static void run(int64_t n, float* out, const BlockTQ1_0* const* a, const BlockQ8_K* const* y) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQK; ++i) {
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i v[8];
        tq1_digit_bytes(a[r][i], v);
        __m256i s16[NT];
        DF_UNROLL
        for (int t = 0; t < NT; ++t) s16[t] = _mm256_sub_epi16(_mm256_setzero_si256(), loadu256(y[t][i].bsums));
        DF_UNROLL
        for (int c = 0; c < 8; ++c) {
          const __m256i w = tq1_digits(v[c]);
          DF_UNROLL
          for (int t = 0; t < NT; ++t)
            s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(w, loadu256(y[t][i].qs + 32 * c)));
        }
        const float d = h2f(a[r][i].d);
        DF_UNROLL
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[t][i].d), _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[t], ones16)),
                                      acc[r][t]);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) out[r * NT + t] = hsum8(acc[r][t]);
    }
  }
};

}  // namespace

void install_tq1_avx2(TypeTraits* t) {
  TypeTraits& r = t[uint32_t(DType::TQ1_0)];
  r.vec_dot = iq_one<BlockTQ1_0, DotTq1>;
  r.vec_dot_x4 = iq_x4<BlockTQ1_0, DotTq1>;
  r.vec_dot_r4 = iq_r4<BlockTQ1_0, DotTq1>;
  r.isa = Isa::AVX2;
}

}  // namespace deltafin::kern
