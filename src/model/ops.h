// Elementwise and small ops of the forward pass, computed the way ggml's CPU
// backend computes them (same accumulation precision and order where it matters
// for matching llama.cpp's logits). All take row-major float buffers.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace deltafin {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
// Round a float through fp16 (what a copy into an F16 buffer does).
inline float round_fp16(float f) { return fp16_to_fp32(fp32_to_fp16(f)); }
// y[i] = round_fp16(x[i]) for n values (in place allowed), with the CPU's F16C
// conversions where it has them: the same round-to-nearest-even, bit for bit.
void round_fp16_n(const float* x, float* y, int64_t n);
// y[i] = fp32_to_fp16(x[i]) for n values (F16C where the CPU has it).
void to_fp16_n(const float* x, uint16_t* y, int64_t n);

// Dot product in 8 lanes, summed pairwise at the end: the compiler vectorizes it
// (a single running sum it may not reorder), and ggml's SIMD dot products also sum
// in lanes, so the two agree to float rounding. Used for attention's K.Q.
inline float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// dot_lanes with `a` in F16 (a KV cache row): the same lanes, products and sums on
// the converted values, so the same result as dot_lanes over them as floats.
float dot_lanes_f16(const uint16_t* a, const float* b, int64_t n);
// y[i] += a * x[i] for x in F16 (P.V over a KV cache row), separate multiply and add.
void axpy_f16(float a, const uint16_t* x, float* y, int64_t n);

// y = x / sqrt(mean(x^2) + eps) * w  (w may be null: no weight). In place allowed.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);
// Row-wise: `rows` rows of n.
void rms_norm_rows(const float* x, const float* w, int64_t n, int64_t rows, float eps, float* y);
// Layer norm with optional weight and bias.
void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* y);

// Softmax of n values in place (max-subtracted, double accumulation like ggml).
void softmax_inplace(float* x, int64_t n);
inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }
// silu as ggml's CPU build computes a row with ggml_vec_silu_f32: the first
// n - n % silu_lanes() values of a row through its vector exp approximation
// (ggml_v_expf of the AVX-512 or AVX2 build, per lane: silu_vec), the rest with expf
// (silu). silu_lanes() follows the selected instruction set (16, 8, or 0: all silu).
int silu_lanes();
float silu_vec(float x, int lanes);
// y[i] = fma(x[i], v, y[i]): one rounding per element, as ggml_vec_mad_f32 (and loops
// the compiler contracts) in llama.cpp's CPU build. Model code is built for baseline
// x86-64, where std::fma is a library call; this runs an FMA build where the CPU has it.
void mad_f32(int64_t n, float* y, const float* x, float v);
inline float sigmoid(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }

// Reads row `row` of a 2-D table tensor (any type) into `out` as floats.
void get_row(const Tensor& t, int64_t row, float* out);
// Converts a whole small tensor (norm weights, biases) to floats; empty for an
// invalid tensor (one without data).
std::vector<float> to_f32(const Tensor& t);

// Rotary position embedding parameters (ggml_rope_ext arguments).
struct RopeParams {
  int n_rot = 0;             // dims rotated per head (from the start of the head)
  bool neox = false;         // NEOX pairs (i, i + n_rot/2); otherwise adjacent pairs
  float freq_base = 10000.f;
  float freq_scale = 1.f;
  int n_ctx_orig = 0;        // YaRN: original training context
  float ext_factor = 0.f;    // YaRN: > 0 enables the extrapolation mix
  float attn_factor = 1.f;
  float beta_fast = 32.f;
  float beta_slow = 1.f;
};

// cos/sin table for one position: cache[2*i] = cos, cache[2*i+1] = sin for i < n_rot/2.
void rope_cache(const RopeParams& p, float pos, float* cache);
// Rotates `n_heads` heads of size head_dim stored back to back, in place.
void rope_apply(const RopeParams& p, const float* cache, float* x, int n_heads, int head_dim);

}  // namespace deltafin
