// AArch64 Advanced SIMD kernels of IQ2_S and IQ3_S (layouts in iq_grids.h) against
// Q8_K, single-row, x4 and r4. Each super-block is decoded into signed bytes: the
// codebook points gathered from the grid tables with scalar loads (at most 43 for
// IQ2_S, 15 for IQ3_S), negated where the run's free sign bit is set (a byte mask
// from vtst, then (g ^ m) - m), and the group's odd scale 2 ls + 1 per 16 values;
// then neon_common.h's dot_k sums exact integer products (SDOT where the build has
// it) and scales once per super-block, 1/8 for IQ2_S at the end, as ref_iq_s.cpp does.
#include <arm_neon.h>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::Decoded;

// Sixteen values: points g0, g1 (eight bytes each), value j of each negated where bit
// j of its sign byte s0 / s1 is set.
inline int8x16_t free_signed16(uint64_t g0, uint64_t g1, uint8_t s0, uint8_t s1) {
  static const uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(g0), vcreate_u64(g1)));
  const uint8x16_t s = vcombine_u8(vdup_n_u8(s0), vdup_n_u8(s1));
  const int8x16_t m = vreinterpretq_s8_u8(vtstq_u8(s, vld1q_u8(kBits)));
  return vsubq_s8(veorq_s8(g, m), m);
}

struct KIQ2_S {
  using Block = BlockIQ2_S;
  static constexpr float kOutScale = 0.125f;
  // Half h of 16: runs 2h and 2h + 1 (10-bit grid indices, sign bytes qs[32 + r]) and
  // the 4-bit scale code of scales[h / 2].
  static void decode(const Block& a, Decoded* d) {
    const uint64_t* grid = kIq2sGrid.data();
    for (int h = 0; h < 16; ++h) {
      const int r0 = 2 * h, r1 = 2 * h + 1;
      const int i0 = a.qs[r0] | (((a.qh[r0 / 4] >> (2 * (r0 % 4))) & 3) << 8);
      const int i1 = a.qs[r1] | (((a.qh[r1 / 4] >> (2 * (r1 % 4))) & 3) << 8);
      d->v[h] = free_signed16(grid[i0], grid[i1], a.qs[32 + r0], a.qs[32 + r1]);
      d->sc[h] = 2 * ((a.scales[h / 2] >> (4 * (h % 2))) & 15) + 1;
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

struct KIQ3_S {
  using Block = BlockIQ3_S;
  // Half h of group ib = h / 2: cells 4h..4h + 3 (9-bit grid indices of four values),
  // sign bytes signs[2h], signs[2h + 1]; the group's 4-bit scale code.
  static void decode(const Block& a, Decoded* d) {
    const uint32_t* grid = kIq3sGrid.data();
    for (int h = 0; h < 16; ++h) {
      uint32_t g[4];
      DF_UNROLL
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * h + k;
        g[k] = grid[a.qs[c] | (((a.qh[c / 8] >> (c % 8)) & 1) << 8)];
      }
      d->v[h] = free_signed16(g[0] | uint64_t(g[1]) << 32, g[2] | uint64_t(g[3]) << 32, a.signs[2 * h],
                              a.signs[2 * h + 1]);
      const int ib = h / 2;
      d->sc[h] = 2 * ((a.scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

}  // namespace

void DF_NEON_NAME(install_iq_s_neon)(TypeTraits* t) {
  auto set = [&]<class K>(DType type, K) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = neon::dot_k_1<K>;
    r.vec_dot_x4 = neon::dot_k_4<K>;
    r.vec_dot_r4 = neon::dot_k_r4<K>;
    r.isa = Isa::NEON;
  };
  set(DType::IQ2_S, KIQ2_S{});
  set(DType::IQ3_S, KIQ3_S{});
}

}  // namespace deltafin::kern
