// Pieces the AArch64 kernel files share (kernels_neon.cpp, legacy_neon.cpp): the
// signed-byte dot step and the dot of a 32-value weight block type against its
// activation blocks. Included only by *_neon.cpp files.
//
// A decoder `Dec` names its Block, decodes a block's 32 values into two vectors of 16
// signed bytes (q) and gives its scale (d); Dec::Act, if present, is the activation
// block type (default Q8_0). Blocks with an offset m (Q4_1, Q5_1, against Q8_1) add
// m * s per block to a scalar sum beside the vector accumulator.
#pragma once
#include <arm_neon.h>

#include <cstdint>

#include "kernels/blocks.h"
#include "kernels/kernels_impl.h"

namespace deltafin::kern::neon {

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
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const Act*>(xp[t]);
  float32x4_t acc[NT];
  float accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = vdupq_n_f32(0.0f), accm[t] = 0.0f;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int8x16_t lo, hi;
    Dec::q(a[i], &lo, &hi);
    const float da = Dec::d(a[i]);
    for (int t = 0; t < NT; ++t) {
      int32x4_t s = dot_i8(vdupq_n_s32(0), lo, vld1q_s8(b[t][i].qs));
      s = dot_i8(s, hi, vld1q_s8(b[t][i].qs + 16));
      acc[t] = vfmaq_n_f32(acc[t], vcvtq_f32_s32(s), da * fp16_to_f32(b[t][i].d));
      if constexpr (kOffset) accm[t] += fp16_to_f32(a[i].m) * fp16_to_f32(b[t][i].s);
    }
  }
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

}  // namespace deltafin::kern::neon
