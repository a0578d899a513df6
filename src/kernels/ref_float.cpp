// Scalar reference kernels of the float types F32, F16, BF16. Dot products
// accumulate in double, so the reference is at least as accurate as any SIMD path.
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/kernels_impl.h"

namespace deltafin::kern {

void to_float_f32_ref(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void from_float_f32_ref(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void vec_dot_f32_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
  *out = float(s);
}

void to_float_f16_ref(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
}
void from_float_f16_ref(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(src[i]);
}
void vec_dot_f16_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(fp16_to_f32(a[i])) * fp16_to_f32(b[i]);
  *out = float(s);
}

void to_float_bf16_ref(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}
void from_float_bf16_ref(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}
void vec_dot_bf16_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(bf16_to_f32(a[i])) * bf16_to_f32(b[i]);
  *out = float(s);
}

}  // namespace deltafin::kern
