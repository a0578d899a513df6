// Scalar reference kernels of the K-quants (Q2_K .. Q6_K) and of their activation
// type Q8_K. Dot products sum exact integer products per super-block (sub-block
// scales applied in integers, the mins through Q8_K's bsums) and scale once by the
// product of the super-block scales, as ggml does.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/kernels_impl.h"

namespace deltafin::kern {
namespace {

inline int round_clamp(float v, int lo, int hi) {
  return std::clamp(int(std::nearbyint(v)), lo, hi);
}

// Fits x[i] ~ s * q[i] - m with q in 0..nmax, s >= 0, m >= 0 (the mins of Q2_K, Q4_K and
// Q5_K can only shift values down). Starts from the min/max range and refines (s, m)
// by least squares for the current q, keeping the best fit seen.
void fit_affine(const float* x, int n, int nmax, float* s_out, float* m_out) {
  float lo = 0, hi = 0;
  for (int i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  float s = (hi - lo) / float(nmax), m = -lo;
  *s_out = s, *m_out = m;
  if (s <= 0) return;
  auto sse = [&](float s, float m) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      float q = s > 0 ? float(round_clamp((x[i] + m) / s, 0, nmax)) : 0.0f;
      float r = s * q - m - x[i];
      e += r * r;
    }
    return e;
  };
  float best = sse(s, m);
  for (int iter = 0; iter < 3; ++iter) {
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      double q = round_clamp((x[i] + m) / s, 0, nmax);
      sq += q, sqq += q * q, sx += x[i], sqx += q * x[i];
    }
    // Minimise sum (s q - m - x)^2: [sqq -sq; sq -n] [s m]' = [sqx sx]'.
    double det = sq * sq - sqq * n;
    double ns, nm;
    if (det != 0) {
      ns = (sq * sx - n * sqx) / det;
      nm = (sqq * sx - sq * sqx) / det;
    } else {
      ns = s, nm = m;
    }
    if (nm < 0) nm = 0, ns = sqq > 0 ? sqx / sqq : s;
    if (!(ns > 0)) break;
    float e = sse(float(ns), float(nm));
    if (!(e < best)) break;
    best = e, s = float(ns), m = float(nm);
  }
  *s_out = s, *m_out = m;
}

// Fits x[i] ~ s * q[i] with q in -nneg..nneg-1. The value of largest magnitude maps
// to -nneg (s takes its sign); then s is refined by least squares.
float fit_symmetric(const float* x, int n, int nneg) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
  }
  if (amax == 0) return 0;
  float s = vmax / float(-nneg);
  auto sse = [&](float s) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      float r = s * float(round_clamp(x[i] / s, -nneg, nneg - 1)) - x[i];
      e += r * r;
    }
    return e;
  };
  float best = sse(s);
  for (int iter = 0; iter < 3; ++iter) {
    double sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      double q = round_clamp(x[i] / s, -nneg, nneg - 1);
      sqq += q * q, sqx += q * x[i];
    }
    if (sqq == 0) break;
    float ns = float(sqx / sqq);
    if (ns == 0) break;
    float e = sse(ns);
    if (!(e < best)) break;
    best = e, s = ns;
  }
  return s;
}

// Quantizes sub-block scales/mins (all >= 0) to integers 0..qmax with one float
// super-scale each; returns the fp16 super-scales via d/dmin.
void quantize_affine_scales(const float* s, const float* m, int nsub, int qmax, uint8_t* sc,
                            uint8_t* mq, uint16_t* d, uint16_t* dmin) {
  float smax = 0, mmax = 0;
  for (int j = 0; j < nsub; ++j) smax = std::max(smax, s[j]), mmax = std::max(mmax, m[j]);
  float ds = smax / float(qmax), dm = mmax / float(qmax);
  *d = f32_to_fp16(ds);
  *dmin = f32_to_fp16(dm);
  for (int j = 0; j < nsub; ++j) {
    sc[j] = uint8_t(ds > 0 ? round_clamp(s[j] / ds, 0, qmax) : 0);
    mq[j] = uint8_t(dm > 0 ? round_clamp(m[j] / dm, 0, qmax) : 0);
  }
}

