// NEON kernels over row panels (panels.h) of Q8_0 and the 4-bit types (Q4_0, IQ4_NL,
// MXFP4), built plain and with the dot-product extension (neon_common.h).
//
// A panel block's 32-byte piece is two vectors: rows 0-3 and rows 4-7, four values of
// each row side by side. SDOT's lane form multiplies such a vector by one four-byte
// lane of the activation (the same four values for every row) and adds each row's
// four products into a lane of its own; without SDOT, widening multiplies and two
// pairwise adds leave the same sums in the same lanes. A block's eight exact integers
// then take one convert and one FMA per four rows. Weights and activations stay
// signed (no offset: panel_prep<0>), so every build gives the reference's bits. The
// conversion to panels (pack_q4x8, pack_q8x8) transposes four rows' words at a time.
#include "kernels/neon_common.h"
#include "kernels/panels_impl.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

namespace deltafin::kern::neon {
inline namespace DF_NEON_VARIANT {
namespace {

// How a type's panel blocks become signed byte vectors. `dots<NT>` adds a panel
// block's products with NT tokens (y[t][0]: values 0..15, y[t][1]: 16..31) into
// isum[t][0] (rows 0-3) and isum[t][1] (rows 4-7); `row` gives a file block's values
// 0..15 and 16..31.
template <const int8_t (&Levels)[16], class S>
struct Nibbles {
  using Scale = S;
  using Panel = PanelQ4x8T<S>;
  static constexpr size_t kBlockBytes = sizeof(S) + 16;
  int8x16_t lut;
  Nibbles() { lut = vld1q_s8(Levels); }
  // Piece k: low nibbles hold values 8k..8k+3 (y lane 2(k % 2) of half k / 2), high
  // nibbles 8k+4..8k+7 (the next lane).
  template <int NT, int k>
  void piece(const Panel& p, const int8x16_t (*y)[2], int32x4_t (*isum)[2]) const {
    const uint8x16_t a = vld1q_u8(p.qs + 32 * k), b = vld1q_u8(p.qs + 32 * k + 16), m = vdupq_n_u8(15);
    const int8x16_t alo = vqtbl1q_s8(lut, vandq_u8(a, m)), blo = vqtbl1q_s8(lut, vandq_u8(b, m));
    const int8x16_t ahi = vqtbl1q_s8(lut, vshrq_n_u8(a, 4)), bhi = vqtbl1q_s8(lut, vshrq_n_u8(b, 4));
    constexpr int h = k / 2, L = 2 * (k % 2);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      isum[t][0] = dot_lane<L + 1>(dot_lane<L>(isum[t][0], alo, y[t][h]), ahi, y[t][h]);
      isum[t][1] = dot_lane<L + 1>(dot_lane<L>(isum[t][1], blo, y[t][h]), bhi, y[t][h]);
    }
  }
  template <int NT>
  void dots(const Panel& p, const int8x16_t (*y)[2], int32x4_t (*isum)[2]) const {
    [&]<int... k>(std::integer_sequence<int, k...>) {
      (piece<NT, k>(p, y, isum), ...);
    }(std::make_integer_sequence<int, 4>{});
  }
  void row(const uint8_t* qs, int8x16_t* lo, int8x16_t* hi) const {
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vqtbl1q_s8(lut, vandq_u8(q, vdupq_n_u8(15)));
    *hi = vqtbl1q_s8(lut, vshrq_n_u8(q, 4));
  }
};
struct Bytes {
  using Scale = uint16_t;
  using Panel = PanelQ8x8;
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  // Piece k: values 4k..4k+3 (y lane k % 4 of half k / 4).
  template <int NT, int k>
  void piece(const Panel& p, const int8x16_t (*y)[2], int32x4_t (*isum)[2]) const {
    const int8x16_t a = vld1q_s8(p.qs + 32 * k), b = vld1q_s8(p.qs + 32 * k + 16);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      isum[t][0] = dot_lane<k % 4>(isum[t][0], a, y[t][k / 4]);
      isum[t][1] = dot_lane<k % 4>(isum[t][1], b, y[t][k / 4]);
    }
  }
  template <int NT>
  void dots(const Panel& p, const int8x16_t (*y)[2], int32x4_t (*isum)[2]) const {
    [&]<int... k>(std::integer_sequence<int, k...>) {
      (piece<NT, k>(p, y, isum), ...);
    }(std::make_integer_sequence<int, 8>{});
  }
  void row(const uint8_t* qs, int8x16_t* lo, int8x16_t* hi) const {
    *lo = vld1q_s8(reinterpret_cast<const int8_t*>(qs));
    *hi = vld1q_s8(reinterpret_cast<const int8_t*>(qs) + 16);
  }
};

// out[t * 8 + r] = dot(panel row r, x[t]) for NT prepared tokens (panels.h's order).
template <class W, int NT>
void panel_dot(int64_t n, float* out, const void* w, const void* const* xp) {
  const W fmt;
  const auto* a = static_cast<const typename W::Panel*>(w);
  const int64_t nb = n / kQ32;
  const PanelActs<NT> x(xp, nb);
  float32x4_t acc[NT][2];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < nb; ++i) {
    int8x16_t y[NT][2];
    int32x4_t isum[NT][2];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      y[t][0] = vld1q_s8(reinterpret_cast<const int8_t*>(x[t].y) + 32 * i);
      y[t][1] = vld1q_s8(reinterpret_cast<const int8_t*>(x[t].y) + 32 * i + 16);
      isum[t][0] = isum[t][1] = vdupq_n_s32(0);
    }
    fmt.template dots<NT>(a[i], y, isum);
    const float32x4_t d0 = scales4(a[i].d), d1 = scales4(a[i].d + 4);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const float32x4_t dy = vdupq_n_f32(x[t].d[i]);
      acc[t][0] = vfmaq_f32(acc[t][0], vmulq_f32(d0, dy), vcvtq_f32_s32(isum[t][0]));
      acc[t][1] = vfmaq_f32(acc[t][1], vmulq_f32(d1, dy), vcvtq_f32_s32(isum[t][1]));
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    vst1q_f32(out + 8 * t, acc[t][0]);
    vst1q_f32(out + 8 * t + 4, acc[t][1]);
  }
}

