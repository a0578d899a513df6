// AArch64 Advanced SIMD kernels of Q8_1, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS and TQ2_0
// (blocks_legacy.h), single-row, x4 and r4. The 32-value types: each block decoded to
// two vectors of 16 bytes and dotted with the activation block (SDOT where the build
// has it) by neon_common.h's dot_q32, the same dot as Q8_0's (plus a scalar sum of
// m * s for the offset types). IQ4_XS and TQ2_0 as super-blocks by its dot_k: each
// super-block summed exactly in integers first. And the Q8_1 activation quantizer.
#include <arm_neon.h>

#include <cstring>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/kernels_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::dot_q32_1;
using neon::dot_q32_4;
using neon::dot_q32_r4;

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
  static float d(const Block& b) { return neon::h2f(b.d); }
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
  static float d(const Block& b) { return neon::h2f(b.d); }
  using Act = BlockQ8_0;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    const int8x16_t lut = vld1q_s8(kIq4nlValues);
    uint8x16_t l, h;
    nibbles(b.qs, &l, &h);
    *lo = vqtbl1q_s8(lut, l);
    *hi = vqtbl1q_s8(lut, h);
  }
};
struct DecodeQ8_1 {  // Q8_1 as a weight row (the activation type's own dot)
  using Block = BlockQ8_1;
  static float d(const Block& b) { return neon::h2f(b.d); }
  using Act = BlockQ8_1;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    *lo = vld1q_s8(b.qs);
    *hi = vld1q_s8(b.qs + 16);
  }
};
struct DecodeQ4_1 {
  using Block = BlockQ4_1;
  static float d(const Block& b) { return neon::h2f(b.d); }
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
  static float d(const Block& b) { return neon::h2f(b.d); }
  using Act = BlockQ8_1;
  static void q(const Block& b, int8x16_t* lo, int8x16_t* hi) {
    uint8x16_t l, h, hl, hh;
    nibbles(b.qs, &l, &h);
    q5_high_bits(b.qh, &hl, &hh);
    *lo = vreinterpretq_s8_u8(vorrq_u8(l, hl));
    *hi = vreinterpretq_s8_u8(vorrq_u8(h, hh));
  }
};

// IQ4_XS and TQ2_0 as 256-value super-blocks (neon_common.h's dot_k): the exact
// integer sum of the block, then float(isum) * (d * d_x) as the references do.
struct KIQ4_XS {
  using Block = BlockIQ4_XS;
  // Sub-block j (32 values): low nibbles of qs[16j ..] then their high nibbles.
  static void decode(const Block& a, neon::Decoded* d) {
    const int8x16_t lut = vld1q_s8(kIq4nlValues);
    DF_UNROLL
    for (int j = 0; j < 8; ++j) {
      uint8x16_t l, h;
      nibbles(a.qs + 16 * j, &l, &h);
      d->v[2 * j] = vqtbl1q_s8(lut, l);
      d->v[2 * j + 1] = vqtbl1q_s8(lut, h);
      d->sc[2 * j] = d->sc[2 * j + 1] = iq4xs_scale(a, j);
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return float(isum) * (neon::h2f(a.d) * b.d); }
};
struct KTQ2_0 {
  using Block = BlockTQ2_0;
  // Values 128h + 32l + m: bits 2l of qs[32h + m], minus 1.
  static void decode(const Block& a, neon::Decoded* d) {
    DF_UNROLL
    for (int k = 0; k < 16; ++k) {
      const int h = k / 8, l = (k % 8) / 2, half = k % 2;
      const uint8x16_t raw = vld1q_u8(a.qs + 32 * h + 16 * half);
      const uint8x16_t q = vandq_u8(vshlq_u8(raw, vdupq_n_s8(int8_t(-2 * l))), vdupq_n_u8(3));
      d->v[k] = vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(1));
      d->sc[k] = 1;
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return float(isum) * (neon::h2f(a.d) * b.d); }
};

// The Q8_1 activation quantizer, with from_float_q8_1_ref's float operations (as
// kernels_neon.cpp's Q8_0 one) and s = d * sum(q): the same bytes.
void quantize_q8_1_neon(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
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
    int sum = 0;
    for (int k = 0; k < 8; k += 4) {
      int32x4_t q[4];
      for (int u = 0; u < 4; ++u) q[u] = vcvtnq_s32_f32(vmulq_n_f32(v[k + u], id));
      const int16x8_t q01 = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
      const int16x8_t q23 = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
      const int8x16_t q8 = vmaxq_s8(vcombine_s8(vqmovn_s16(q01), vqmovn_s16(q23)), vdupq_n_s8(-127));
      vst1q_s8(y[i].qs + 4 * k, q8);
      sum += vaddlvq_s8(q8);
    }
    y[i].d = f32_to_fp16(d);
    y[i].s = f32_to_fp16(d * float(sum));
  }
}

}  // namespace

void DF_NEON_NAME(install_legacy_neon)(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4, VecDotR4Fn dot_r4) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = dot_r4;
    r.isa = Isa::NEON;
  };
  set(DType::Q5_0, dot_q32_1<DecodeQ5_0>, dot_q32_4<DecodeQ5_0>, dot_q32_r4<DecodeQ5_0>);
  set(DType::IQ4_NL, dot_q32_1<DecodeIQ4_NL>, dot_q32_4<DecodeIQ4_NL>, dot_q32_r4<DecodeIQ4_NL>);
  set(DType::Q8_1, dot_q32_1<DecodeQ8_1>, dot_q32_4<DecodeQ8_1>, dot_q32_r4<DecodeQ8_1>);
  t[uint32_t(DType::Q8_1)].from_float = quantize_q8_1_neon;
  set(DType::Q4_1, dot_q32_1<DecodeQ4_1>, dot_q32_4<DecodeQ4_1>, dot_q32_r4<DecodeQ4_1>);
  set(DType::Q5_1, dot_q32_1<DecodeQ5_1>, dot_q32_4<DecodeQ5_1>, dot_q32_r4<DecodeQ5_1>);
  set(DType::IQ4_XS, neon::dot_k_1<KIQ4_XS>, neon::dot_k_4<KIQ4_XS>, neon::dot_k_r4<KIQ4_XS>);
  set(DType::TQ2_0, neon::dot_k_1<KTQ2_0>, neon::dot_k_4<KTQ2_0>, neon::dot_k_r4<KTQ2_0>);
}

}  // namespace deltafin::kern