// q for each value of an affine sub-block given the stored (rounded) scales.
void quantize_affine_values(const float* x, int n, float ds, float dm, int nmax, uint8_t* q) {
  for (int i = 0; i < n; ++i) q[i] = uint8_t(ds > 0 ? round_clamp((x[i] + dm) / ds, 0, nmax) : 0);
}

}  // namespace

// ---- Q8_K --------------------------------------------------------------------------

void to_float_q8_k_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    for (int e = 0; e < kQK; ++e) dst[e] = b[i].d * b[i].qs[e];
  }
}

// q = round_nearest_even(x * 127 / max|x|), d = max|x| / 127 (as 1 / that factor).
// The SIMD quantizers perform the same float operations and match byte for byte.
void from_float_q8_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0;
    for (int e = 0; e < kQK; ++e) amax = std::max(amax, std::fabs(x[e]));
    if (amax == 0) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    float iscale = 127.0f / amax;
    for (int e = 0; e < kQK; ++e) {
      b[i].qs[e] = int8_t(std::clamp(std::nearbyint(x[e] * iscale), -127.0f, 127.0f));
    }
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int e = 0; e < 16; ++e) s += b[i].qs[16 * j + e];
      b[i].bsums[j] = int16_t(s);
    }
    b[i].d = 1.0f / iscale;
  }
}

void vec_dot_q8_k_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int e = 0; e < kQK; ++e) isum += a[i].qs[e] * b[i].qs[e];
    sum += a[i].d * b[i].d * float(isum);
  }
  *out = sum;
}

// ---- Q2_K --------------------------------------------------------------------------

void to_float_q2_k_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    for (int e = 0; e < kQK; ++e) {
      int h = e / 128, s = (e % 128) / 32, l = e % 32;
      int q = (b[i].qs[32 * h + l] >> (2 * s)) & 3;
      uint8_t sc = b[i].scales[e / 16];
      dst[e] = d * float(sc & 15) * float(q) - dmin * float(sc >> 4);
    }
  }
}

void from_float_q2_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float s[16], m[16];
    for (int j = 0; j < 16; ++j) fit_affine(x + 16 * j, 16, 3, &s[j], &m[j]);
    uint8_t sc[16], mq[16];
    quantize_affine_scales(s, m, 16, 15, sc, mq, &b[i].d, &b[i].dmin);
    float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    uint8_t q[kQK];
    for (int j = 0; j < 16; ++j) {
      b[i].scales[j] = uint8_t(sc[j] | (mq[j] << 4));
      quantize_affine_values(x + 16 * j, 16, d * sc[j], dmin * mq[j], 3, q + 16 * j);
    }
    std::memset(b[i].qs, 0, sizeof(b[i].qs));
    for (int e = 0; e < kQK; ++e) {
      int h = e / 128, sh = (e % 128) / 32, l = e % 32;
      b[i].qs[32 * h + l] |= uint8_t(q[e] << (2 * sh));
    }
  }
}

void vec_dot_q2_k_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 16; ++j) msum += (a[i].scales[j] >> 4) * b[i].bsums[j];
    for (int j = 0; j < 16; ++j) {
      int part = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        part += ((a[i].qs[32 * h + l] >> (2 * s)) & 3) * b[i].qs[e];
      }
      isum += (a[i].scales[j] & 15) * part;
    }
    sum += b[i].d * fp16_to_f32(a[i].d) * float(isum) - b[i].d * fp16_to_f32(a[i].dmin) * float(msum);
  }
  *out = sum;
}

// ---- Q3_K --------------------------------------------------------------------------

