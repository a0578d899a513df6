// Re-encodes a GGUF model's weight matrices to another tensor type, as
// llama-quantize does: each row is dequantized with the type table's to_float (exact
// for F32/F16/BF16 input; a quantized input loses twice) and re-encoded with
// from_float (round to nearest, simple scale selection), or, given an importance
// matrix and a type that weighs by one (the i-quants), with from_float_imp
// (kernels/importance.h).
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
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace deltafin {

struct Imatrix;    // quant/imatrix.h
class ModelFile;  // format/model_file.h

struct QuantizeOptions {
  DType type = DType::Q8_0;
  DType fallback = DType::Q8_0;
  // One of llama-quantize's mixes ("Q4_K_M", see parse_quantize_target), or empty:
  // every matrix gets `type`. A mix gives some matrices more bits than `type` as
  // llama.cpp's llama_tensor_get_type does without an importance matrix, as far as
  // deltafin computes the types it picks: output.weight Q6_K; attn_v and ffn_down
  // Q5_K/Q6_K in the layers llama.cpp favours (the first and last eighth and every
  // third between: use_more_bits); attn_output one step up in Q3_K_M/L; MXFP4_MOE:
  // the routed experts MXFP4, the other matrices Q8_0.
  std::string mix;
  // Only the core: the routed experts (the stacked *_exps tensors) are left out of
  // the output, which ModelFile::overlay then lays over the model (--core-type).
  bool core_only = false;
  // The routed experts copied as they are (quantize --keep-experts): the whole model
  // with only its core re-encoded, what --core-type computes with.
  bool keep_experts = false;
  // Write the header and leave the tensor data as holes (a sparse file; nothing of
  // the input's data is read): what the output's tensors would be, for plan --core-type.
  bool headers_only = false;
  // llama.cpp importance matrix (quantize --imatrix; not owned, may be null): matrices
  // going to a type with an importance-weighted quantizer (kernels/importance.h: the
  // i-quants) weigh each value's error by their entry; one the file lacks
  // quantizes unweighted, counted in QuantizeReport::imatrix_missing. Entries for
  // tensors the model lacks are ignored; an entry whose size does not fit is an error.
  const Imatrix* imatrix = nullptr;
};

struct QuantizeReport {
  uint64_t bytes_in = 0, bytes_out = 0;
  int converted = 0, fell_back = 0, kept = 0;  // converted: to the type the mix (or --type) chose
  std::map<std::string, int> types;            // matrices written per type name (changed ones only)
  // With an imatrix: matrices quantized with their entry, and those whose type takes
  // one but the imatrix has none (quantized unweighted).
  int imatrix_used = 0, imatrix_missing = 0;
};

// A target named as deltafin's types (Q8_0, Q4_K, F16 ...: every matrix gets it) or as
// llama-quantize's mixes (Q2_K_S, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S,
// Q5_K_M, MXFP4_MOE; case-insensitive): sets opts->type and opts->mix. Unknown names,
// and types deltafin cannot compute (Q5_0, IQ2_XXS ...), get an error that lists
// every valid name.
Status parse_quantize_target(const std::string& name, QuantizeOptions* opts);
// The names parse_quantize_target takes, comma-separated.
std::string quantize_target_names();

// Writes `out` (atomically, as GGUFWriter does). Refuses out == in, a target type
// without a quantizer, and input tensors of a type it cannot read as floats.
// Single-threaded: tiny models only need seconds.
Status quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& opts,
                      QuantizeReport* report = nullptr);
// The same from a model already open (a remote one reads through its disk cache).
Status quantize_model(ModelFile& model, const std::string& out, const QuantizeOptions& opts,
                      QuantizeReport* report = nullptr);

}  // namespace deltafin
