// Non-owning view of a weight tensor: element type, shape (ne[0] contiguous, as in
// GGUF) and a pointer to its bytes in memory. Rows of a 2-D weight are output
// features: a [cols, rows] GGUF tensor multiplies a cols-vector into a rows-vector.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace deltafin {

struct Tensor {
  DType type = DType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  const void* data = nullptr;
  // The rows are in row panels (kernels/panels.h) rather than in the file's order: set
  // by the resident expert store where it converted the bytes (store/expert_store.h).
  bool panels = false;

  bool valid() const { return data != nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1]; }
  uint64_t row_bytes() const { return dtype_row_bytes(type, uint64_t(ne[0])); }
  // 2-D slice k of a 3-D tensor (e.g. one expert of a stacked expert tensor).
  Tensor slice(int64_t k) const {
    Tensor t = *this;
    t.ne[2] = 1;
    t.data = static_cast<const char*>(data) + uint64_t(k) * row_bytes() * uint64_t(ne[1]);
    return t;
  }
  const float* f32() const { return static_cast<const float*>(data); }
};

}  // namespace deltafin
