#include "model/linear.h"

#include <cassert>
#include <vector>

#include "kernels/types.h"

namespace deltafin {

void linear(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y) {
  const int64_t rows = w.rows(), cols = w.cols();
  const TypeTraits* tt = type_traits(w.type);
  assert(tt);
  const TypeTraits* xt = type_traits(tt->vec_dot_type);
  const uint64_t xrow = dtype_row_bytes(tt->vec_dot_type, uint64_t(cols));
  std::vector<uint8_t> xq;
  const uint8_t* xp;
  if (tt->vec_dot_type == DType::F32) {
    xp = reinterpret_cast<const uint8_t*>(x);
  } else {
    xq.resize(xrow * uint64_t(n_tok));
    for (int64_t t = 0; t < n_tok; ++t) xt->from_float(x + t * cols, xq.data() + t * xrow, cols);
    xp = xq.data();
  }
  const uint64_t wrow = w.row_bytes();
  const auto* wp = static_cast<const uint8_t*>(w.data);
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t t = 0; t < n_tok; ++t) tt->vec_dot(cols, &y[t * rows + r], wp + r * wrow, xp + t * xrow);
  };
  if (pool) pool->parallel_for(rows, 16, body);
  else body(0, rows);
}

}  // namespace deltafin
