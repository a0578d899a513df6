// NEON kernels over Q4_K and Q5_K row panels (panels_impl.h PanelQ4Kx8, PanelQ5Kx8),
// built plain and with the dot-product extension (neon_common.h), with the bits of the
// scalar reference (panels.h) as the x86 ones (panels_q4k_x86.h).
//
// A panel piece is two vectors, rows 0-3 and rows 4-7, four codes of each row side by
// side (low nibbles: sub-block 2q, high: 2q + 1). SDOT's lane form adds each row's four
// products with four activation values into a lane of its own, so a sub-block's eight
// pieces leave each row's exact sum in a lane, and one multiply-add by the four rows'
// scales follows: one per 32 values of four rows, where the row kernels multiply per
// row and 16 values. The mins: eight multiply-adds per four rows and token.
#include "kernels/neon_common.h"
#include "kernels/panels_impl.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>

namespace deltafin::kern::neon {
inline namespace DF_NEON_VARIANT {
namespace {

// Activation rows for these kernels: the Q8_K blocks, then per block the eight
// sub-block sums (int16) that the mins multiply: the layout of x86's prep_q8k_pairs.
size_t prep_bytes_q8k_sums(int64_t n) { return size_t(n / kQK) * (sizeof(BlockQ8_K) + 16); }
void prep_q8k_sums(int64_t n, void* dst, const void* x) {
  const int64_t nb = n / kQK;
  const auto* b = static_cast<const BlockQ8_K*>(x);
  std::memcpy(dst, b, size_t(nb) * sizeof(BlockQ8_K));
  auto* sums = reinterpret_cast<int16_t*>(static_cast<uint8_t*>(dst) + size_t(nb) * sizeof(BlockQ8_K));
  for (int64_t i = 0; i < nb; ++i) {
    const int16x8x2_t v = vld2q_s16(b[i].bsums);  // even and odd sums of 16
    vst1q_s16(sums + 8 * i, vaddq_s16(v.val[0], v.val[1]));
  }
}
template <int NT>
struct Acts {
  const BlockQ8_K* b[NT];
  const int16_t* s[NT];
  Acts(const void* const* xp, int64_t n) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      b[t] = static_cast<const BlockQ8_K*>(xp[t]);
      s[t] = reinterpret_cast<const int16_t*>(b[t] + n / kQK);
    }
  }
};

// Four rows' (half h of a panel block) scales and mins: byte j of lane r holds row
// r's value of sub-block j (sc[0], m[0]) or j + 4 (sc[1], m[1]).
struct HalfScales {
  uint32x4_t sc[2], m[2];
  template <class Panel>
  HalfScales(const Panel& p, int h) {
    const uint8x16_t lo = vld1q_u8(p.sclo + 16 * h), ml = vld1q_u8(p.mlo + 16 * h), hi = vld1q_u8(p.hi + 16 * h);
    const uint8x16_t m15 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    sc[0] = vreinterpretq_u32_u8(vorrq_u8(vandq_u8(lo, m15), vshlq_n_u8(vandq_u8(hi, m3), 4)));
    sc[1] = vreinterpretq_u32_u8(vorrq_u8(vshrq_n_u8(lo, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hi, 2), m3), 4)));
    m[0] = vreinterpretq_u32_u8(vorrq_u8(vandq_u8(ml, m15), vandq_u8(hi, vdupq_n_u8(0x30))));
    m[1] = vreinterpretq_u32_u8(vorrq_u8(vshrq_n_u8(ml, 4), vshlq_n_u8(vshrq_n_u8(hi, 6), 4)));
  }
  // Sub-block J's values of the four rows as int32, from sc or m.
  template <int J>
  static int32x4_t pick(const uint32x4_t* v) {
    if constexpr (J % 4 == 0) return vreinterpretq_s32_u32(vandq_u32(v[J / 4], vdupq_n_u32(255)));
    else return vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(v[J / 4], 8 * (J % 4)), vdupq_n_u32(255)));
  }
};

