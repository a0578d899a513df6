// Scalar reference kernels of the 32-value block types: Q8_0, Q4_0, MXFP4. Their dot
// products take Q8_0 activations and sum exact integer products per block, scaled
// by the product of the two block scales (as ggml does).
#include <algorithm>
#include <cmath>

#include "kernels/blocks.h"
#include "kernels/kernels_impl.h"

namespace deltafin::kern {

// ---- Q8_0 --------------------------------------------------------------------------

void to_float_q8_0_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < kQ32; ++e) dst[e] = d * b[i].qs[e];
  }
}

// d = max|x| / 127 and q = round_nearest_even(x * 127 / max|x|), the scale ggml's x86
// quantizer uses (1/d rounds differently in the last bit and moves some q by one step
// against llama.cpp). The SIMD quantizers compute the same float operations, so they
// produce identical bytes.
void from_float_q8_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float amax = 0;
    for (int e = 0; e < kQ32; ++e) amax = std::max(amax, std::fabs(x[e]));
    float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = f32_to_fp16(d);
    for (int e = 0; e < kQ32; ++e) {
      float q = std::nearbyint(x[e] * id);
      b[i].qs[e] = int8_t(std::clamp(q, -127.0f, 127.0f));
    }
  }
}

void vec_dot_q8_0_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < kQ32; ++e) isum += a[i].qs[e] * b[i].qs[e];
    sum += float(isum) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  *out = sum;
}

// ---- Q4_0 --------------------------------------------------------------------------

void to_float_q4_0_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < 16; ++e) {
      dst[e] = d * ((b[i].qs[e] & 15) - 8);
      dst[e + 16] = d * ((b[i].qs[e] >> 4) - 8);
    }
  }
}

// The value of largest magnitude maps to -8 exactly (d takes its sign), so the whole
// asymmetric range -8..7 is used.
void from_float_q4_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float amax = 0, vmax = 0;
    for (int e = 0; e < kQ32; ++e) {
      if (std::fabs(x[e]) > amax) amax = std::fabs(x[e]), vmax = x[e];
    }
    float d = vmax / -8.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    uint8_t q[kQ32];
    for (int e = 0; e < kQ32; ++e) q[e] = uint8_t(std::clamp(std::nearbyint(x[e] * id) + 8.0f, 0.0f, 15.0f));
    for (int e = 0; e < 16; ++e) b[i].qs[e] = uint8_t(q[e] | (q[e + 16] << 4));
  }
}

void vec_dot_q4_0_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < 16; ++e) {
      isum += ((a[i].qs[e] & 15) - 8) * b[i].qs[e];
      isum += ((a[i].qs[e] >> 4) - 8) * b[i].qs[e + 16];
    }
    sum += float(isum) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  *out = sum;
}

// ---- MXFP4 -------------------------------------------------------------------------

void to_float_mxfp4_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockMXFP4*>(src);
  for (int64_t i = 0; i < n / kQ32; ++i, dst += kQ32) {
    float d = e8m0_half_to_f32(b[i].e);
    for (int e = 0; e < 16; ++e) {
      dst[e] = d * kMxfp4Values[b[i].qs[e] & 15];
      dst[e + 16] = d * kMxfp4Values[b[i].qs[e] >> 4];
    }
  }
}

namespace {
// Nearest E2M1 code for v (in units of the block scale; the table's doubled values).
inline int mxfp4_code(float v) {
  float a = std::fabs(v);
  int c = a < 0.5f ? 0 : a < 1.5f ? 1 : a < 2.5f ? 2 : a < 3.5f ? 3 : a < 5.0f ? 4 : a < 7.0f ? 5 : a < 10.0f ? 6 : 7;
  return v < 0 && c ? c | 8 : c;
}
}  // namespace

// Tries the smallest exponent that represents max|x| without clipping and the next
// smaller one (finer steps, top value clipped), keeping whichever has less squared error.
void from_float_mxfp4_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    float amax = 0;
    for (int e = 0; e < kQ32; ++e) amax = std::max(amax, std::fabs(x[e]));
    int e_hi = 0;
    if (amax > 0) {
      int k;
      float f = std::frexp(amax / 12.0f, &k);  // amax/12 = f * 2^k, f in [0.5, 1)
      e_hi = std::clamp((f == 0.5f ? k - 1 : k) + 128, 0, 254);
    }
    uint8_t best_codes[kQ32];
    float best_err = INFINITY;
    int best_e = e_hi;
    for (int e = e_hi; e >= std::max(0, e_hi - 1); --e) {
      float s = e8m0_half_to_f32(uint8_t(e));  // 1/s overflows for e == 0: divide
      uint8_t codes[kQ32];
      float err = 0;
      for (int j = 0; j < kQ32; ++j) {
        codes[j] = uint8_t(mxfp4_code(x[j] / s));
        float r = x[j] - s * kMxfp4Values[codes[j]];
        err += r * r;
      }
      if (err < best_err) {
        best_err = err;
        best_e = e;
        std::copy(codes, codes + kQ32, best_codes);
      }
    }
    b[i].e = uint8_t(best_e);
    for (int e = 0; e < 16; ++e) b[i].qs[e] = uint8_t(best_codes[e] | (best_codes[e + 16] << 4));
  }
}

void vec_dot_mxfp4_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockMXFP4*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQ32; ++i) {
    int isum = 0;
    for (int e = 0; e < 16; ++e) {
      isum += kMxfp4Values[a[i].qs[e] & 15] * b[i].qs[e];
      isum += kMxfp4Values[a[i].qs[e] >> 4] * b[i].qs[e + 16];
    }
    sum += float(isum) * (e8m0_half_to_f32(a[i].e) * fp16_to_f32(b[i].d));
  }
  *out = sum;
}

}  // namespace deltafin::kern
