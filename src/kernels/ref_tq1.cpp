// Scalar reference of TQ1_0 (layout in blocks_legacy.h): to_float, the quantizer and
// the dot against Q8_K, the exact integer sum of (t - 1) * q8 per super-block scaled
// by d_w * d_x, as TQ2_0's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {
namespace {

// Digit k (0 = most significant) of a base-3 byte.
inline int tq1_digit(uint8_t b, int k) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  return (uint8_t(b * kPow3[k]) * 3) >> 8;
}

// The 256 ternary values t - 1 of a block, in element order.
void tq1_values(const BlockTQ1_0& b, int8_t* v) {
  for (int k = 0; k < 5; ++k)
    for (int m = 0; m < 32; ++m) v[32 * k + m] = int8_t(tq1_digit(b.qs[m], k) - 1);
  for (int k = 0; k < 5; ++k)
    for (int m = 0; m < 16; ++m) v[160 + 16 * k + m] = int8_t(tq1_digit(b.qs[32 + m], k) - 1);
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j) v[240 + 4 * k + j] = int8_t(tq1_digit(b.qh[j], k) - 1);
}

// Digits t[0..count) (t[0] most significant) as one byte: ceil(v * 256 / 243) for
// v = sum t_k 3^(4-k), missing digits 0.
uint8_t tq1_pack(const int* t, int count) {
  int v = 0;
  for (int k = 0; k < 5; ++k) v = 3 * v + (k < count ? t[k] : 0);
  return uint8_t((v * 256 + 242) / 243);
}

}  // namespace

void to_float_tq1_0_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockTQ1_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d);
    int8_t v[kQK];
    tq1_values(b[i], v);
    for (int e = 0; e < kQK; ++e) dst[e] = d * float(v[e]);
  }
}

// d = max|x|, t = round(x / d) + 1 (as llama.cpp's TQ1_0 quantizer).
void from_float_tq1_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockTQ1_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0;
    for (int e = 0; e < kQK; ++e) amax = std::max(amax, std::fabs(x[e]));
    const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
    b[i].d = f32_to_fp16(amax);
    int t[kQK];
    for (int e = 0; e < kQK; ++e) t[e] = std::clamp(int(std::lround(x[e] * id)), -1, 1) + 1;
    int digits[5];
    for (int m = 0; m < 32; ++m) {
      for (int k = 0; k < 5; ++k) digits[k] = t[32 * k + m];
      b[i].qs[m] = tq1_pack(digits, 5);
    }
    for (int m = 0; m < 16; ++m) {
      for (int k = 0; k < 5; ++k) digits[k] = t[160 + 16 * k + m];
      b[i].qs[32 + m] = tq1_pack(digits, 5);
    }
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 4; ++k) digits[k] = t[240 + 4 * k + j];
      b[i].qh[j] = tq1_pack(digits, 4);
    }
  }
}

void vec_dot_tq1_0_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockTQ1_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int8_t v[kQK];
    tq1_values(a[i], v);
    int isum = 0;
    for (int e = 0; e < kQK; ++e) isum += v[e] * y[i].qs[e];
    sum += float(isum) * (fp16_to_f32(a[i].d) * y[i].d);
  }
  *out = sum;
}

}  // namespace deltafin::kern
