// AArch64 Advanced SIMD kernels of the ternary TQ1_0 (layout in blocks_legacy.h)
// against Q8_K, single-row, x4 and r4. A packed byte b read as a base-3 fraction
// leads with one element's digit, and b * 3 (mod 256) with the next one's, so the
// digit bytes of a super-block are its packed bytes times 3^k (vmulq_u8); a byte
// leads with digit 0 below 86, 1 below 171, else 2, so two unsigned comparisons give
// the value t - 1 in {-1, 0, 1}. Then neon_common.h's dot_k sums the exact integer
// products (SDOT where the build has it) and float(isum) * (d * d_x) per super-block,
// as ref_tq1.cpp does.
#include <arm_neon.h>

#include <cstring>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/iq_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::Decoded;

// t - 1 for the leading digit of each byte: -1 + (b >= 86) + (b >= 171).
inline int8x16_t tq1_values(uint8x16_t b) {
  const int8x16_t ge86 = vreinterpretq_s8_u8(vcgeq_u8(b, vdupq_n_u8(86)));    // 0 or -1
  const int8x16_t ge171 = vreinterpretq_s8_u8(vcgeq_u8(b, vdupq_n_u8(171)));  // 0 or -1
  return vsubq_s8(vsubq_s8(vdupq_n_s8(-1), ge86), ge171);
}

struct KTQ1_0 {
  using Block = BlockTQ1_0;
  // Elements 32k + m (k < 5): qs[m] times 3^k; 160 + 16k + m: qs[32 + m] times 3^k;
  // 240 + 4k + j (k < 4): qh[j] times 3^k.
  static void decode(const Block& a, Decoded* d) {
    uint8x16_t lo = vld1q_u8(a.qs), hi = vld1q_u8(a.qs + 16), mid = vld1q_u8(a.qs + 32);
    for (int k = 0; k < 5; ++k) {
      d->v[2 * k] = tq1_values(lo);
      d->v[2 * k + 1] = tq1_values(hi);
      d->v[10 + k] = tq1_values(mid);
      lo = vmulq_u8(lo, vdupq_n_u8(3));
      hi = vmulq_u8(hi, vdupq_n_u8(3));
      mid = vmulq_u8(mid, vdupq_n_u8(3));
    }
    static const uint8_t kPow3[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    uint32_t h;
    std::memcpy(&h, a.qh, 4);
    d->v[15] = tq1_values(vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(h)), vld1q_u8(kPow3)));
    DF_UNROLL
    for (int k = 0; k < 16; ++k) d->sc[k] = 1;
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return float(isum) * (neon::h2f(a.d) * b.d); }
};

}  // namespace

void DF_NEON_NAME(install_tq1_neon)(TypeTraits* t) {
  TypeTraits& r = t[uint32_t(DType::TQ1_0)];
  r.vec_dot = neon::dot_k_1<KTQ1_0>;
  r.vec_dot_x4 = neon::dot_k_4<KTQ1_0>;
  r.vec_dot_r4 = neon::dot_k_r4<KTQ1_0>;
  r.isa = Isa::NEON;
}

}  // namespace deltafin::kern
