// Scalar reference kernels of the types in blocks_legacy.h: Q4_1 and Q5_1 against Q8_1
// activations, Q5_0 and IQ4_NL against Q8_0, IQ4_XS and TQ2_0 against Q8_K, and Q8_1.
// As ggml does, each block's dot is an exact integer sum scaled by the product of the
// two block scales; the offset types add m * s, s being the activation block's stored
// (fp16) d * sum(qs).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/kernels_impl.h"

namespace deltafin::kern {

namespace {

// The 5-bit code of element e (e < 32) of a Q5_0 / Q5_1 block.
inline int code5(const uint8_t* qs, const uint8_t* qh, int e) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  int lo = e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
  return lo | int((h >> e) & 1u) << 4;
}

// Stores 32 codes (< 32) as Q5_0 / Q5_1 nibbles and high bits.
inline void pack5(const uint8_t* q, uint8_t* qs, uint8_t* qh) {
  uint32_t h = 0;
  for (int e = 0; e < 16; ++e) qs[e] = uint8_t((q[e] & 15) | ((q[e + 16] & 15) << 4));
  for (int e = 0; e < 32; ++e) h |= uint32_t(q[e] >> 4) << e;
  std::memcpy(qh, &h, 4);
}

// Offset quantization to codes 0..levels-1: d = (max - min) / (levels - 1), m = min.
inline void quantize_offset(const float* x, int levels, float* d_out, float* m_out, uint8_t* q) {
  float lo = x[0], hi = x[0];
  for (int e = 1; e < kQ32; ++e) lo = std::min(lo, x[e]), hi = std::max(hi, x[e]);
  const float d = (hi - lo) / float(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int e = 0; e < kQ32; ++e) q[e] = uint8_t(std::clamp(std::nearbyint((x[e] - lo) * id), 0.0f, float(levels - 1)));
  *d_out = d;
  *m_out = lo;
}

// Index of the IQ4_NL level nearest v (in units of the block scale); levels as below.
inline int iq4nl_code(float v) {
  int best = 0;
  float err = std::fabs(v - kIq4nlValues[0]);
  for (int c = 1; c < 16; ++c) {
    float e = std::fabs(v - kIq4nlValues[c]);
    if (e < err) err = e, best = c;
  }
  return best;
}

}  // namespace

// ---- Q8_1 --------------------------------------------------------------------------

void to_float_q8_1_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < kQ32; ++e) dst[e] = d * b[i].qs[e];
  }
}

// As from_float_q8_0_ref (ggml's x86 scale: q = round_even(x * 127 / max|x|)), plus
// s = fp16(d * sum(q)) as ggml's x86 quantizer computes it.
void from_float_q8_1_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float amax = 0;
    for (int e = 0; e < kQ32; ++e) amax = std::max(amax, std::fabs(x[e]));
    float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int e = 0; e < kQ32; ++e) {
      b[i].qs[e] = int8_t(std::clamp(std::nearbyint(x[e] * id), -127.0f, 127.0f));
      sum += b[i].qs[e];
    }
    b[i].d = f32_to_fp16(d);
    b[i].s = f32_to_fp16(d * float(sum));
  }
}

void vec_dot_q8_1_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < kQ32; ++e) isum += a[i].qs[e] * b[i].qs[e];
    sum += float(isum) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  *out = sum;
}

// ---- Q4_1 --------------------------------------------------------------------------

void to_float_q4_1_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    for (int e = 0; e < 16; ++e) {
      dst[e] = d * (b[i].qs[e] & 15) + m;
      dst[e + 16] = d * (b[i].qs[e] >> 4) + m;
    }
  }
}

void from_float_q4_1_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float d, m;
    uint8_t q[kQ32];
    quantize_offset(x, 16, &d, &m, q);
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(m);
    for (int e = 0; e < 16; ++e) b[i].qs[e] = uint8_t(q[e] | (q[e + 16] << 4));
  }
}

void vec_dot_q4_1_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < 16; ++e) isum += (a[i].qs[e] & 15) * b[i].qs[e] + (a[i].qs[e] >> 4) * b[i].qs[e + 16];
    sum += float(isum) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d)) + fp16_to_f32(a[i].m) * fp16_to_f32(b[i].s);
  }
  *out = sum;
}

