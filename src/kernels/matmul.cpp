#include "kernels/matmul.h"

#include <algorithm>
#include <cassert>

#include "core/thread_pool.h"
#include "kernels/types.h"

namespace deltafin {
namespace {

const TypeTraits& traits_or_die(DType t) {
  const TypeTraits* tt = type_traits(t);
  assert(tt != nullptr && "matmul: weight type has no kernels");
  return *tt;
}

// Rows per tile of the batched path: a tile (about 64 KiB of weights) stays in L2
// while every token group of the batch passes over it, so each weight byte comes
// from memory once per call.
int64_t tile_rows(int64_t row_bytes) { return std::clamp<int64_t>((64 << 10) / std::max<int64_t>(1, row_bytes), 4, 256); }

}  // namespace

DType acts_type_for(DType wtype) { return traits_or_die(wtype).vec_dot_type; }

void quantize_acts(ThreadPool* pool, DType wtype, const float* X, int64_t n_tok, int64_t cols,
                   int64_t x_stride, QuantizedActs* out) {
  const TypeTraits& at = traits_or_die(acts_type_for(wtype));
  assert(cols % at.block_elems == 0);
  out->type = at.type;
  out->cols = cols;
  out->n_tok = n_tok;
  out->row_bytes = size_t(dtype_row_bytes(at.type, uint64_t(cols)));
  out->data.resize(out->row_bytes * size_t(n_tok));
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) at.from_float(X + t * x_stride, out->data.data() + size_t(t) * out->row_bytes, cols);
  };
  if (pool != nullptr && n_tok > 1) pool->parallel_for(n_tok, 1, body);
  else body(0, n_tok);
}

void matmul_q_rows(DType wtype, const void* W, int64_t cols, int64_t row_begin, int64_t row_end,
                   const QuantizedActs& acts, float* Y, int64_t y_stride) {
  const TypeTraits& tt = traits_or_die(wtype);
  assert(acts.type == tt.vec_dot_type && acts.cols == cols);
  const auto* w = static_cast<const uint8_t*>(W);
  const size_t wrow = size_t(dtype_row_bytes(wtype, uint64_t(cols)));
  const int64_t n_tok = acts.n_tok;
  if (n_tok == 1) {
    const void* x = acts.row(0);
    for (int64_t r = row_begin; r < row_end; ++r) tt.vec_dot(cols, Y + r, w + size_t(r) * wrow, x);
    return;
  }
  const int64_t R = tile_rows(int64_t(wrow));
  for (int64_t r0 = row_begin; r0 < row_end; r0 += R) {
    const int64_t r1 = std::min(row_end, r0 + R);
    int64_t t = 0;
    for (; t + 4 <= n_tok; t += 4) {
      for (int64_t r = r0; r < r1; ++r) {
        float o[4];
        tt.vec_dot_x4(cols, o, w + size_t(r) * wrow, acts.row(t), acts.row_bytes);
        for (int k = 0; k < 4; ++k) Y[(t + k) * y_stride + r] = o[k];
      }
    }
    for (; t < n_tok; ++t) {
      for (int64_t r = r0; r < r1; ++r) tt.vec_dot(cols, Y + t * y_stride + r, w + size_t(r) * wrow, acts.row(t));
    }
  }
}

void matmul_q(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols,
              const QuantizedActs& acts, float* Y, int64_t y_stride) {
  if (pool == nullptr || pool->size() == 1) {
    matmul_q_rows(wtype, W, cols, 0, rows, acts, Y, y_stride);
    return;
  }
  // Hand out whole tiles; at least 16 rows per task so decode tasks are not tiny.
  const int64_t wrow = int64_t(dtype_row_bytes(wtype, uint64_t(cols)));
  const int64_t grain = acts.n_tok == 1 ? 16 : tile_rows(wrow);
  const int64_t n_tasks = (rows + grain - 1) / grain;
  pool->parallel_for(n_tasks, 1, [&](int64_t b, int64_t e) {
    matmul_q_rows(wtype, W, cols, b * grain, std::min(rows, e * grain), acts, Y, y_stride);
  });
}

void matvec(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols, const float* x,
            float* y) {
  QuantizedActs acts;
  quantize_acts(nullptr, wtype, x, 1, cols, cols, &acts);
  matmul_q(pool, wtype, W, rows, cols, acts, y, rows);
}

void matmul(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tok, int64_t x_stride, float* Y, int64_t y_stride) {
  QuantizedActs acts;
  quantize_acts(pool, wtype, X, n_tok, cols, x_stride, &acts);
  matmul_q(pool, wtype, W, rows, cols, acts, Y, y_stride);
}

}  // namespace deltafin
