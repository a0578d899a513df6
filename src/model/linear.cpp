#include "model/linear.h"

#include "kernels/matmul.h"
#include "kernels/panels.h"

namespace deltafin {

void linear(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y, bool f32_gemm) {
  matmul(pool, w.type, w.data, w.rows(), w.cols(), x, n_tok, w.cols(), y, w.rows(), /*mul_mat=*/true, f32_gemm);
}

void linear_expert(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y) {
  if (w.panels || panels_wanted(w.type, w.rows(), w.cols()))
    matmul_panels(pool, w.type, w.data, w.rows(), w.cols(), x, n_tok, w.cols(), y, w.rows(), w.panels);
  else
    matmul(pool, w.type, w.data, w.rows(), w.cols(), x, n_tok, w.cols(), y, w.rows());
}

ExpertLayout expert_layout() {
  ExpertLayout l;
  l.wanted = panels_wanted;
  l.convert = to_panels;
  return l;
}

}  // namespace deltafin
