// AArch64 Advanced SIMD kernels of the i-quants (IQ2_XXS, IQ2_XS, IQ3_XXS; layouts in
// iq_grids.h) against Q8_K, single-row, x4 and r4. Each super-block is decoded into
// signed bytes: the codebook points gathered from the grid tables with scalar loads,
// their signs applied as +1/-1 bytes (kEvenSignBytes; points are at most 62, so the
// product fits a byte), and the group's odd scale 2 ls + 1 per 16 values; then
// neon_common.h's dot_k sums exact integer products (SDOT where the build has it) and
// scales once per super-block, 1/8 (1/4 for IQ3_XXS) at the end, as ref_iq.cpp does.
#include <arm_neon.h>

#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::Decoded;

// Sixteen values: points g0, g1 (eight bytes each) times the sign bytes s0, s1.
inline int8x16_t signed16(uint64_t g0, uint64_t g1, uint64_t s0, uint64_t s1) {
  const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(g0), vcreate_u64(g1)));
  const int8x16_t s = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(s0), vcreate_u64(s1)));
  return vmulq_s8(g, s);
}

struct KIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static constexpr float kOutScale = 0.125f;
  // Group ib: word 0 four grid indices (runs of eight), word 1 four sign codes and ls.
  static void decode(const Block& a, Decoded* d) {
    const uint64_t* grid = kIq2xxsGrid.data();
    const uint64_t* signs = kEvenSignBytes.data();
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t w[2];
      std::memcpy(w, a.qs + 4 * ib, 8);
      for (int h = 0; h < 2; ++h) {
        const int l = 2 * h;
        d->v[2 * ib + h] = signed16(grid[(w[0] >> (8 * l)) & 255], grid[(w[0] >> (8 * l + 8)) & 255],
                                    signs[(w[1] >> (7 * l)) & 127], signs[(w[1] >> (7 * l + 7)) & 127]);
        d->sc[2 * ib + h] = int32_t(2 * (w[1] >> 28) + 1);
      }
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

struct KIQ2_XS {
  using Block = BlockIQ2_XS;
  static constexpr float kOutScale = 0.125f;
  // qs[c]: 9-bit grid index, 7-bit sign code, eight values; a 4-bit scale per 16.
  static void decode(const Block& a, Decoded* d) {
    const uint64_t* grid = kIq2xsGrid.data();
    const uint64_t* signs = kEvenSignBytes.data();
    for (int ig = 0; ig < 16; ++ig) {
      const uint16_t q0 = a.qs[2 * ig], q1 = a.qs[2 * ig + 1];
      d->v[ig] = signed16(grid[q0 & 511], grid[q1 & 511], signs[q0 >> 9], signs[q1 >> 9]);
      d->sc[ig] = 2 * ((a.scales[ig / 2] >> (4 * (ig % 2))) & 15) + 1;
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

struct KIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static constexpr float kOutScale = 0.25f;
  // Group ib: eight four-byte points qs[8ib + k], then word ib (byte 64 + 4ib) with
  // four sign codes (eight values each) and ls.
  static void decode(const Block& a, Decoded* d) {
    const uint32_t* grid = kIq3xxsGrid.data();
    const uint64_t* signs = kEvenSignBytes.data();
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t w;
      std::memcpy(&w, a.qs + 64 + 4 * ib, 4);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* q = a.qs + 8 * ib + 4 * h;
        const uint64_t g0 = grid[q[0]] | uint64_t(grid[q[1]]) << 32;
        const uint64_t g1 = grid[q[2]] | uint64_t(grid[q[3]]) << 32;
        d->v[2 * ib + h] = signed16(g0, g1, signs[(w >> (14 * h)) & 127], signs[(w >> (14 * h + 7)) & 127]);
        d->sc[2 * ib + h] = int32_t(2 * (w >> 28) + 1);
      }
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

}  // namespace

void DF_NEON_NAME(install_iq_neon)(TypeTraits* t) {
  auto set = [&]<class K>(DType type, K) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = neon::dot_k_1<K>;
    r.vec_dot_x4 = neon::dot_k_4<K>;
    r.vec_dot_r4 = neon::dot_k_r4<K>;
    r.isa = Isa::NEON;
  };
  set(DType::IQ2_XXS, KIQ2_XXS{});
  set(DType::IQ2_XS, KIQ2_XS{});
  set(DType::IQ3_XXS, KIQ3_XXS{});
}

}  // namespace deltafin::kern
