// AArch64 Advanced SIMD kernels of IQ1_S and IQ1_M (layouts and codebook in
// iq_grids.h) against Q8_K, single-row, x4 and r4. Each super-block is decoded into
// signed bytes: the ternary codebook points gathered with scalar loads from the table
// of 8 g (bytes -8, 0, 8, kIq1sGrid8), each run's delta (+-1, the format's +-1/8 in
// units of 1/8) added bytewise, so each weight is the odd integer 8 g + delta
// (|.| <= 9) of the scalar reference (ref_iq1.cpp), with the scale 2 ls + 1 of its
// group (IQ1_S) or half of 16 (IQ1_M); then neon_common.h's dot_k sums exact integer
// products (SDOT where the build has it), one float product per super-block and 1/8
// at the end, as the reference does.
#include <arm_neon.h>

#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::Decoded;

// +1 / -1 in all eight bytes.
inline uint64_t delta_bytes(bool neg) { return neg ? ~0ULL : 0x0101010101010101ULL; }

// Two runs of eight: points 8 g of grid indices i0, i1 plus their deltas' bytes.
inline int8x16_t runs16(int i0, int i1, uint64_t d0, uint64_t d1) {
  const uint64_t* g8 = kIq1sGrid8.data();
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(g8[i0]), vcreate_u64(g8[i1])));
  const int8x16_t d = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(d0), vcreate_u64(d1)));
  return vaddq_s8(g, d);
}

struct KIQ1_S {
  using Block = BlockIQ1_S;
  static constexpr float kOutScale = 0.125f;
  // Group ib: runs l = 0..3 with index qs[4ib + l] | bits 3l..3l+2 of qh[ib] << 8; the
  // scale code at bits 12..14, the delta sign at bit 15.
  static void decode(const Block& a, Decoded* d) {
    for (int ib = 0; ib < 8; ++ib) {
      const int h = a.qh[ib];
      const uint8_t* q = a.qs + 4 * ib;
      const uint64_t delta = delta_bytes(h & 0x8000);
      d->v[2 * ib] = runs16(q[0] | (h << 8 & 0x700), q[1] | (h << 5 & 0x700), delta, delta);
      d->v[2 * ib + 1] = runs16(q[2] | (h << 2 & 0x700), q[3] | (h >> 1 & 0x700), delta, delta);
      d->sc[2 * ib] = d->sc[2 * ib + 1] = 2 * ((h >> 12) & 7) + 1;
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

struct KIQ1_M {
  using Block = BlockIQ1_M;
  static constexpr float kOutScale = 0.125f;
  // Half h: runs 2h, 2h + 1 with indices qs[2h], qs[2h + 1] and, in qh[h], high bits
  // 0..2 / 4..6 and delta signs at bits 3 / 7; the 3-bit scale code of half h in
  // scale word h / 4.
  static void decode(const Block& a, Decoded* d) {
    uint16_t w[4];
    std::memcpy(w, a.scales, 8);
    for (int h = 0; h < 16; ++h) {
      const int qh = a.qh[h];
      d->v[h] = runs16(a.qs[2 * h] | (qh << 8 & 0x700), a.qs[2 * h + 1] | (qh << 4 & 0x700), delta_bytes(qh & 0x08),
                       delta_bytes(qh & 0x80));
      d->sc[h] = 2 * ((w[h / 4] >> (3 * (h % 4))) & 7) + 1;
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) {
    return neon::h2f(iq1m_d(a)) * b.d * float(isum);
  }
};

}  // namespace

void DF_NEON_NAME(install_iq1_neon)(TypeTraits* t) {
  auto set = [&]<class K>(DType type, K) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = neon::dot_k_1<K>;
    r.vec_dot_x4 = neon::dot_k_4<K>;
    r.vec_dot_r4 = neon::dot_k_r4<K>;
    r.isa = Isa::NEON;
  };
  set(DType::IQ1_S, KIQ1_S{});
  set(DType::IQ1_M, KIQ1_M{});
}

}  // namespace deltafin::kern
