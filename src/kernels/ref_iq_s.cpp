// Scalar reference kernels of IQ2_S and IQ3_S (layouts and codebooks in iq_grids.h):
// the definition the SIMD kernels are tested against. As the other grid i-quants,
// but with eight free sign bits per run of eight (no parity): dot products against
// Q8_K are exact integer sums per group times the group's odd scale 2 ls + 1, one
// float product per super-block and the common factor (1/8 for IQ2_S) at the end.
#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {

namespace {

inline int iq2s_index(const BlockIQ2_S& b, int r) { return b.qs[r] | (((b.qh[r / 4] >> (2 * (r % 4))) & 3) << 8); }
inline int iq2s_ls(const BlockIQ2_S& b, int h) { return (b.scales[h / 2] >> (4 * (h % 2))) & 15; }
inline int iq3s_index(const BlockIQ3_S& b, int c) { return b.qs[c] | (((b.qh[c / 8] >> (c % 8)) & 1) << 8); }
inline int iq3s_ls(const BlockIQ3_S& b, int ib) { return (b.scales[ib / 2] >> (4 * (ib % 2))) & 15; }

}  // namespace

// ---- IQ2_S ---------------------------------------------------------------------------

void to_float_iq2_s_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_S*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int r = 0; r < 32; ++r) {
      const float db = d * (0.5f + float(iq2s_ls(b[i], r / 2))) * 0.25f;
      const uint64_t g = kIq2sGrid[size_t(iq2s_index(b[i], r))];
      const uint8_t s = b[i].qs[32 + r];
      for (int j = 0; j < 8; ++j) {
        const float v = db * float((g >> (8 * j)) & 255);
        *dst++ = (s >> j) & 1 ? -v : v;
      }
    }
  }
}

void vec_dot_iq2_s_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ2_S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int8_t* q8 = y[i].qs;
    int bsum = 0;
    for (int h = 0; h < 16; ++h) {  // halves of 16: two runs of eight
      int sumi = 0;
      for (int r = 2 * h; r < 2 * h + 2; ++r) {
        const uint64_t g = kIq2sGrid[size_t(iq2s_index(a[i], r))];
        const uint8_t s = a[i].qs[32 + r];
        for (int j = 0; j < 8; ++j, ++q8) {
          const int v = int((g >> (8 * j)) & 255) * *q8;
          sumi += (s >> j) & 1 ? -v : v;
        }
      }
      bsum += sumi * (2 * iq2s_ls(a[i], h) + 1);
    }
    sum += fp16_to_f32(a[i].d) * y[i].d * float(bsum);
  }
  *out = 0.125f * sum;
}

// ---- IQ3_S ---------------------------------------------------------------------------

void to_float_iq3_s_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ3_S*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int c = 0; c < 64; ++c) {  // cells of four
      const float db = d * float(2 * iq3s_ls(b[i], c / 8) + 1);
      const uint32_t g = kIq3sGrid[size_t(iq3s_index(b[i], c))];
      const uint8_t s = b[i].signs[c / 2];
      for (int j = 0; j < 4; ++j) {
        const float v = db * float((g >> (8 * j)) & 255);
        *dst++ = (s >> (4 * (c % 2) + j)) & 1 ? -v : v;
      }
    }
  }
}

void vec_dot_iq3_s_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ3_S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int8_t* q8 = y[i].qs;
    int bsum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      int sumi = 0;
      for (int c = 8 * ib; c < 8 * ib + 8; ++c) {
        const uint32_t g = kIq3sGrid[size_t(iq3s_index(a[i], c))];
        const uint8_t s = a[i].signs[c / 2];
        for (int j = 0; j < 4; ++j, ++q8) {
          const int v = int((g >> (8 * j)) & 255) * *q8;
          sumi += (s >> (4 * (c % 2) + j)) & 1 ? -v : v;
        }
      }
      bsum += sumi * (2 * iq3s_ls(a[i], ib) + 1);
    }
    sum += fp16_to_f32(a[i].d) * y[i].d * float(bsum);
  }
  *out = sum;
}

}  // namespace deltafin::kern