namespace {
inline int q3k_value(const BlockQ3_K& b, int e) {  // q - 4, in -4..3
  int h = e / 128, s = (e % 128) / 32, l = e % 32;
  int lo = (b.qs[32 * h + l] >> (2 * s)) & 3;
  int hi = (b.hmask[l] >> (4 * h + s)) & 1;
  return lo + 4 * hi - 4;
}
}  // namespace

void to_float_q3_k_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    float d = fp16_to_f32(b[i].d);
    int8_t sc[16];
    unpack_scales_q3k(b[i].scales, sc);
    for (int e = 0; e < kQK; ++e) dst[e] = d * float(sc[e / 16]) * float(q3k_value(b[i], e));
  }
}

void from_float_q3_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float s[16], smax = 0;
    for (int j = 0; j < 16; ++j) s[j] = fit_symmetric(x + 16 * j, 16, 4), smax = std::max(smax, std::fabs(s[j]));
    float ds = smax / 31.0f;
    b[i].d = f32_to_fp16(ds);
    float d = fp16_to_f32(b[i].d);
    int8_t sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = int8_t(ds > 0 ? round_clamp(s[j] / ds, -32, 31) : 0);
    pack_scales_q3k(sc, b[i].scales);
    std::memset(b[i].qs, 0, sizeof(b[i].qs));
    std::memset(b[i].hmask, 0, sizeof(b[i].hmask));
    for (int e = 0; e < kQK; ++e) {
      float step = d * float(sc[e / 16]);
      int q = (step != 0 ? round_clamp(x[e] / step, -4, 3) : 0) + 4;  // 0..7
      int h = e / 128, sh = (e % 128) / 32, l = e % 32;
      b[i].qs[32 * h + l] |= uint8_t((q & 3) << (2 * sh));
      b[i].hmask[l] |= uint8_t((q >> 2) << (4 * h + sh));
    }
  }
}

void vec_dot_q3_k_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int8_t sc[16];
    unpack_scales_q3k(a[i].scales, sc);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      int part = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) part += q3k_value(a[i], e) * b[i].qs[e];
      isum += sc[j] * part;
    }
    sum += fp16_to_f32(a[i].d) * b[i].d * float(isum);
  }
  *out = sum;
}

// ---- Q4_K / Q5_K -------------------------------------------------------------------

namespace {
// q of element e (0..255) of a Q4_K / Q5_K super-block.
inline int q4k_value(const uint8_t* qs, int e) {
  int c = e / 64, l = e % 32;
  return (e % 64) < 32 ? (qs[32 * c + l] & 15) : (qs[32 * c + l] >> 4);
}
inline int q5k_value(const BlockQ5_K& b, int e) {
  int c = e / 64, l = e % 32, hi = (e % 64) >= 32;
  return q4k_value(b.qs, e) | (((b.qh[l] >> (2 * c + hi)) & 1) << 4);
}

template <class Block>
void quantize_k_affine(const float* x, Block* b, int nmax, uint8_t* q) {
  float s[8], m[8];
  for (int j = 0; j < 8; ++j) fit_affine(x + 32 * j, 32, nmax, &s[j], &m[j]);
  uint8_t sc[8], mq[8];
  quantize_affine_scales(s, m, 8, 63, sc, mq, &b->d, &b->dmin);
  pack_scales_k4(sc, mq, b->scales);
  float d = fp16_to_f32(b->d), dmin = fp16_to_f32(b->dmin);
  for (int j = 0; j < 8; ++j) quantize_affine_values(x + 32 * j, 32, d * sc[j], dmin * mq[j], nmax, q + 32 * j);
}

template <class Block, int (*Value)(const Block&, int)>
float dot_k_affine(const Block& a, const BlockQ8_K& b) {
  uint8_t sc[8], m[8];
  unpack_scales_k4(a.scales, sc, m);
  int isum = 0, msum = 0;
  for (int j = 0; j < 8; ++j) {
    int part = 0;
    for (int e = 32 * j; e < 32 * j + 32; ++e) part += Value(a, e) * b.qs[e];
    isum += sc[j] * part;
    msum += m[j] * (b.bsums[2 * j] + b.bsums[2 * j + 1]);
  }
  return b.d * fp16_to_f32(a.d) * float(isum) - b.d * fp16_to_f32(a.dmin) * float(msum);
}

inline int q4k_value_b(const BlockQ4_K& b, int e) { return q4k_value(b.qs, e); }
}  // namespace

