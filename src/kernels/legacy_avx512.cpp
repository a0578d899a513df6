// AVX-512 kernels of Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, TQ2_0 and the Q8_1 quantizer: legacy_x86.h's
// 256-bit kernels built with AVX512-VNNI/BW/VL (vpdpbusd for the byte dots, a mask
// move for the fifth bit of Q5_0/Q5_1), and IQ4_XS on 512-bit vectors below.
#include "kernels/iq_x86.h"
#include "kernels/kernels_impl.h"
#include "kernels/legacy_x86.h"

namespace deltafin::kern {
namespace {

// IQ4_XS against Q8_K, 64 values (sub-blocks 2c and 2c + 1) per vector: the levels'
// magnitudes, their signs as the mask that negates the activations, maddubs for the
// pair products and vpdpwssd for the 6-bit scales (per 256-bit half), so a token costs
// three instructions per 64 values where legacy_x86.h's dot_iq4_xs spends four with a
// vpmulld per 32. The two halves are added before the float step, which makes every
// int32 lane the sum legacy_x86.h forms (lane k: products 4k..4k+3 of each sub-block
// times its scale): the same bits as dot_iq4_xs, exactly (the sums are integers).
DF_ALWAYS_INLINE __m512i iq4xs_pair(const BlockIQ4_XS& b, int c, __mmask64* neg, __m512i* sc) {
  const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m512i codes =
      _mm512_inserti64x4(_mm512_castsi256_si512(unpack_nibbles16(b.qs + 32 * c)), unpack_nibbles16(b.qs + 32 * c + 16), 1);
  const __m512i q = _mm512_shuffle_epi8(lut, codes);
  *neg = _mm512_movepi8_mask(q);
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(iq4xs_scale(b, 2 * c)))),
                           _mm256_set1_epi16(short(iq4xs_scale(b, 2 * c + 1))), 1);
  return _mm512_abs_epi8(q);
}

template <int NR, int NT>
struct DotIq4xs512 {
  static void run(int64_t n, float* out, const BlockIQ4_XS* const* a, const BlockQ8_K* const* y) {
    iq512_dot<NR, NT, iq_d<BlockIQ4_XS>, iq4xs_pair, BlockIQ4_XS, true>(n, out, a, y, 1.0f);
  }
};

}  // namespace

void install_legacy_avx512(TypeTraits* t) {
  install_legacy_x86(t, Isa::AVX512);
  install_iq4_nl_avx512(t);
  install_iq_row<BlockIQ4_XS, DotIq4xs512>(t[uint32_t(DType::IQ4_XS)], Isa::AVX512);
}

}  // namespace deltafin::kern
