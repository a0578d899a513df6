// Y = X W^T for a weight tensor of any supported type: the bridge from the model
// code to the matmul kernels. X is [n_tok, cols] floats, Y is [n_tok, rows].
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "core/tensor.h"
#include "store/expert_store.h"

namespace deltafin {

// pool may be null (single-threaded in the caller). Sums as ggml's mul_mat does for a
// dense weight; linear_expert as its mul_mat_id does for routed experts (kernels/matmul.h).
// f32_gemm: an F32 weight sums in ggml's batch order too (kernels/matmul.h).
void linear(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y, bool f32_gemm = false);
// Routed experts of the types with panel kernels take them (kernels/panels.h), over
// panels (Tensor::panels) or the file's rows alike.
void linear_expert(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y);
// The layout the resident expert store keeps routed experts in, and the streaming
// store converts its hot experts to: row panels where the selected kernel set has
// panel kernels for the type (kernels/panels.h).
ExpertLayout expert_layout();

}  // namespace deltafin
