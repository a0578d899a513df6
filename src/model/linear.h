// Y = X W^T for a weight tensor of any supported type: the bridge from the model
// code to the matmul kernels. X is [n_tok, cols] floats, Y is [n_tok, rows].
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "model/tensor.h"

namespace deltafin {

// pool may be null (single-threaded in the caller).
void linear(ThreadPool* pool, const Tensor& w, const float* x, int64_t n_tok, float* y);

}  // namespace deltafin
