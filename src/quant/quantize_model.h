// Re-encodes a GGUF model's weight matrices to another tensor type, as
// llama-quantize does without an importance matrix: each row is dequantized with the
// type table's to_float (exact for F32/F16/BF16 input; a quantized input loses
// twice) and re-encoded with from_float (round to nearest, simple scale selection).
//
// Which tensors change: those with >= 2 dimensions whose name ends in ".weight",
// except the MoE routers (ffn_gate_inp), which stay as they are (llama.cpp keeps
// them F32 too). 1-D tensors (norms, biases) are copied unchanged. A matrix whose
// row length is not a multiple of the target's block size gets `fallback` instead
// (Q4_K's 256-element blocks do not fit an expert of width 128), or keeps its type
// when neither fits. Metadata is copied; general.file_type is set to llama.cpp's
// file-type number for the target where one exists, else removed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace deltafin {

struct QuantizeOptions {
  DType type = DType::Q8_0;
  DType fallback = DType::Q8_0;
};

struct QuantizeReport {
  uint64_t bytes_in = 0, bytes_out = 0;
  int converted = 0, fell_back = 0, kept = 0;
};

// Writes `out` (atomically, as GGUFWriter does). Refuses out == in, a target type
// without a quantizer, and input tensors of a type it cannot read as floats.
// Single-threaded: tiny models only need seconds.
Status quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& opts,
                      QuantizeReport* report = nullptr);

}  // namespace deltafin
