// Pieces the AArch64 kernel files share (*_neon.cpp): the signed-byte dot step and its
// lane form for the panel kernels, the dot of a 32-value weight block type against its
// activation blocks, and that of a 256-value super-block type against Q8_K (below).
// Included only by *_neon.cpp files.
//
// Every *_neon.cpp is compiled twice (CMakeLists.txt): as plain Advanced SIMD, and with
// the dot-product extension and DELTAFIN_NEON_SDOT defined. DF_NEON_NAME gives each
// build's installers their own names (install_neon / install_neon_sdot), and the inline
// namespace keeps this header's inline functions of the two builds apart, so the
// linker never hands a CPU without SDOT a copy compiled with it.
//
// A decoder `Dec` names its Block, decodes a block's 32 values into two vectors of 16
// signed bytes (q) and gives its scale (d); Dec::Act, if present, is the activation
// block type (default Q8_0). Blocks with an offset m (Q4_1, Q5_1, against Q8_1) add
// m * s per block to a scalar sum beside the vector accumulator.
#pragma once
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/kernels_impl.h"

#if defined(DELTAFIN_NEON_SDOT)
#define DF_NEON_NAME(f) f##_sdot
#define DF_NEON_VARIANT sdot
#else
#define DF_NEON_NAME(f) f
#define DF_NEON_VARIANT plain
#endif

namespace deltafin::kern::neon {
inline namespace DF_NEON_VARIANT {

// fp16 -> float by the FP unit (one FCVT), exact as fp16_to_f32 (blocks.h), whose
// portable bit manipulation costs a dozen instructions and a branch per scale.
inline float h2f(uint16_t h) {
  __fp16 x;
  std::memcpy(&x, &h, sizeof x);
  return float(x);
}

// acc + four-way sums of products of signed bytes (lane i: a[4i..4i+3] . b[4i..4i+3]
// with SDOT; pairwise-widened sums otherwise, which total the same).
inline int32x4_t dot_i8(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  int16x8_t hi = vmull_high_s8(a, b);
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
#endif
}

// For the panel kernels (panels_neon.cpp, panels_q4k_neon.cpp): acc + lane r: w's
// bytes 4r..4r+3 dotted with y's four bytes of lane L. Without SDOT the products'
// int16 pair sums stay below 2 x 128 x 127 (activations are within +-127).
template <int L>
inline int32x4_t dot_lane(int32x4_t acc, int8x16_t w, int8x16_t y) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_laneq_s32(acc, w, y, L);
#else
  const int8x16_t b = vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(y), L));
  const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(b));
  const int16x8_t hi = vmull_high_s8(w, b);
  return vpadalq_s16(acc, vpaddq_s16(lo, hi));
#endif
}

// Four scales as floats: fp16, or MXFP4's 2^(e - 128) as e8m0_half_to_f32.
inline float32x4_t scales4(const uint16_t* d) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(d))); }
inline float32x4_t scales4(const uint8_t* e) {
  const uint32x4_t ev = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(uint64_t(e[0]) | uint64_t(e[1]) << 8 |
                                                                     uint64_t(e[2]) << 16 | uint64_t(e[3]) << 24))));
  const uint32x4_t normal = vshlq_n_u32(vsubq_u32(ev, vdupq_n_u32(1)), 23);
  const uint32x4_t tiny = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(ev));
  return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(ev, vdupq_n_u32(2)), tiny, normal));
}

template <class Dec>
struct ActOf {
  using type = BlockQ8_0;
};
template <class Dec>
  requires requires { typename Dec::Act; }
struct ActOf<Dec> {
  using type = typename Dec::Act;
};

// out[t] = dot(w, x[t]) for NT activation rows: one float accumulator per row, and
// for offset blocks a scalar sum of m * s added at the end.
template <class Dec, int NT>
void dot_q32(int64_t n, float* out, const void* w, const void* const* xp) {
  using Block = typename Dec::Block;
  using Act = typename ActOf<Dec>::type;
  constexpr bool kOffset = requires(const Block& blk) { blk.m; };
  const auto* a = static_cast<const Block*>(w);
  const Act* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const Act*>(xp[t]);
  float32x4_t acc[NT];
  float accm[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = vdupq_n_f32(0.0f), accm[t] = 0.0f;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int8x16_t lo, hi;
    Dec::q(a[i], &lo, &hi);
    const float da = Dec::d(a[i]);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      int32x4_t s = dot_i8(vdupq_n_s32(0), lo, vld1q_s8(b[t][i].qs));
      s = dot_i8(s, hi, vld1q_s8(b[t][i].qs + 16));
      acc[t] = vfmaq_n_f32(acc[t], vcvtq_f32_s32(s), da * h2f(b[t][i].d));
      if constexpr (kOffset) accm[t] += h2f(a[i].m) * h2f(b[t][i].s);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    if constexpr (kOffset) out[t] = vaddvq_f32(acc[t]) + accm[t];
    else out[t] = vaddvq_f32(acc[t]);
  }
}

template <class Dec>
void dot_q32_1(int64_t n, float* out, const void* w, const void* x) {
  dot_q32<Dec, 1>(n, out, w, &x);
}
template <class Dec>
void dot_q32_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_q32<Dec, 4>(n, out, w, xp);
}

