// Matrix products with quantized weights: y = W x (decode) and Y = W X (batches).
//
// Shapes: W is `rows` x `cols` of type wtype, row-major (ggml ne0 = cols contiguous),
// row r at W + r * dtype_row_bytes(wtype, cols). X holds n_tok rows of `cols` floats
// (row t at X + t * x_stride); Y[t * y_stride + r] = dot(W row r, X row t).
// cols must be a multiple of the block size of wtype and of its activation type.
//
// As in ggml, activations are first converted to the weight type's vec_dot_type
// (Q8_0, Q8_K, F16, BF16 or F32). QuantizedActs holds that conversion so it can be
// done once and reused for every matrix that takes the same input (gate and up of
// many experts).
//
// Threading: pool == nullptr runs in the calling thread, so callers can parallelize
// over experts themselves; otherwise work is split over the pool's threads by row
// tiles. Results do not depend on the thread count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace deltafin {

class ThreadPool;

struct QuantizedActs {
  DType type = DType::F32;  // the vec_dot_type these rows are stored as
  int64_t cols = 0, n_tok = 0;
  size_t row_bytes = 0;     // bytes per token row
  std::vector<uint8_t> data;  // n_tok * row_bytes
  // One row (decode) prepared for prep_for's vec_dot_prep (types.h), made with the
  // rows when that weight type has one; empty otherwise.
  DType prep_for = DType::F32;
  std::vector<uint8_t> prepared;
  const void* row(int64_t t) const { return data.data() + size_t(t) * row_bytes; }
};

// The activation type dot products with `wtype` weights need.
DType acts_type_for(DType wtype);

// Converts X to acts_type_for(wtype) into *out (reusing its buffer).
void quantize_acts(ThreadPool* pool, DType wtype, const float* X, int64_t n_tok, int64_t cols,
                   int64_t x_stride, QuantizedActs* out);

// Y[t * y_stride + r] = dot(W row r, acts row t), r < rows, t < acts.n_tok.
// acts.type must equal acts_type_for(wtype) and acts.cols == cols.
// mul_mat: sum as ggml's mul_mat of a dense weight does (a batch of two or more rows
// in the type's gemm order where it has one, see types.h) rather than row by row as
// its mul_mat_id does for experts (false). Differs only in the last bits of a sum.
// F32's gemm order applies only with f32_gemm as well: F32 products keep one order at
// every batch size (batch invariance) except where a model asks for ggml's (kimi-k3
// on an F16/BF16 file, whose activations are rounded after such sums).
void matmul_q(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols,
              const QuantizedActs& acts, float* Y, int64_t y_stride, bool mul_mat = false,
              bool f32_gemm = false);

// A subset of the activation rows, e.g. the tokens routed to one expert, without
// copying them: Y[i * y_stride + r] = dot(W row r, acts row tokens[i]), i < n_tokens.
void matmul_q_tokens(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols,
                     const QuantizedActs& acts, const int32_t* tokens, int64_t n_tokens, float* Y,
                     int64_t y_stride);

// Rows [row_begin, row_end) only, in the calling thread, for callers that partition
// the work themselves; tokens == nullptr means all acts rows (n_tokens ignored).
void matmul_q_rows(DType wtype, const void* W, int64_t cols, int64_t row_begin, int64_t row_end,
                   const QuantizedActs& acts, const int32_t* tokens, int64_t n_tokens, float* Y,
                   int64_t y_stride);

// Conveniences that quantize the activations themselves (allocating a buffer).
void matvec(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols, const float* x,
            float* y);
void matmul(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tok, int64_t x_stride, float* Y, int64_t y_stride, bool mul_mat = false,
            bool f32_gemm = false);

}  // namespace deltafin
