#include "model/linear.h"

#include "kernels/matmul.h"

namespace deltafin {

void linear(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y, bool f32_gemm) {
  matmul(pool, w.type, w.data, w.rows(), w.cols(), x, n_tok, w.cols(), y, w.rows(), /*mul_mat=*/true, f32_gemm);
}

void linear_expert(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y) {
  matmul(pool, w.type, w.data, w.rows(), w.cols(), x, n_tok, w.cols(), y, w.rows());
}

}  // namespace deltafin