// Sub-block J (both halves) of one panel block against NT tokens: isum[t][h] +=
// scale * (codes . y).
template <int Bits, int NT, int J>
inline void sub_block(const PanelQ45Kx8<Bits>& p, const Acts<NT>& x, int64_t i, const HalfScales* s,
                      int32x4_t (*isum)[2]) {
  constexpr int q = J / 2, hi = J % 2;
  int8x16_t y[NT][2];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    y[t][0] = vld1q_s8(x.b[t][i].qs + 32 * J);
    y[t][1] = vld1q_s8(x.b[t][i].qs + 32 * J + 16);
  }
  int32x4_t part[NT][2];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) part[t][0] = part[t][1] = vdupq_n_s32(0);
  [&]<int... K>(std::integer_sequence<int, K...>) {
    (
        [&] {
          constexpr int k = K;
          DF_UNROLL
          for (int h = 0; h < 2; ++h) {
            const uint8x16_t raw = vld1q_u8(p.qs + 256 * q + 32 * k + 16 * h);
            uint8x16_t w = hi ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(15));
            if constexpr (Bits == 5) {
              const uint8x16_t qh = vld1q_u8(p.qh + 32 * k + 16 * h);
              w = vorrq_u8(w, vandq_u8(vtstq_u8(qh, vdupq_n_u8(uint8_t(1u << J))), vdupq_n_u8(16)));
            }
            DF_UNROLL
            for (int t = 0; t < NT; ++t)
              part[t][h] = dot_lane<k % 4>(part[t][h], vreinterpretq_s8_u8(w), y[t][k / 4]);
          }
        }(),
        ...);
  }(std::make_integer_sequence<int, 8>{});
  DF_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int32x4_t sc = HalfScales::pick<J>(s[h].sc);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) isum[t][h] = vmlaq_s32(isum[t][h], part[t][h], sc);
  }
}

// out[t * 8 + r] = dot(panel row r, x[t]) for NT tokens prepared by prep_q8k_sums.
template <int Bits, int NT>
void panel_dot_q45k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const PanelQ45Kx8<Bits>*>(w);
  const Acts<NT> x(xp, n);
  float32x4_t acc[NT][2];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const PanelQ45Kx8<Bits>& p = a[i];
    const HalfScales s[2] = {HalfScales(p, 0), HalfScales(p, 1)};
    int32x4_t isum[NT][2], msum[NT][2];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const int16x8_t sums = vld1q_s16(x.s[t] + 8 * i);
      const int32x4_t s03 = vmovl_s16(vget_low_s16(sums)), s47 = vmovl_high_s16(sums);
      DF_UNROLL
      for (int h = 0; h < 2; ++h) {
        const uint32x4_t* m = s[h].m;
        int32x4_t v = vmulq_laneq_s32(HalfScales::pick<0>(m), s03, 0);
        v = vmlaq_laneq_s32(v, HalfScales::pick<1>(m), s03, 1);
        v = vmlaq_laneq_s32(v, HalfScales::pick<2>(m), s03, 2);
        v = vmlaq_laneq_s32(v, HalfScales::pick<3>(m), s03, 3);
        v = vmlaq_laneq_s32(v, HalfScales::pick<4>(m), s47, 0);
        v = vmlaq_laneq_s32(v, HalfScales::pick<5>(m), s47, 1);
        v = vmlaq_laneq_s32(v, HalfScales::pick<6>(m), s47, 2);
        msum[t][h] = vmlaq_laneq_s32(v, HalfScales::pick<7>(m), s47, 3);
        isum[t][h] = vdupq_n_s32(0);
      }
    }
    [&]<int... J>(std::integer_sequence<int, J...>) {
      (sub_block<Bits, NT, J>(p, x, i, s, isum), ...);
    }(std::make_integer_sequence<int, 8>{});
    const float32x4_t d[2] = {scales4(p.d), scales4(p.d + 4)}, dm[2] = {scales4(p.dmin), scales4(p.dmin + 4)};
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const float32x4_t dx = vdupq_n_f32(x.b[t][i].d);
      DF_UNROLL
      for (int h = 0; h < 2; ++h) {
        acc[t][h] = vfmaq_f32(acc[t][h], vmulq_f32(d[h], dx), vcvtq_f32_s32(isum[t][h]));
        acc[t][h] = vfmsq_f32(acc[t][h], vmulq_f32(dm[h], dx), vcvtq_f32_s32(msum[t][h]));
      }
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    vst1q_f32(out + 8 * t, acc[t][0]);
    vst1q_f32(out + 8 * t + 4, acc[t][1]);
  }
}

