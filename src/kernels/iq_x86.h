// Shared frame of the x86 i-quant kernels (iq_avx2.cpp, iq_avx512.cpp): one kernel
// body computes NR weight rows against NT activation rows, so vec_dot (1 x 1), the
// batched x4 (1 x 4) and the decode r4 (4 x 1) run the same operations in the same
// order for every (row, activation) pair and agree bit for bit. Internal linkage, as
// x86_common.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/x86_common.h"

// For the per-group helpers the kernels call: GCC otherwise declines to inline some
// of them (IQ1_M's, IQ2_S's), passing vectors through memory at half the speed.
#define DF_ALWAYS_INLINE inline __attribute__((always_inline))

namespace deltafin::kern {
namespace {

// K<NR, NT>::run(n, out[NR * NT] row-major by weight row, weight rows, activation
// rows) is the kernel; these wrap it as the traits table's three entry points.
template <class Block, template <int, int> class K>
void iq_one(int64_t n, float* out, const void* w, const void* x) {
  const Block* a[1] = {static_cast<const Block*>(w)};
  const BlockQ8_K* y[1] = {static_cast<const BlockQ8_K*>(x)};
  K<1, 1>::run(n, out, a, y);
}

template <class Block, template <int, int> class K>
void iq_x4(int64_t n, float* out, const void* w, const void* const* x) {
  const Block* a[1] = {static_cast<const Block*>(w)};
  const BlockQ8_K* y[4];
  for (int t = 0; t < 4; ++t) y[t] = static_cast<const BlockQ8_K*>(x[t]);
  K<1, 4>::run(n, out, a, y);
}

template <class Block, template <int, int> class K>
void iq_r4(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  const Block* a[4];
  for (int r = 0; r < 4; ++r) a[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * w_stride);
  const BlockQ8_K* y[1] = {static_cast<const BlockQ8_K*>(x)};
  K<4, 1>::run(n, out, a, y);
}

}  // namespace
}  // namespace deltafin::kern
