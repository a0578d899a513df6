// Y = X W^T for a weight tensor of any supported type: the bridge from the model
// code to the matmul kernels. X is [n_tok, cols] floats, Y is [n_tok, rows].
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "core/tensor.h"

namespace deltafin {

// pool may be null (single-threaded in the caller). Sums as ggml's mul_mat does for a
// dense weight; linear_expert as its mul_mat_id does for routed experts (kernels/matmul.h).
// f32_gemm: an F32 weight sums in ggml's batch order too (kernels/matmul.h).
void linear(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y, bool f32_gemm = false);
void linear_expert(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y);

}  // namespace deltafin