// One row in the file's order with panel_dot_q45k's bits: each super-block decoded as
// the row kernels do (decode_k4), its two exact integers, then the reference's two
// float steps.
template <int Bits, int NT>
void row_dot_q45k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockQ45K<Bits>*>(w);
  const Acts<NT> x(xp, n);
  float acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  Decoded dec;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const BlockQ45K<Bits>& blk = a[i];
    if constexpr (Bits == 5) decode_k4(blk, &dec, blk.qh);
    else decode_k4(blk, &dec, nullptr);
    uint8_t sc[8], m[8];
    unpack_scales_k4(blk.scales, sc, m);
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
    const float d = h2f(blk.d), dmin = h2f(blk.dmin);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const int isum = isum_of(dec, x.b[t][i].qs);
      const int16x8_t sums = vld1q_s16(x.s[t] + 8 * i);
      const int msum = vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(mins), vget_low_s16(sums)), mins, sums));
      const float dx = x.b[t][i].d;
      acc[t] = std::fma(d * dx, float(isum), acc[t]);
      acc[t] = std::fma(-(dmin * dx), float(msum), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// The conversion (panels.cpp pack_q45kx8 gives the bytes): four rows' 16-byte runs of
// codes (and fifth bits) transposed by 4-byte words give four pieces' halves; the
// scales and mins go through the scalar helper.
template <int Bits>
void pack_q45kx8(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  using Block = BlockQ45K<Bits>;
  auto* p = reinterpret_cast<PanelQ45Kx8<Bits>*>(out);
  const auto transpose = [&](const uint8_t* b, size_t off, int groups, uint8_t* dst) {
    for (int half = 0; half < 2; ++half)
      for (int g = 0; g < groups; ++g) {
        uint32x4_t v[4];
        DF_UNROLL
        for (int j = 0; j < 4; ++j)
          v[j] = vreinterpretq_u32_u8(vld1q_u8(b + size_t(4 * half + j) * row_bytes + off + 16 * g));
        const uint32x4_t t0 = vtrn1q_u32(v[0], v[1]), t1 = vtrn2q_u32(v[0], v[1]);
        const uint32x4_t t2 = vtrn1q_u32(v[2], v[3]), t3 = vtrn2q_u32(v[2], v[3]);
        const auto u64 = [](uint32x4_t z) { return vreinterpretq_u64_u32(z); };
        const uint64x2_t w[4] = {vtrn1q_u64(u64(t0), u64(t2)), vtrn1q_u64(u64(t1), u64(t3)),
                                 vtrn2q_u64(u64(t0), u64(t2)), vtrn2q_u64(u64(t1), u64(t3))};
        DF_UNROLL
        for (int k = 0; k < 4; ++k) vst1q_u8(dst + 32 * (4 * g + k) + 16 * half, vreinterpretq_u8_u64(w[k]));
      }
  };
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = rows + size_t(i) * sizeof(Block);
    transpose(b, offsetof(Block, qs), 8, p[i].qs);
    if constexpr (Bits == 5) transpose(b, offsetof(Block, qh), 2, p[i].qh);
    for (int r = 0; r < 8; ++r) {
      const uint8_t* row = b + size_t(r) * row_bytes;
      std::memcpy(&p[i].d[r], row, 2);
      std::memcpy(&p[i].dmin[r], row + 2, 2);
      q45k_panel_put_scales(p[i], r, row + offsetof(Block, scales));
    }
  }
}

template <int Bits>
void set_panels_q45k(TypeTraits& r) {
  r.panel_prep_bytes = prep_bytes_q8k_sums;
  r.panel_prep = prep_q8k_sums;
  r.panel_dot = one_token<panel_dot_q45k<Bits, 1>>;
  r.panel_dot_x4 = panel_dot_q45k<Bits, 4>;
  r.panel_rows = one_token<row_dot_q45k<Bits, 1>>;
  r.panel_rows_x4 = row_dot_q45k<Bits, 4>;
  r.panel_pack = pack_q45kx8<Bits>;
}

}  // namespace
}  // namespace DF_NEON_VARIANT
}  // namespace deltafin::kern::neon

namespace deltafin::kern {

void DF_NEON_NAME(install_panels_q4k_neon)(TypeTraits* t) {
  using namespace neon;
  set_panels_q45k<4>(t[uint32_t(DType::Q4_K)]);
  set_panels_q45k<5>(t[uint32_t(DType::Q5_K)]);
}

}  // namespace deltafin::kern
