// Scalar reference kernels of IQ1_S and IQ1_M (layouts and codebook in iq_grids.h):
// the definition the SIMD kernels are tested against. A value is d (2 ls + 1) times
// a ternary coordinate g plus a delta of +-1/8; in units of 1/8 that is the integer
// 8 g +- 1 (|.| <= 9), so the dot against Q8_K is exact in integers per super-block:
// sum over scale groups of (2 ls + 1) * sum (8 g + delta) q8, then one float product
// d * d8 per super-block and 1/8 at the end. (ggml sums the grid and delta parts
// separately, d d8 (sumi + sumi1 / 8): the same number up to float rounding.)
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {

namespace {

inline int grid_coord(uint64_t g, int j) { return int(int8_t((g >> (8 * j)) & 255)); }

// IQ1_S group ib: the grid index of run l, the scale code and delta sign (+1 / -1).
inline int iq1s_index(const BlockIQ1_S& b, int ib, int l) { return b.qs[4 * ib + l] | (((b.qh[ib] >> (3 * l)) & 7) << 8); }
inline int iq1s_ls(const BlockIQ1_S& b, int ib) { return (b.qh[ib] >> 12) & 7; }
inline int iq1s_delta(const BlockIQ1_S& b, int ib) { return b.qh[ib] & 0x8000 ? -1 : 1; }

// IQ1_M run r (< 32): grid index and delta sign; half h (< 16): scale code.
inline int iq1m_index(const BlockIQ1_M& b, int r) { return b.qs[r] | (((b.qh[r / 2] >> (4 * (r % 2))) & 7) << 8); }
inline int iq1m_delta(const BlockIQ1_M& b, int r) { return (b.qh[r / 2] >> (4 * (r % 2) + 3)) & 1 ? -1 : 1; }
inline int iq1m_ls(const BlockIQ1_M& b, int h) {
  uint16_t w;
  std::memcpy(&w, b.scales + 2 * (h / 4), 2);
  return (w >> (3 * (h % 4))) & 7;
}

}  // namespace

// ---- IQ1_S ---------------------------------------------------------------------------

void to_float_iq1_s_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ1_S*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const float dl = d * float(2 * iq1s_ls(b[i], ib) + 1);
      const float delta = 0.125f * float(iq1s_delta(b[i], ib));
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = kIq1sGrid[size_t(iq1s_index(b[i], ib, l))];
        for (int j = 0; j < 8; ++j) *dst++ = dl * (float(grid_coord(g, j)) + delta);
      }
    }
  }
}

void vec_dot_iq1_s_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ1_S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int8_t* q8 = y[i].qs;
    int bsum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const int delta = iq1s_delta(a[i], ib);
      int sumi = 0;
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = kIq1sGrid[size_t(iq1s_index(a[i], ib, l))];
        for (int j = 0; j < 8; ++j, ++q8) sumi += (8 * grid_coord(g, j) + delta) * *q8;
      }
      bsum += sumi * (2 * iq1s_ls(a[i], ib) + 1);
    }
    sum += fp16_to_f32(a[i].d) * y[i].d * float(bsum);
  }
  *out = 0.125f * sum;
}

// ---- IQ1_M ---------------------------------------------------------------------------

void to_float_iq1_m_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ1_M*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(iq1m_d(b[i]));
    for (int r = 0; r < 32; ++r) {
      const float dl = d * float(2 * iq1m_ls(b[i], r / 2) + 1);
      const float delta = 0.125f * float(iq1m_delta(b[i], r));
      const uint64_t g = kIq1sGrid[size_t(iq1m_index(b[i], r))];
      for (int j = 0; j < 8; ++j) *dst++ = dl * (float(grid_coord(g, j)) + delta);
    }
  }
}

void vec_dot_iq1_m_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ1_M*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int8_t* q8 = y[i].qs;
    int bsum = 0;
    for (int h = 0; h < 16; ++h) {  // halves of 16: two runs of eight
      int sumi = 0;
      for (int r = 2 * h; r < 2 * h + 2; ++r) {
        const uint64_t g = kIq1sGrid[size_t(iq1m_index(a[i], r))];
        const int delta = iq1m_delta(a[i], r);
        for (int j = 0; j < 8; ++j, ++q8) sumi += (8 * grid_coord(g, j) + delta) * *q8;
      }
      bsum += sumi * (2 * iq1m_ls(a[i], h) + 1);
    }
    sum += fp16_to_f32(iq1m_d(a[i])) * y[i].d * float(bsum);
  }
  *out = 0.125f * sum;
}

}  // namespace deltafin::kern
