// AArch64 Advanced SIMD kernels of the K-quants (Q2_K .. Q6_K) and Q8_K against Q8_K
// activations, and the Q8_K activation quantizer. Each super-block is decoded once into sixteen vectors of 16 signed
// bytes (one per 16-value sub-block) and a scale per sub-block; the dot sums exact
// integer products (SDOT where the build has it, neon_common.h) and applies the
// sub-block scales in integers, then combines the block's float terms in the
// reference's expression (ref_kquants.cpp). A row's sum is therefore the same whether
// it is computed alone, against four activation rows (x4) or beside three other weight
// rows (r4): bit-identical, as types.h requires.
#include <arm_neon.h>

#include <cstring>

#include "kernels/blocks.h"
#include "kernels/kernels_impl.h"
#include "kernels/neon_common.h"

namespace deltafin::kern {
namespace {

using neon::Decoded;
using neon::decode_k4;
using neon::dot_i8;
using neon::dot_k_1;
using neon::dot_k_4;
using neon::dot_k_r4;

// 2-bit field s (0..3) of each byte.
inline uint8x16_t crumb(uint8x16_t raw, int s) {
  return vandq_u8(vshlq_u8(raw, vdupq_n_s8(int8_t(-2 * s))), vdupq_n_u8(3));
}

struct KQ8_K {
  using Block = BlockQ8_K;
  static void decode(const Block& a, Decoded* d) {
    DF_UNROLL
    for (int k = 0; k < 16; ++k) d->v[k] = vld1q_s8(a.qs + 16 * k), d->sc[k] = 1;
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return a.d * b.d * float(isum); }
};

struct KQ2_K {
  using Block = BlockQ2_K;
  // Element e: h = e / 128, s = (e % 128) / 32, l = e % 32: bits 2s of qs[32h + l].
  static void decode(const Block& a, Decoded* d) {
    DF_UNROLL
    for (int k = 0; k < 16; ++k) {
      const int h = k / 8, s = (k % 8) / 2, l0 = (k % 2) * 16;
      d->v[k] = vreinterpretq_s8_u8(crumb(vld1q_u8(a.qs + 32 * h + l0), s));
      d->sc[k] = a.scales[k] & 15;
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) {
    int msum = 0;
    DF_UNROLL
    for (int j = 0; j < 16; ++j) msum += (a.scales[j] >> 4) * b.bsums[j];
    return b.d * neon::h2f(a.d) * float(isum) - b.d * neon::h2f(a.dmin) * float(msum);
  }
};

struct KQ3_K {
  using Block = BlockQ3_K;
  // As Q2_K's low bits, plus bit 4h + s of hmask[l]; value lo + 4 hi - 4.
  static void decode(const Block& a, Decoded* d) {
    int8_t sc[16];
    unpack_scales_q3k(a.scales, sc);
    const uint8x16_t hm[2] = {vld1q_u8(a.hmask), vld1q_u8(a.hmask + 16)};
    DF_UNROLL
    for (int k = 0; k < 16; ++k) {
      const int h = k / 8, s = (k % 8) / 2, l0 = (k % 2) * 16;
      const uint8x16_t lo = crumb(vld1q_u8(a.qs + 32 * h + l0), s);
      const uint8x16_t hi = vandq_u8(vtstq_u8(hm[k % 2], vdupq_n_u8(uint8_t(1u << (4 * h + s)))), vdupq_n_u8(4));
      d->v[k] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(4));
      d->sc[k] = sc[k];
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

template <class B>
float combine_k4(const B& a, const BlockQ8_K& b, int isum) {
  uint8_t sc[8], m[8];
  unpack_scales_k4(a.scales, sc, m);
  int msum = 0;
  DF_UNROLL
  for (int j = 0; j < 8; ++j) msum += m[j] * (b.bsums[2 * j] + b.bsums[2 * j + 1]);
  return b.d * neon::h2f(a.d) * float(isum) - b.d * neon::h2f(a.dmin) * float(msum);
}
struct KQ4_K {
  using Block = BlockQ4_K;
  static void decode(const Block& a, Decoded* d) { decode_k4(a, d, nullptr); }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return combine_k4(a, b, isum); }
};
struct KQ5_K {
  using Block = BlockQ5_K;
  static void decode(const Block& a, Decoded* d) { decode_k4(a, d, a.qh); }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return combine_k4(a, b, isum); }
};

struct KQ6_K {
  using Block = BlockQ6_K;
  // Element e: h = e / 128, k = (e % 128) / 32, l = e % 32: the low (k < 2) or high
  // nibble of ql[64h + 32(k & 1) + l] and bits 2k of qh[32h + l] above it; minus 32.
  static void decode(const Block& a, Decoded* d) {
    for (int c = 0; c < 16; ++c) {
      const int h = c / 8, k = (c % 8) / 2, l0 = (c % 2) * 16;
      const uint8x16_t lo = vld1q_u8(a.ql + 64 * h + 32 * (k & 1) + l0);
      const uint8x16_t nib = k < 2 ? vandq_u8(lo, vdupq_n_u8(15)) : vshrq_n_u8(lo, 4);
      const uint8x16_t hi = vshlq_n_u8(crumb(vld1q_u8(a.qh + 32 * h + l0), k), 4);
      d->v[c] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(nib, hi)), vdupq_n_s8(32));
      d->sc[c] = a.scales[c];
    }
  }
  static float combine(const Block& a, const BlockQ8_K& b, int isum) { return neon::h2f(a.d) * b.d * float(isum); }
};

// The activation quantizer, with from_float_q8_k_ref's float operations (vcvtnq rounds
// to nearest even as nearbyint does; |x| * 127 / amax <= 127 up to rounding, which the
// saturating narrows and the -127 floor clamp as the reference does): the same bytes.
void quantize_q8_k_neon(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int e = 0; e < kQK; e += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + e)));
    const float amax = vmaxvq_f32(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = 127.0f / amax;
    DF_UNROLL
    for (int j = 0; j < 16; ++j) {
      const float* p = x + 16 * j;
      int32x4_t q[4];
      for (int u = 0; u < 4; ++u) q[u] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(p + 4 * u), iscale));
      const int16x8_t q01 = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
      const int16x8_t q23 = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
      const int8x16_t q8 = vmaxq_s8(vcombine_s8(vqmovn_s16(q01), vqmovn_s16(q23)), vdupq_n_s8(-127));
      vst1q_s8(y[i].qs + 16 * j, q8);
      y[i].bsums[j] = int16_t(vaddlvq_s8(q8));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace

void DF_NEON_NAME(install_kquants_neon)(TypeTraits* t) {
  auto set = [&]<class K>(DType type, K) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot_k_1<K>;
    r.vec_dot_x4 = dot_k_4<K>;
    r.vec_dot_r4 = dot_k_r4<K>;
    r.isa = Isa::NEON;
  };
  set(DType::Q8_K, KQ8_K{});
  set(DType::Q2_K, KQ2_K{});
  set(DType::Q3_K, KQ3_K{});
  set(DType::Q4_K, KQ4_K{});
  set(DType::Q5_K, KQ5_K{});
  set(DType::Q6_K, KQ6_K{});
  t[uint32_t(DType::Q8_K)].from_float = quantize_q8_k_neon;
}

}  // namespace deltafin::kern