// ---- Q5_0 --------------------------------------------------------------------------

void to_float_q5_0_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < kQ32; ++e) dst[e] = d * (code5(b[i].qs, b[i].qh, e) - 16);
  }
}

// As Q4_0: the value of largest magnitude maps to -16 (d takes its sign).
void from_float_q5_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float amax = 0, vmax = 0;
    for (int e = 0; e < kQ32; ++e)
      if (std::fabs(x[e]) > amax) amax = std::fabs(x[e]), vmax = x[e];
    float d = vmax / -16.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t q[kQ32];
    for (int e = 0; e < kQ32; ++e) q[e] = uint8_t(std::clamp(std::nearbyint(x[e] * id) + 16.0f, 0.0f, 31.0f));
    b[i].d = f32_to_fp16(d);
    pack5(q, b[i].qs, b[i].qh);
  }
}

void vec_dot_q5_0_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < kQ32; ++e) isum += (code5(a[i].qs, a[i].qh, e) - 16) * b[i].qs[e];
    sum += float(isum) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  *out = sum;
}

// ---- Q5_1 --------------------------------------------------------------------------

void to_float_q5_1_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    for (int e = 0; e < kQ32; ++e) dst[e] = d * code5(b[i].qs, b[i].qh, e) + m;
  }
}

void from_float_q5_1_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float d, m;
    uint8_t q[kQ32];
    quantize_offset(x, 32, &d, &m, q);
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(m);
    pack5(q, b[i].qs, b[i].qh);
  }
}

void vec_dot_q5_1_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < kQ32; ++e) isum += code5(a[i].qs, a[i].qh, e) * b[i].qs[e];
    sum += float(isum) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d)) + fp16_to_f32(a[i].m) * fp16_to_f32(b[i].s);
  }
  *out = sum;
}

// ---- IQ4_NL ------------------------------------------------------------------------

void to_float_iq4_nl_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < 16; ++e) {
      dst[e] = d * kIq4nlValues[b[i].qs[e] & 15];
      dst[e + 16] = d * kIq4nlValues[b[i].qs[e] >> 4];
    }
  }
}

// The value of largest magnitude maps to the level -127 (d takes its sign); the codes
// then refit d by least squares once and are chosen again for the refitted scale,
// keeping whichever of the two has the smaller squared error.
void from_float_iq4_nl_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float amax = 0, vmax = 0;
    for (int e = 0; e < kQ32; ++e)
      if (std::fabs(x[e]) > amax) amax = std::fabs(x[e]), vmax = x[e];
    uint8_t best[kQ32] = {};
    float best_d = 0, best_err = INFINITY;
    float d = vmax / float(kIq4nlValues[0]);
    for (int pass = 0; pass < 2 && d != 0.0f; ++pass) {
      const float rd = fp16_to_f32(f32_to_fp16(d));
      uint8_t q[kQ32];
      float err = 0, sxv = 0, svv = 0;
      for (int e = 0; e < kQ32; ++e) {
        q[e] = uint8_t(iq4nl_code(x[e] / rd));
        const float v = kIq4nlValues[q[e]];
        err += (x[e] - rd * v) * (x[e] - rd * v);
        sxv += x[e] * v, svv += v * v;
      }
      if (err < best_err) best_err = err, best_d = rd, std::memcpy(best, q, kQ32);
      d = svv > 0 ? sxv / svv : 0.0f;
    }
    b[i].d = f32_to_fp16(best_d);
    for (int e = 0; e < 16; ++e) b[i].qs[e] = uint8_t(best[e] | (best[e + 16] << 4));
  }
}

void vec_dot_iq4_nl_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_NL*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < 16; ++e)
      isum += kIq4nlValues[a[i].qs[e] & 15] * b[i].qs[e] + kIq4nlValues[a[i].qs[e] >> 4] * b[i].qs[e + 16];
    sum += float(isum) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  *out = sum;
}

// ---- IQ4_XS ------------------------------------------------------------------------