void to_float_q4_k_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    uint8_t sc[8], m[8];
    unpack_scales_k4(b[i].scales, sc, m);
    for (int e = 0; e < kQK; ++e) dst[e] = d * float(sc[e / 32]) * float(q4k_value(b[i].qs, e)) - dmin * float(m[e / 32]);
  }
}

void from_float_q4_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t q[kQK];
    quantize_k_affine(x, &b[i], 15, q);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) b[i].qs[32 * c + l] = uint8_t(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
  }
}

void vec_dot_q4_k_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) sum += dot_k_affine<BlockQ4_K, q4k_value_b>(a[i], b[i]);
  *out = sum;
}

void to_float_q5_k_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    uint8_t sc[8], m[8];
    unpack_scales_k4(b[i].scales, sc, m);
    for (int e = 0; e < kQK; ++e) dst[e] = d * float(sc[e / 32]) * float(q5k_value(b[i], e)) - dmin * float(m[e / 32]);
  }
}

void from_float_q5_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t q[kQK];
    quantize_k_affine(x, &b[i], 31, q);
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        uint8_t lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        b[i].qs[32 * c + l] = uint8_t((lo & 15) | ((hi & 15) << 4));
        b[i].qh[l] |= uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void vec_dot_q5_k_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) sum += dot_k_affine<BlockQ5_K, q5k_value>(a[i], b[i]);
  *out = sum;
}

// ---- Q6_K --------------------------------------------------------------------------

namespace {
inline int q6k_value(const BlockQ6_K& b, int e) {  // q - 32, in -32..31
  int h = e / 128, k = (e % 128) / 32, l = e % 32;
  uint8_t lo = b.ql[64 * h + 32 * (k & 1) + l];
  int q = (k < 2 ? lo & 15 : lo >> 4) | (((b.qh[32 * h + l] >> (2 * k)) & 3) << 4);
  return q - 32;
}
}  // namespace

void to_float_q6_k_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < kQK; ++e) dst[e] = d * float(b[i].scales[e / 16]) * float(q6k_value(b[i], e));
  }
}

void from_float_q6_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float s[16], smax = 0;
    for (int j = 0; j < 16; ++j) s[j] = fit_symmetric(x + 16 * j, 16, 32), smax = std::max(smax, std::fabs(s[j]));
    float ds = smax / 127.0f;
    b[i].d = f32_to_fp16(ds);
    float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) b[i].scales[j] = int8_t(ds > 0 ? round_clamp(s[j] / ds, -127, 127) : 0);
    std::memset(b[i].ql, 0, sizeof(b[i].ql));
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int e = 0; e < kQK; ++e) {
      float step = d * float(b[i].scales[e / 16]);
      int q = (step != 0 ? round_clamp(x[e] / step, -32, 31) : 0) + 32;  // 0..63
      int h = e / 128, k = (e % 128) / 32, l = e % 32;
      b[i].ql[64 * h + 32 * (k & 1) + l] |= uint8_t((q & 15) << (k < 2 ? 0 : 4));
      b[i].qh[32 * h + l] |= uint8_t((q >> 4) << (2 * k));
    }
  }
}

void vec_dot_q6_k_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      int part = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) part += q6k_value(a[i], e) * b[i].qs[e];
      isum += a[i].scales[j] * part;
    }
    sum += fp16_to_f32(a[i].d) * b[i].d * float(isum);
  }
  *out = sum;
}

}  // namespace deltafin::kern
