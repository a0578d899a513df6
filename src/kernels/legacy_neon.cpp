// AArch64 Advanced SIMD kernels of Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS and TQ2_0
// (blocks_legacy.h): each 32-value (sub-)block decoded to two vectors of 16 bytes and
// dotted with the activation block (SDOT where the target has it) by neon_common.h's
// dot_q32, the same dot as Q8_0's (plus a scalar sum of m * s for the offset types). IQ4_XS and TQ2_0 sum each super-block exactly in
// integers first.
#include <arm_neon.h>

#include <cstring>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/kernels_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::dot_i8;
using neon::dot_q32_1;
using neon::dot_q32_4;

// 16 where bit e of qh is set, for elements 0..15 (lo) and 16..31 (hi).
inline void q5_high_bits(const uint8_t* qh, uint8x16_t* lo, uint8x16_t* hi) {
  static const uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bits = vld1q_u8(kBits);
  uint8x16_t b01 = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
  uint8x16_t b23 = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
  *lo = vandq_u8(vtstq_u8(b01, bits), vdupq_n_u8(16));
  *hi = vandq_u8(vtstq_u8(b23, bits), vdupq_n_u8(16));
}

inline void nibbles(const uint8_t* qs, uint8x16_t* lo, uint8x16_t* hi) {
  uint8x16_t raw = vld1q_u8(qs);
  *lo = vandq_u8(raw, vdupq_n_u8(15));
  *hi = vshrq_n_u8(raw, 4);
}

struct DecodeQ5_0 {
  using Block = BlockQ5_0;
  static float d(const Block& b) { return fp16_to_f32(b.d); }
  using Act = BlockQ8_0;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    uint8x16_t l, h, hl, hh;
    nibbles(b.qs, &l, &h);
    q5_high_bits(b.qh, &hl, &hh);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l, hl)), vdupq_n_s8(16));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(h, hh)), vdupq_n_s8(16));
  }
};
struct DecodeIQ4_NL {
  using Block = BlockIQ4_NL;
  static float d(const Block& b) { return fp16_to_f32(b.d); }
  using Act = BlockQ8_0;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    const int8x16_t lut = vld1q_s8(kIq4nlValues);
    uint8x16_t l, h;
    nibbles(b.qs, &l, &h);
    *lo = vqtbl1q_s8(lut, l);
    *hi = vqtbl1q_s8(lut, h);
  }
};
struct DecodeQ4_1 {
  using Block = BlockQ4_1;
  static float d(const Block& b) { return fp16_to_f32(b.d); }
  using Act = BlockQ8_1;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    uint8x16_t l, h;
    nibbles(b.qs, &l, &h);
    *lo = vreinterpretq_s8_u8(l);
    *hi = vreinterpretq_s8_u8(h);
  }
};
struct DecodeQ5_1 {
  using Block = BlockQ5_1;
  static float d(const Block& b) { return fp16_to_f32(b.d); }
  using Act = BlockQ8_1;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    uint8x16_t l, h, hl, hh;
    nibbles(b.qs, &l, &h);
    q5_high_bits(b.qh, &hl, &hh);
    *lo = vreinterpretq_s8_u8(vorrq_u8(l, hl));
    *hi = vreinterpretq_s8_u8(vorrq_u8(h, hh));
  }
};

template <int NT>
void dot_iq4_xs(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockIQ4_XS*>(w);
  const BlockQ8_K* b[NT];
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_K*>(xp[t]);
  float acc[NT] = {};
  const int8x16_t lut = vld1q_s8(kIq4nlValues);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32x4_t sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
      uint8x16_t l, h;
      nibbles(a[i].qs + 16 * j, &l, &h);
      const int8x16_t lo = vqtbl1q_s8(lut, l), hi = vqtbl1q_s8(lut, h);
      const int ls = iq4xs_scale(a[i], j);
      for (int t = 0; t < NT; ++t) {
        int32x4_t s = dot_i8(vdupq_n_s32(0), lo, vld1q_s8(b[t][i].qs + 32 * j));
        s = dot_i8(s, hi, vld1q_s8(b[t][i].qs + 32 * j + 16));
        sumi[t] = vmlaq_n_s32(sumi[t], s, ls);
      }
    }
    const float d = fp16_to_f32(a[i].d);
    for (int t = 0; t < NT; ++t) acc[t] += float(vaddvq_s32(sumi[t])) * (d * b[t][i].d);
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

void dot_iq4_xs_1(int64_t n, float* out, const void* w, const void* x) { dot_iq4_xs<1>(n, out, w, &x); }
void dot_iq4_xs_4(int64_t n, float* out, const void* w, const void* const* xp) { dot_iq4_xs<4>(n, out, w, xp); }

template <int NT>
void dot_tq2_0(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockTQ2_0*>(w);
  const BlockQ8_K* b[NT];
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_K*>(xp[t]);
  float acc[NT] = {};
  const uint8x16_t three = vdupq_n_u8(3);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32x4_t sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t r0 = vld1q_u8(a[i].qs + 32 * h), r1 = vld1q_u8(a[i].qs + 32 * h + 16);
      for (int l = 0; l < 4; ++l) {
        const int8x16_t q0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(r0, vdupq_n_s8(int8_t(-2 * l))), three)), vdupq_n_s8(1));
        const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(r1, vdupq_n_s8(int8_t(-2 * l))), three)), vdupq_n_s8(1));
        for (int t = 0; t < NT; ++t) {
          const int8_t* y = b[t][i].qs + 128 * h + 32 * l;
          sumi[t] = dot_i8(dot_i8(sumi[t], q0, vld1q_s8(y)), q1, vld1q_s8(y + 16));
        }
      }
    }
    const float d = fp16_to_f32(a[i].d);
    for (int t = 0; t < NT; ++t) acc[t] += float(vaddvq_s32(sumi[t])) * (d * b[t][i].d);
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

void dot_tq2_0_1(int64_t n, float* out, const void* w, const void* x) { dot_tq2_0<1>(n, out, w, &x); }
void dot_tq2_0_4(int64_t n, float* out, const void* w, const void* const* xp) { dot_tq2_0<4>(n, out, w, xp); }

}  // namespace

void install_legacy_neon(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = nullptr;
    r.isa = Isa::NEON;
  };
  set(DType::Q5_0, dot_q32_1<DecodeQ5_0>, dot_q32_4<DecodeQ5_0>);
  set(DType::IQ4_NL, dot_q32_1<DecodeIQ4_NL>, dot_q32_4<DecodeIQ4_NL>);
  set(DType::Q4_1, dot_q32_1<DecodeQ4_1>, dot_q32_4<DecodeQ4_1>);
  set(DType::Q5_1, dot_q32_1<DecodeQ5_1>, dot_q32_4<DecodeQ5_1>);
  set(DType::IQ4_XS, dot_iq4_xs_1, dot_iq4_xs_4);
  set(DType::TQ2_0, dot_tq2_0_1, dot_tq2_0_4);
}

}  // namespace deltafin::kern