void to_float_iq4_xs_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < 8; ++j, dst += kQ32) {
      const float dl = d * float(iq4xs_scale(b[i], j));
      const uint8_t* qs = b[i].qs + 16 * j;
      for (int e = 0; e < 16; ++e) {
        dst[e] = dl * kIq4nlValues[qs[e] & 15];
        dst[e + 16] = dl * kIq4nlValues[qs[e] >> 4];
      }
    }
  }
}

// Each sub-block's own scale as IQ4_NL chooses it (largest magnitude at -127); the
// super-block scale d maps the largest of those to -32, the others round to the
// nearest multiple of d, and the codes are chosen again for the scale d * (ls - 32).
void from_float_iq4_xs_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float sub[8], dmax = 0, dsel = 0;
    for (int j = 0; j < 8; ++j) {
      float amax = 0, vmax = 0;
      for (int e = 0; e < kQ32; ++e)
        if (std::fabs(x[kQ32 * j + e]) > amax) amax = std::fabs(x[kQ32 * j + e]), vmax = x[kQ32 * j + e];
      sub[j] = vmax / float(kIq4nlValues[0]);
      if (std::fabs(sub[j]) > dmax) dmax = std::fabs(sub[j]), dsel = sub[j];
    }
    const float d = fp16_to_f32(f32_to_fp16(dsel / -32.0f));
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::memset(&b[i], 0, sizeof(BlockIQ4_XS));
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < 8; ++j) {
      const int l = int(std::clamp(std::nearbyint(sub[j] * id), -32.0f, 31.0f));
      const int u = l + 32;
      b[i].scales_l[j / 2] |= uint8_t((u & 15) << 4 * (j % 2));
      b[i].scales_h |= uint16_t((u >> 4) << 2 * j);
      const float dl = d * float(l);
      for (int e = 0; e < 16; ++e) {
        const int lo = dl != 0.0f ? iq4nl_code(x[kQ32 * j + e] / dl) : 8;
        const int hi = dl != 0.0f ? iq4nl_code(x[kQ32 * j + e + 16] / dl) : 8;
        b[i].qs[16 * j + e] = uint8_t(lo | (hi << 4));
      }
    }
  }
}

// Per super-block the exact integer sum over its sub-blocks of (ls - 32) times the
// sub-block's integer dot, scaled by d_w * d_x (ggml's x86 order of operations).
void vec_dot_iq4_xs_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ4_XS*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = a[i].qs + 16 * j;
      const int8_t* y = b[i].qs + kQ32 * j;
      int s = 0;
      for (int e = 0; e < 16; ++e) s += kIq4nlValues[qs[e] & 15] * y[e] + kIq4nlValues[qs[e] >> 4] * y[e + 16];
      isum += iq4xs_scale(a[i], j) * s;
    }
    sum += float(isum) * (fp16_to_f32(a[i].d) * b[i].d);
  }
  *out = sum;
}

// ---- TQ2_0 -------------------------------------------------------------------------

void to_float_tq2_0_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockTQ2_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int k = 0; k < 32; ++k) dst[128 * h + 32 * l + k] = d * float(((b[i].qs[32 * h + k] >> 2 * l) & 3) - 1);
  }
}

// d = max|x|, q = round(x / d) + 1 (as llama.cpp's TQ2_0 quantizer).
void from_float_tq2_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockTQ2_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0;
    for (int e = 0; e < kQK; ++e) amax = std::max(amax, std::fabs(x[e]));
    const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
    b[i].d = f32_to_fp16(amax);
    std::memset(b[i].qs, 0, sizeof b[i].qs);
    for (int e = 0; e < kQK; ++e) {
      const int q = int(std::lround(x[e] * id)) + 1;
      b[i].qs[32 * (e / 128) + e % 32] |= uint8_t((q & 3) << 2 * ((e % 128) / 32));
    }
  }
}

// Per super-block the exact integer sum of (q - 1) * y, scaled by d_w * d_x.
void vec_dot_tq2_0_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockTQ2_0*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int k = 0; k < 32; ++k)
          isum += (((a[i].qs[32 * h + k] >> 2 * l) & 3) - 1) * b[i].qs[128 * h + 32 * l + k];
    sum += float(isum) * (fp16_to_f32(a[i].d) * b[i].d);
  }
  *out = sum;
}

}  // namespace deltafin::kern
