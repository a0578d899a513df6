// Synthetic tensors: writes valid blocks of any kernel type straight from a PRNG (no
// float quantization pass), fast enough to synthesize multi-GB models: roughly
// 0.5-3 GB/s per thread depending on the type, and chunks run in parallel on a
// pool. Dequantized values have mean about 0 and standard deviation about `stddev`
// (within ~10%); no NaN or Inf anywhere, scales included.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace deltafin {

class ThreadPool;

// Fills dst (dtype_row_bytes(t, n_elems) bytes) with random values of type t. The
// output depends only on (t, seed, n_elems, stddev), not on the pool. Returns false
// (writing nothing) if t has no kernels or n_elems is not a multiple of its block.
bool fill_random(DType t, uint64_t seed, int64_t n_elems, float stddev, void* dst, ThreadPool* pool = nullptr);

}  // namespace deltafin
