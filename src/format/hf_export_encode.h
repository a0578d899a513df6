// The Hugging Face tensors of `synth --format hf` that are not a GGUF tensor's bytes
// copied or narrowed (format/hf_export.h): MLA's kv_b_proj rebuilt from attn_k_b and
// attn_v_b (the inverse of llama.cpp's split, hf_arch.h HfPart), Llama/Mixtral
// q_proj and k_proj with the converter's RoPE row permutation undone (HfPart::RopeQ,
// RopeK), and the weights a checkpoint published in FP8 (X.weight F8_E4M3 +
// X.weight_scale_inv) or in compressed-tensors INT4 (X.weight_packed + X.weight_scale +
// X.weight_shape) holds quantized (HfArch::quantized), encoded by quant/hf_codecs.h.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/hf_arch.h"
#include "format/model_file.h"

namespace deltafin {

// One HF tensor whose bytes are made on demand from the GGUF.
struct HfMadeTensor {
  std::string name;
  std::string dtype;            // safetensors dtype
  std::vector<int64_t> shape;   // outermost first
  uint64_t bytes = 0;
  std::function<Status(ByteSource& gguf, std::string* out)> make;
};

// The tensors GGUF tensor `t` (matched by `rule` at layer L) becomes when it is not a
// plain copy; *handled false when it is one (nothing added). `matrix`: the folder's
// dtype for a tensor the GGUF holds in F32 by rule (HfNameRule::f32).
Status hf_export_made(ModelFile& mf, const HfArch& arch, const HfNameRule& rule, const GGUFTensorInfo& t, int L,
                      HfEncoding enc, DType matrix, std::vector<HfMadeTensor>* out, bool* handled);

// config.json's quantization_config for `enc` as published (null for Plain);
// `plain_linear` names the linear weights left unquantized (compressed-tensors' ignore).
nlohmann::json hf_quantization_config(HfEncoding enc, const std::vector<std::string>& plain_linear);

}  // namespace deltafin
