// A GGUF model written as a Hugging Face folder, through the same per-architecture
// name table that opens such folders (hf_arch.h), for `synth --format hf`: tests
// get folders laid out as published checkpoints are (several shards with a
// weight_map index, each expert's tensors together but the experts scattered over
// the shards out of id order, a vision tower to skip, a multimodal config nesting
// text_config (the architecture's own container, e.g. kimi_k3, where it has one),
// generation_config.json, tokenizer files).
//
// Dtypes: every tensor keeps its GGUF type (F32, F16, BF16) except the tensors the
// importer widens to F32 (1-D, the router), which are written in the type of the
// model's matrices, rounded to nearest even, as a checkpoint published in BF16
// holds them. MXFP4 experts are written in compressed-tensors form (weight_packed +
// weight_scale, with the config's quantization_config), the same codes and scales.
// Derived tensors (hf_derive.h) are written in their published form: a split
// res_norm / res_proj, A_log, a joined kv_b_proj.
#pragma once
#include <cstdint>
#include <string>

#include "core/result.h"
#include "format/hf_arch.h"

namespace deltafin {

struct HfExportOptions {
  int shards = 3;             // at most this many safetensors files
  bool vision_tower = true;   // add a vision_tower.* tensor and nest the config
  uint64_t seed = 1;          // the order tensors are written in
  // The published encoding: the weights HfArch::quantized names are written FP8 or
  // INT4 (hf_export_encode.h) and config.json gets the quantization_config.
  HfEncoding encoding = HfEncoding::Plain;
};

struct HfExportReport {
  int shards = 0;
  int tensors = 0;
  uint64_t bytes = 0;
};

// Writes `dir` (created; must be empty or absent) from the GGUF at `gguf_path`.
Status export_gguf_as_hf(const std::string& gguf_path, const std::string& dir, const HfExportOptions& opts,
                         HfExportReport* report = nullptr);

}  // namespace deltafin
