// Tensor element types, numbered as in GGUF (ggml_type). Only the types deltafin
// computes with have kernels (src/kernels/types.h); the rest are known by name so
// that a model using them gets a clear "unsupported type" error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace deltafin {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21,
  IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};
constexpr uint32_t kDTypeCount = 40;

// Block geometry of a type: `block_elems` values are stored in `block_bytes` bytes.
// Returns {0, 0} for ids that are not a known type.
struct BlockGeometry {
  uint32_t block_elems;
  uint32_t block_bytes;
};
BlockGeometry block_geometry(DType t);
bool dtype_known(uint32_t id);
std::string_view dtype_name(DType t);
// Parses "F32", "q4_k", "MXFP4" ...; returns false if unknown.
bool dtype_from_name(std::string_view name, DType* out);

// Bytes taken by `n` elements of type t; n must be a multiple of the block size.
inline uint64_t dtype_row_bytes(DType t, uint64_t n) {
  BlockGeometry g = block_geometry(t);
  return g.block_elems ? n / g.block_elems * g.block_bytes : 0;
}

}  // namespace deltafin
