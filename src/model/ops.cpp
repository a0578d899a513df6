#include "model/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu_x86.h"
#include "kernels/types.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace deltafin {

// The compiler's half type: __fp16 on AArch64 (GCC 12 has no _Float16 in C++ there),
// _Float16 on x86-64; both convert with round-to-nearest-even. A compiler without
// one (clang before 15 on x86-64) uses the F16 row's scalar reference, which rounds
// the same way.
#if defined(__aarch64__)
#define DF_HAS_HALF 1
using Half = __fp16;
#elif defined(__FLT16_MAX__)
#define DF_HAS_HALF 1
using Half = _Float16;
#endif

#if defined(DF_HAS_HALF)
float fp16_to_fp32(uint16_t h) {
  Half v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}
uint16_t fp32_to_fp16(float f) {
  Half v = static_cast<Half>(f);
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}
#else
float fp16_to_fp32(uint16_t h) {
  float f;
  type_traits_ref(DType::F16)->to_float(&h, &f, 1);
  return f;
}
uint16_t fp32_to_fp16(float f) {
  uint16_t h;
  type_traits_ref(DType::F16)->from_float(&f, &h, 1);
  return h;
}
#endif

#if defined(__x86_64__)
namespace {
__attribute__((target("avx,f16c"))) void round_fp16_f16c(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) y[i] = round_fp16(x[i]);
}
__attribute__((target("avx,f16c"))) void to_fp16_f16c(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
__attribute__((target("avx,f16c"))) inline __m256 load8_h(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// No FMA: the baseline build's dot_lanes multiplies and adds separately.
__attribute__((target("avx,f16c"))) float dot_lanes_f16c(const uint16_t* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(load8_h(a + i), _mm256_loadu_ps(b + i)));
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  float s = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
  for (; i < n; ++i) s += fp16_to_fp32(a[i]) * b[i];
  return s;
}
__attribute__((target("avx,f16c"))) void axpy_f16c(float a, const uint16_t* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(av, load8_h(x + i))));
  for (; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}
const bool kHasF16c = cpu_x86_f16c() && __builtin_cpu_supports("avx");
}  // namespace
#endif

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One lane of ggml_v_expf (ggml-cpu/vec.h), AVX-512 (lanes 16) or AVX2 (8) form:
// every vector operation is an IEEE operation on the lane, so fma and float
// arithmetic give its result bit for bit. Only called where silu_lanes() > 0, i.e.
// on a CPU with AVX2 and FMA, so std::fma can be the instruction.
#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
#endif
float ggml_expf_lane(float x, int lanes) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float p = std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
  if (lanes == 16) {
    const float j = std::fma(p, u, std::fma(0x1.ffffecp-1f, b, 1.0f));
    if (std::fabs(n) > 192) return n <= 0 ? 0.0f : INFINITY;
    return std::ldexp(j, int(n));  // _mm512_scalef_ps(j, n)
  }
  const float j = std::fma(p, u, 0x1.ffffecp-1f * b);
  const uint32_t e = bits_of(z) << 23;
  const float k = float_of(e + bits_of(1.0f));
  if (!(std::fabs(n) > 126)) return std::fma(j, k, k);
  const uint32_t g = n <= 0 ? 0x82000000u : 0u;
  const float s1 = float_of(g + 0x7f000000u);
  const float s2 = float_of(e - g);
  if (std::fabs(n) > 192) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

}  // namespace

namespace {
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void mad_f32_fma(int64_t n, float* y, const float* x, float v) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], v, y[i]);
}
const bool kHasAvx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
}  // namespace

void mad_f32(int64_t n, float* y, const float* x, float v) {
#if defined(__x86_64__)
  if (kHasAvx2Fma) return mad_f32_fma(n, y, x, v);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], v, y[i]);
}

int silu_lanes() {
  static const int lanes = [] {
    const TypeTraits* t = type_traits(DType::F32);
    if (t == nullptr) return 0;
    return t->isa == Isa::AVX512 ? 16 : t->isa == Isa::AVX2 ? 8 : 0;
  }();
  return lanes;
}