// One row in the file's order with panel_dot's bits (panels_x86.h's row_dot): eight
// blocks' exact integers folded into two vectors, then the float steps block after
// block.
template <class W, int NT>
void row_dot(int64_t n, float* out, const void* w, const void* const* xp) {
  constexpr size_t kBlock = W::kBlockBytes;
  using Scale = typename W::Scale;
  const W fmt;
  const auto* a = static_cast<const uint8_t*>(w);
  const int64_t nb = n / kQ32;
  const PanelActs<NT> x(xp, nb);
  float acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  auto block_sum = [](int8x16_t lo, int8x16_t hi, const uint8_t* y) {
    const auto* ys = reinterpret_cast<const int8_t*>(y);
    return dot_i8(dot_i8(vdupq_n_s32(0), lo, vld1q_s8(ys)), hi, vld1q_s8(ys + 16));
  };
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    int8x16_t q[8][2];
    Scale d[8];
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      const uint8_t* blk = a + size_t(i + k) * kBlock;
      std::memcpy(&d[k], blk, sizeof(Scale));
      fmt.row(blk + sizeof(Scale), &q[k][0], &q[k][1]);
    }
    const float32x4_t dw0 = scales4(d), dw1 = scales4(d + 4);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      int32x4_t p[8];
      DF_UNROLL
      for (int k = 0; k < 8; ++k) p[k] = block_sum(q[k][0], q[k][1], x[t].y + 32 * (i + k));
      const int32x4_t s0 = vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
      const int32x4_t s1 = vpaddq_s32(vpaddq_s32(p[4], p[5]), vpaddq_s32(p[6], p[7]));
      float m[8], f[8];
      vst1q_f32(m, vmulq_f32(dw0, vld1q_f32(x[t].d + i)));
      vst1q_f32(m + 4, vmulq_f32(dw1, vld1q_f32(x[t].d + i + 4)));
      vst1q_f32(f, vcvtq_f32_s32(s0));
      vst1q_f32(f + 4, vcvtq_f32_s32(s1));
      DF_UNROLL
      for (int k = 0; k < 8; ++k) acc[t] = std::fma(m[k], f[k], acc[t]);
    }
  }
  for (; i < nb; ++i) {
    const uint8_t* blk = a + size_t(i) * kBlock;
    Scale d;
    std::memcpy(&d, blk, sizeof(Scale));
    int8x16_t lo, hi;
    fmt.row(blk + sizeof(Scale), &lo, &hi);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const int isum = vaddvq_s32(block_sum(lo, hi, x[t].y + 32 * i));
      acc[t] = std::fma(panel_scale(d) * x[t].d[i], float(isum), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// The conversion to panels (types.h panel_pack; panels.cpp pack_q4x8 and pack_q8x8
// give the bytes): one 4-byte word of every row makes a panel piece, so four rows'
// 16 bytes, transposed by words, give four pieces' halves (rows 0-3 or 4-7).
inline void transpose_words(uint32x4_t* v) {
  const uint32x4_t t0 = vtrn1q_u32(v[0], v[1]), t1 = vtrn2q_u32(v[0], v[1]);
  const uint32x4_t t2 = vtrn1q_u32(v[2], v[3]), t3 = vtrn2q_u32(v[2], v[3]);
  v[0] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
  v[1] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
  v[2] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
  v[3] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
}
// Rows r0..r0+3 of a block, 16 bytes from `off`, as four words each, transposed.
inline void load_words(const uint8_t* b, size_t row_bytes, size_t off, uint32x4_t* v) {
  DF_UNROLL
  for (int j = 0; j < 4; ++j) v[j] = vreinterpretq_u32_u8(vld1q_u8(b + size_t(j) * row_bytes + off));
  transpose_words(v);
}
template <class Scale>
void pack_q4x8(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  constexpr size_t kBlock = sizeof(Scale) + 16;
  auto* p = reinterpret_cast<PanelQ4x8T<Scale>*>(out);
  const uint8x16_t lo = vdupq_n_u8(15);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = rows + size_t(i) * kBlock;
    DF_UNROLL
    for (int r = 0; r < 8; ++r) std::memcpy(&p[i].d[r], b + size_t(r) * row_bytes, sizeof(Scale));
    DF_UNROLL
    for (int half = 0; half < 2; ++half) {  // rows 4 half .. 4 half + 3
      uint32x4_t w[4];
      load_words(b + size_t(4 * half) * row_bytes, row_bytes, sizeof(Scale), w);
      const uint8x16_t w0 = vreinterpretq_u8_u32(w[0]), w1 = vreinterpretq_u8_u32(w[1]);
      const uint8x16_t w2 = vreinterpretq_u8_u32(w[2]), w3 = vreinterpretq_u8_u32(w[3]);
      uint8_t* q = p[i].qs + 16 * half;
      vst1q_u8(q, vsliq_n_u8(vandq_u8(w0, lo), w1, 4));
      vst1q_u8(q + 32, vsliq_n_u8(vandq_u8(w2, lo), w3, 4));
      vst1q_u8(q + 64, vsriq_n_u8(w1, w0, 4));
      vst1q_u8(q + 96, vsriq_n_u8(w3, w2, 4));
    }
  }
}
void pack_q8x8(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  auto* p = reinterpret_cast<PanelQ8x8*>(out);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = rows + size_t(i) * sizeof(BlockQ8_0);
    DF_UNROLL
    for (int r = 0; r < 8; ++r) std::memcpy(&p[i].d[r], b + size_t(r) * row_bytes, sizeof(uint16_t));
    DF_UNROLL
    for (int half = 0; half < 2; ++half) {
      DF_UNROLL
      for (int h = 0; h < 2; ++h) {  // words 4h..4h+3 of each row: pieces 4h..4h+3
        uint32x4_t w[4];
        load_words(b + size_t(4 * half) * row_bytes, row_bytes, 2 + 16 * h, w);
        DF_UNROLL
        for (int k = 0; k < 4; ++k) vst1q_u8(reinterpret_cast<uint8_t*>(p[i].qs) + 32 * (4 * h + k) + 16 * half,
                                             vreinterpretq_u8_u32(w[k]));
      }
    }
  }
}

template <class W>
void set_panels(TypeTraits& r) {
  set_panel_kernels<0, panel_dot<W, 1>, panel_dot<W, 4>, row_dot<W, 1>, row_dot<W, 4>>(r);
  if constexpr (std::is_same_v<typename W::Panel, PanelQ8x8>) r.panel_pack = pack_q8x8;
  else r.panel_pack = pack_q4x8<typename W::Scale>;
}

}  // namespace
}  // namespace DF_NEON_VARIANT
}  // namespace deltafin::kern::neon

namespace deltafin::kern {

void DF_NEON_NAME(install_panels_neon)(TypeTraits* t) {
  using namespace neon;
  set_panels<Bytes>(t[uint32_t(DType::Q8_0)]);
  set_panels<Nibbles<kQ4_0Levels, uint16_t>>(t[uint32_t(DType::Q4_0)]);
  set_panels<Nibbles<kIq4nlValues, uint16_t>>(t[uint32_t(DType::IQ4_NL)]);
  set_panels<Nibbles<kMxfp4Values, uint8_t>>(t[uint32_t(DType::MXFP4)]);
}

}  // namespace deltafin::kern