// out[r] = dot(w + r * stride, x) for four weight rows against one activation row:
// each row's blocks with the operations of dot_q32 (the activation block loaded once).
template <class Dec>
void dot_q32_r4(int64_t n, float* out, const void* w, size_t stride, const void* x) {
  using Block = typename Dec::Block;
  using Act = typename ActOf<Dec>::type;
  constexpr bool kOffset = requires(const Block& blk) { blk.m; };
  const auto* b = static_cast<const Act*>(x);
  const Block* a[4];
  DF_UNROLL
  for (int r = 0; r < 4; ++r) a[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * stride);
  float32x4_t acc[4];
  float accm[4];
  DF_UNROLL
  for (int r = 0; r < 4; ++r) acc[r] = vdupq_n_f32(0.0f), accm[r] = 0.0f;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    const int8x16_t ylo = vld1q_s8(b[i].qs), yhi = vld1q_s8(b[i].qs + 16);
    const float db = h2f(b[i].d);
    DF_UNROLL
    for (int r = 0; r < 4; ++r) {
      int8x16_t lo, hi;
      Dec::q(a[r][i], &lo, &hi);
      int32x4_t s = dot_i8(vdupq_n_s32(0), lo, ylo);
      s = dot_i8(s, hi, yhi);
      acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(s), Dec::d(a[r][i]) * db);
      if constexpr (kOffset) accm[r] += h2f(a[r][i].m) * h2f(b[i].s);
    }
  }
  DF_UNROLL
  for (int r = 0; r < 4; ++r) {
    if constexpr (kOffset) out[r] = vaddvq_f32(acc[r]) + accm[r];
    else out[r] = vaddvq_f32(acc[r]);
  }
}


// ---- 256-value super-block types against Q8_K (kquants_neon.cpp, iq_neon.cpp) --------
//
// A decoder K names its Block, decodes a block into Decoded (values and a scale per
// 16-value sub-block) and combines the block's exact integer sum with its float scales
// in its scalar reference's expression; K::kOutScale, if present, multiplies the final
// sum (the i-quants' 1/8 and 1/4). Every form (one row, x4, r4) runs a row's blocks
// through the same operations, so their results are bit-identical.

// A decoded super-block: v[k] holds values 16k..16k+15, sc[k] their sub-block's scale.
struct Decoded {
  int8x16_t v[16];
  int32_t sc[16];
};

// Q4_K / Q5_K: element 64c + l (l < 32) is the low nibble of qs[32c + l], element
// 64c + 32 + l its high nibble; Q5_K's fifth bit is bit 2c (low) / 2c + 1 (high) of qh[l].
template <class B>
void decode_k4(const B& a, Decoded* d, const uint8_t* qh) {
  uint8_t sc[8], m[8];
  unpack_scales_k4(a.scales, sc, m);
  uint8x16_t h[2];
  if (qh) h[0] = vld1q_u8(qh), h[1] = vld1q_u8(qh + 16);
  DF_UNROLL
  for (int k = 0; k < 16; ++k) {
    const int c = k / 4, hi = (k % 4) / 2, half = k % 2;
    const uint8x16_t raw = vld1q_u8(a.qs + 32 * c + 16 * half);
    uint8x16_t q = hi ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(15));
    if (qh) q = vorrq_u8(q, vandq_u8(vtstq_u8(h[half], vdupq_n_u8(uint8_t(1u << (2 * c + hi)))), vdupq_n_u8(16)));
    d->v[k] = vreinterpretq_s8_u8(q);
    d->sc[k] = sc[k / 2];
  }
}
template <class K>
inline float out_scale(float sum) {
  if constexpr (requires { K::kOutScale; }) return K::kOutScale * sum;
  else return sum;
}

// sum over k of sc[k] * (v[k] . y[16k .. 16k + 15]), exactly.
inline int isum_of(const Decoded& d, const int8_t* y) {
  int32x4_t acc = vdupq_n_s32(0);
  DF_UNROLL
  for (int k = 0; k < 16; ++k) acc = vmlaq_n_s32(acc, dot_i8(vdupq_n_s32(0), d.v[k], vld1q_s8(y + 16 * k)), d.sc[k]);
  return vaddvq_s32(acc);
}

// out[t] = dot(w, x[t]) for NT activation rows, each block decoded once.
template <class K, int NT>
void dot_k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const typename K::Block*>(w);
  const BlockQ8_K* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_K*>(xp[t]);
  float sum[NT] = {};
  Decoded d;
  for (int64_t i = 0; i < n / kQK; ++i) {
    K::decode(a[i], &d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) sum[t] += K::combine(a[i], b[t][i], isum_of(d, b[t][i].qs));
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = out_scale<K>(sum[t]);
}

template <class K>
void dot_k_1(int64_t n, float* out, const void* w, const void* x) {
  dot_k<K, 1>(n, out, w, &x);
}
template <class K>
void dot_k_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_k<K, 4>(n, out, w, xp);
}

// out[r] = dot(w + r * stride, x) for four weight rows: each row's blocks in the order
// and with the operations of dot_k, four independent float sums.
template <class K>
void dot_k_r4(int64_t n, float* out, const void* w, size_t stride, const void* x) {
  using Block = typename K::Block;
  const auto* b = static_cast<const BlockQ8_K*>(x);
  const Block* a[4];
  DF_UNROLL
  for (int r = 0; r < 4; ++r) a[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * stride);
  float sum[4] = {};
  Decoded d;
  for (int64_t i = 0; i < n / kQK; ++i) {
    DF_UNROLL
    for (int r = 0; r < 4; ++r) {
      K::decode(a[r][i], &d);
      sum[r] += K::combine(a[r][i], b[i], isum_of(d, b[i].qs));
    }
  }
  DF_UNROLL
  for (int r = 0; r < 4; ++r) out[r] = out_scale<K>(sum[r]);
}

}  // namespace DF_NEON_VARIANT
}  // namespace deltafin::kern::neon