float silu_vec(float x, int lanes) { return x / (1.0f + ggml_expf_lane(0.0f - x, lanes)); }

void to_fp16_n(const float* x, uint16_t* y, int64_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return to_fp16_f16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

float dot_lanes_f16(const uint16_t* a, const float* b, int64_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return dot_lanes_f16c(a, b, n);
#endif
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += fp16_to_fp32(a[i + l]) * b[i + l];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += fp16_to_fp32(a[i]) * b[i];
  return s;
}

void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return axpy_f16c(a, x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

void round_fp16_n(const float* x, float* y, int64_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return round_fp16_f16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = round_fp16(x[i]);
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i] * x[i]);
  const float mean = float(sum / double(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void rms_norm_rows(const float* x, const float* w, int64_t n, int64_t rows, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) rms_norm(x + r * n, w, n, eps, y + r * n);
}

void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = float(sum / double(n));
  double var = 0;
  for (int64_t i = 0; i < n; ++i) {
    float d = x[i] - mean;
    y[i] = d;
    var += double(d * d);
  }
  const float scale = 1.0f / std::sqrt(float(var / double(n)) + eps);
  for (int64_t i = 0; i < n; ++i) {
    float v = y[i] * scale;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

void softmax_inplace(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    float e = (x[i] == -INFINITY) ? 0.0f : std::exp(x[i] - mx);
    x[i] = e;
    sum += double(e);
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void get_row(const Tensor& t, int64_t row, float* out) {
  const char* p = static_cast<const char*>(t.data) + uint64_t(row) * t.row_bytes();
  if (t.type == DType::F32) {
    std::memcpy(out, p, sizeof(float) * size_t(t.ne[0]));
    return;
  }
  type_traits(t.type)->to_float(p, out, t.ne[0]);
}

std::vector<float> to_f32(const Tensor& t) {
  if (!t.valid()) return {};  // absent, or bound by a checking WeightLoader
  int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
  std::vector<float> v(static_cast<size_t>(n));
  if (t.type == DType::F32) {
    std::memcpy(v.data(), t.data, sizeof(float) * size_t(n));
  } else {
    type_traits(t.type)->to_float(t.data, v.data(), n);
  }
  return v;
}

namespace {
// YaRN helpers, as ggml defines them: the dimension at which the rotation count
// over the original context equals n_rot.
float rope_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return float(n_dims) * std::log(float(n_ctx_orig) / (n_rot * 2.0f * float(M_PI))) / (2.0f * std::log(base));
}
float rope_ramp(float low, float high, int i0) {
  float y = (float(i0) / 2.0f - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}
}  // namespace

void rope_cache(const RopeParams& p, float pos, float* cache) {
  const int n_dims = p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / float(n_dims));
  float corr0 = 0, corr1 = 0;
  if (p.n_ctx_orig > 0) {
    corr0 = std::max(0.0f, std::floor(rope_corr_dim(n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    corr1 = std::min(float(n_dims - 1),
                     std::ceil(rope_corr_dim(n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  float theta_extrap = pos;
  for (int i0 = 0; i0 < n_dims; i0 += 2) {
    float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      float ramp_mix = rope_ramp(corr0, corr1, i0) * p.ext_factor;
      theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cache[i0] = std::cos(theta) * mscale;
    cache[i0 + 1] = std::sin(theta) * mscale;
    theta_extrap *= theta_scale;
  }
}

void rope_apply(const RopeParams& p, const float* cache, float* x, int n_heads, int head_dim) {
  const int n_dims = p.n_rot;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
      const float c = cache[i0], s = cache[i0 + 1];
      int a, b;
      if (p.neox) {
        a = i0 / 2;
        b = i0 / 2 + n_dims / 2;
      } else {
        a = i0;
        b = i0 + 1;
      }
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace deltafin
