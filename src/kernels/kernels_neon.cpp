// AArch64 Advanced SIMD kernels: F32, F16, BF16, the 32-value block types (Q8_0, Q4_0,
// MXFP4 against Q8_0), single-row, x4 and r4, and the Q8_0 activation quantizer. The
// other types' kernels are in legacy_neon.cpp, kquants_neon.cpp and iq_neon.cpp. Uses
// SDOT where the build has it (neon_common.h), else widening multiplies. Built only
// on aarch64 (CMake drops *_neon.cpp elsewhere).
#include <arm_neon.h>

#include <cstring>

#include "kernels/blocks.h"
#include "kernels/kernels_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::dot_i8;
using neon::dot_q32_1;
using neon::dot_q32_4;
using neon::dot_q32_r4;

// Decoders of a 32-value weight block: elements 0..15 in lo, 16..31 in hi.
struct DecodeQ8_0 {
  using Block = BlockQ8_0;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    *lo = vld1q_s8(b.qs);
    *hi = vld1q_s8(b.qs + 16);
  }
  static float d(const Block& b) { return neon::h2f(b.d); }
};
struct DecodeQ4_0 {
  using Block = BlockQ4_0;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    uint8x16_t raw = vld1q_u8(b.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(15))), eight);
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);
  }
  static float d(const Block& b) { return neon::h2f(b.d); }
};
struct DecodeMXFP4 {
  using Block = BlockMXFP4;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    const int8x16_t lut = vld1q_s8(kMxfp4Values);
    uint8x16_t raw = vld1q_u8(b.qs);
    *lo = vqtbl1q_s8(lut, vandq_u8(raw, vdupq_n_u8(15)));
    *hi = vqtbl1q_s8(lut, vshrq_n_u8(raw, 4));
  }
  static float d(const Block& b) { return e8m0_half_to_f32(b.e); }
};

// Same float operations as from_float_q8_0_ref; vcvtnq rounds to nearest even as
// nearbyint does, so the bytes match.
void quantize_q8_0_neon(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      v[k] = vld1q_f32(x + 4 * k);
      m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int k = 0; k < 8; k += 2) {
      int32x4_t q0 = vcvtnq_s32_f32(vmulq_n_f32(v[k], id));
      int32x4_t q1 = vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id));
      int16x8_t q16 = vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1));
      vst1_s8(y[i].qs + 4 * k, vqmovn_s16(q16));
    }
  }
}

// Float rows: four accumulators for one row, one per row for four.
inline float32x4_t load4(const float* p) { return vld1q_f32(p); }
inline float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float scalar(float v) { return v; }
inline float scalar(uint16_t v) { return neon::h2f(v); }
// BF16 values: a type of their own so that dot_float picks their conversions.
struct Bf16 {
  uint16_t bits;
};
static_assert(sizeof(Bf16) == 2);
inline float32x4_t load4(const Bf16* p) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)), 16));
}
inline float scalar(Bf16 v) { return bf16_to_f32(v.bits); }

template <class T, int NT>
void dot_float(int64_t n, float* out, const void* w, const void* const* xp) {
  const T* a = static_cast<const T*>(w);
  const T* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const T*>(xp[t]);
  // Four accumulators per row whatever NT is: a row's sum is then computed in
  // the same order alone or in a group (batch invariance, test_kernels X4EqualsSingle).
  constexpr int U = 4;
  float32x4_t acc[NT][U];
  DF_UNROLL
  for (int t = 0; t < NT; ++t)
    for (int u = 0; u < U; ++u) acc[t][u] = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 * U <= n; i += 4 * U) {
    for (int u = 0; u < U; ++u) {
      float32x4_t va = load4(a + i + 4 * u);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[t][u] = vfmaq_f32(acc[t][u], va, load4(b[t] + i + 4 * u));
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    for (int u = 1; u < U; ++u) acc[t][0] = vaddq_f32(acc[t][0], acc[t][u]);
    float s = vaddvq_f32(acc[t][0]);
    for (int64_t j = i; j < n; ++j) s += scalar(a[j]) * scalar(b[t][j]);
    out[t] = s;
  }
}

template <class T>
void dot_float_1(int64_t n, float* out, const void* w, const void* x) {
  dot_float<T, 1>(n, out, w, &x);
}
template <class T>
void dot_float_4(int64_t n, float* out, const void* w, const void* const* xp) {
  // Two rows at a time keeps the accumulators in registers (2 x 4).
  dot_float<T, 2>(n, out, w, xp);
  dot_float<T, 2>(n, out + 2, w, xp + 2);
}

// Four weight rows against one activation row: each row with dot_float's four
// accumulators, in its order, so each result equals dot_float_1's bit for bit. Two
// rows at a time, as dot_float_4.
template <class T>
void dot_float_r2(int64_t n, float* out, const T* a0, const T* a1, const T* b) {
  constexpr int U = 4;
  const T* a[2] = {a0, a1};
  float32x4_t acc[2][U];
  DF_UNROLL
  for (int r = 0; r < 2; ++r)
    for (int u = 0; u < U; ++u) acc[r][u] = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 * U <= n; i += 4 * U) {
    for (int u = 0; u < U; ++u) {
      float32x4_t vb = load4(b + i + 4 * u);
      DF_UNROLL
      for (int r = 0; r < 2; ++r) acc[r][u] = vfmaq_f32(acc[r][u], load4(a[r] + i + 4 * u), vb);
    }
  }
  DF_UNROLL
  for (int r = 0; r < 2; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = vaddq_f32(acc[r][0], acc[r][u]);
    float s = vaddvq_f32(acc[r][0]);
    for (int64_t j = i; j < n; ++j) s += scalar(a[r][j]) * scalar(b[j]);
    out[r] = s;
  }
}
template <class T>
void dot_float_r4(int64_t n, float* out, const void* w, size_t stride, const void* x) {
  const auto* base = static_cast<const uint8_t*>(w);
  const T* b = static_cast<const T*>(x);
  auto row = [&](int r) { return reinterpret_cast<const T*>(base + r * stride); };
  dot_float_r2<T>(n, out, row(0), row(1), b);
  dot_float_r2<T>(n, out + 2, row(2), row(3), b);
}

}  // namespace

void DF_NEON_NAME(install_neon)(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4, VecDotR4Fn dot_r4) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = dot_r4;
    r.isa = Isa::NEON;
  };
  set(DType::F32, dot_float_1<float>, dot_float_4<float>, dot_float_r4<float>);
  set(DType::F16, dot_float_1<uint16_t>, dot_float_4<uint16_t>, dot_float_r4<uint16_t>);
  set(DType::BF16, dot_float_1<Bf16>, dot_float_4<Bf16>, dot_float_r4<Bf16>);
  set(DType::Q8_0, dot_q32_1<DecodeQ8_0>, dot_q32_4<DecodeQ8_0>, dot_q32_r4<DecodeQ8_0>);
  set(DType::Q4_0, dot_q32_1<DecodeQ4_0>, dot_q32_4<DecodeQ4_0>, dot_q32_r4<DecodeQ4_0>);
  set(DType::MXFP4, dot_q32_1<DecodeMXFP4>, dot_q32_4<DecodeMXFP4>, dot_q32_r4<DecodeMXFP4>);
  t[uint32_t(DType::Q8_0)].from_float = quantize_q8_0_neon;
}

}  // namespace deltafin::kern
