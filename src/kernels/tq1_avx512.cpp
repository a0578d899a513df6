// AVX-512 (BW + VNNI) dot product of TQ1_0 against Q8_K: the digit bytes of
// tq1_x86.h, two 32-byte vectors per 512-bit one, give two unsigned comparison masks
// (digit 0 below 86, 2 from 171): the activations are kept where the digit is 2,
// negated where it is 0 and zeroed where it is 1, and vpdpbusd against ones sums
// them into int32; one float FMA per super-block.
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"
#include "kernels/tq1_x86.h"

namespace deltafin::kern {
namespace {

template <int NR, int NT>
struct DotTq1_512 {
  static void run(int64_t n, float* out, const BlockTQ1_0* const* a, const BlockQ8_K* const* y) {
    const __m512i ones8 = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    __m512 acc[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQK; ++i) {
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i v[8];
        tq1_digit_bytes(a[r][i], v);
        __m512i s32[NT];
        DF_UNROLL
        for (int t = 0; t < NT; ++t) s32[t] = _mm512_setzero_si512();
        DF_UNROLL
        for (int c = 0; c < 4; ++c) {
          const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(v[2 * c]), v[2 * c + 1], 1);
          const __mmask64 lo = _mm512_cmplt_epu8_mask(b, _mm512_set1_epi8(86));
          const __mmask64 hi = _mm512_cmpge_epu8_mask(b, _mm512_set1_epi8(char(171)));
          DF_UNROLL
          for (int t = 0; t < NT; ++t) {
            const __m512i q8 = _mm512_loadu_si512(y[t][i].qs + 64 * c);
            const __m512i s = _mm512_mask_sub_epi8(_mm512_maskz_mov_epi8(hi, q8), lo, zero, q8);
            s32[t] = _mm512_dpbusd_epi32(s32[t], ones8, s);
          }
        }
        const float d = h2f(a[r][i].d);
        DF_UNROLL
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(d * y[t][i].d), _mm512_cvtepi32_ps(s32[t]), acc[r][t]);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) out[r * NT + t] = _mm512_reduce_add_ps(acc[r][t]);
    }
  }
};

}  // namespace

void install_tq1_avx512(TypeTraits* t) {
  TypeTraits& r = t[uint32_t(DType::TQ1_0)];
  r.vec_dot = iq_one<BlockTQ1_0, DotTq1_512>;
  r.vec_dot_x4 = iq_x4<BlockTQ1_0, DotTq1_512>;
  r.vec_dot_r4 = iq_r4<BlockTQ1_0, DotTq1_512>;
  r.isa = Isa::AVX512;
}

}  // namespace deltafin::kern
