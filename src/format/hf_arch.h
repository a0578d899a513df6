// How one architecture is published on Hugging Face, against the GGUF deltafin (and
// llama.cpp) reads: config.json <-> the GGUF metadata keys, and one table of tensor
// names that drives both directions (import: a folder opened as a GGUF; export:
// `synth --format hf`). One architecture per file (hf_arch_<name>.cpp); this file
// holds the registry and the name-pattern helpers.
//
// Name patterns carry {L} (layer) and {E} (expert). A rule with {E} maps one GGUF
// tensor stacked over the experts (ne[2] = expert) to one HF tensor per expert.
// HF shapes are outermost first, GGUF ne innermost first: the same bytes.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "format/gguf.h"

namespace deltafin {

// A GGUF tensor computed from HF tensors rather than copied (format/hf_derive.h does
// both directions).
enum class HfDerive : uint8_t {
  None,    // the HF tensor as it is (stacked over {E} when the pattern has it)
  Mul,     // hf * hf2 element by element, in F32 (Kimi K3's res_norm * res_proj)
  NegExp,  // -exp(hf), in F32 (ssm_a from A_log)
};

// The layers a rule has tensors in: all, or only the leading dense layers
// ({arch}.leading_dense_block_count) or only the MoE layers after them.
enum class HfLayers : uint8_t { All, Dense, Moe };

// MLA's kv_b_proj [H * (d_nope + d_v), r_kv], viewed as [H, d_nope + d_v, r_kv], is
// split by llama.cpp's converter into attn_k_b = each head's first d_nope rows,
// transposed ([H, r_kv, d_nope]), and attn_v_b = its last d_v rows ([H, d_v, r_kv]).
// d_nope, d_v and H come from the GGUF keys attention.key_length_mla -
// rope.dimension_count, attention.value_length_mla and attention.head_count.
//
// RopeQ / RopeK: llama.cpp's converter permutes Llama/Mixtral q_proj and k_proj rows
// (LlamaModel.permute) from Hugging Face's rotate-half RoPE layout, where a head's
// rotated pairs are rows (i, i + d/2), to the adjacent pairs (2i, 2i + 1) its `llama`
// rope (NORM) rotates: hf_rope_source_row() below. Heads: attention.head_count (Q),
// attention.head_count_kv (K); d = rows / heads.
enum class HfPart : uint8_t { Whole, KvbK, KvbV, RopeQ, RopeK };

// The Hugging Face row that GGUF row `r` of a RopeQ/RopeK matrix holds, heads of `d`
// rows (d even): within a head, GGUF row 2i + j is HF row j * d/2 + i (i < d/2,
// j in {0, 1}); that is, the HF head viewed as [2, d/2] and transposed.
inline int64_t hf_rope_source_row(int64_t r, int64_t d) {
  const int64_t head = r / d, w = r % d;
  return head * d + (w % 2) * (d / 2) + w / 2;
}

struct HfNameRule {
  std::string gguf;       // "blk.{L}.ffn_gate_exps.weight"
  std::string hf;         // "model.layers.{L}.mlp.experts.{E}.gate_proj.weight"
  bool optional = false;  // may be absent (lm_head.weight of a tied model)
  bool f32 = false;       // stored F32 in GGUF whatever the HF dtype (llama.cpp's router rule)
  HfDerive derive = HfDerive::None;
  std::string hf2 = {};   // Mul's second factor
  unsigned kind = 0;      // only in layers whose HfArch::layer_kind has all these bits; 0: every layer
  HfLayers layers = HfLayers::All;
  HfPart part = HfPart::Whole;
};

// How a published checkpoint stores its weights: as plain F32/F16/BF16, as FP8 E4M3
// with 128x128 F32 block scales (X.weight + X.weight_scale_inv: DeepSeek-V3, Kimi K2),
// or compressed-tensors INT4 pack-quantized, group 32, symmetric (X.weight_packed I32 +
// X.weight_scale BF16 + X.weight_shape: Kimi K2 Thinking). See quant/hf_codecs.h.
enum class HfEncoding : uint8_t { Plain, Fp8, Int4 };

struct HfArch {
  std::string model_type;  // config.json model_type ("qwen3_moe")
  std::string gguf_arch;   // general.architecture ("qwen3moe")
  std::string hf_class;    // config.json architectures[0] written on export
  std::vector<HfNameRule> rules;
  // config (the text config when nested) -> the architecture's GGUF keys. An
  // unsupported setting is an error naming the config.json field.
  Status (*config_to_gguf)(const nlohmann::json& config, GGUFFile* meta) = nullptr;
  // The inverse for export: the config.json of a model with these keys.
  Status (*gguf_to_config)(const GGUFFile& meta, nlohmann::json* config) = nullptr;
  // The multimodal config.json that nests this text config (model_type, class), when
  // the architecture is published only inside one ("kimi_k3" around "kimi_linear").
  std::string container_type = {}, container_class = {};
  // The kind of layer `layer` as bits (HfNameRule::kind) from the text config; null:
  // every rule applies to every layer.
  unsigned (*layer_kind)(const nlohmann::json& config, int layer) = nullptr;
  // HF tensors of the text model deliberately not run (listed, never read), e.g. a
  // multi-token-prediction layer after the last one; null: none.
  bool (*skip_tensor)(const nlohmann::json& config, const std::string& name) = nullptr;
  // Export: does a checkpoint published in `enc` hold this HF weight quantized? Null:
  // the architecture is published plain only.
  bool (*quantized)(HfEncoding enc, const std::string& hf_name) = nullptr;
};

const std::vector<const HfArch*>& hf_architectures();
const HfArch* find_hf_arch_by_model_type(const std::string& model_type);
// The architecture of a text config nested in a `container_type` config (empty when
// not nested): an architecture that names a container matches only inside it.
const HfArch* find_hf_arch(const std::string& model_type, const std::string& container_type);
const HfArch* find_hf_arch_by_gguf(const std::string& gguf_arch);
// "qwen3_moe, ..." for messages.
std::string hf_model_type_list();

// Does `name` match `pattern`? Sets *layer / *expert to the {L} / {E} values (-1 when
// the pattern has none). Placeholders match decimal numbers without leading zeros.
bool hf_name_match(const std::string& pattern, const std::string& name, int* layer, int* expert);
// `pattern` with {L} and {E} replaced.
std::string hf_name_expand(const std::string& pattern, int layer, int expert);
inline bool hf_rule_has_expert(const HfNameRule& r) { return r.hf.find("{E}") != std::string::npos; }
inline bool hf_rule_has_layer(const HfNameRule& r) { return r.gguf.find("{L}") != std::string::npos; }

// config.json helpers for the per-architecture files: a required field (error names
// it), or a default.
Result<int64_t> hf_config_int(const nlohmann::json& c, const char* field);
Result<double> hf_config_float(const nlohmann::json& c, const char* field);
// Writes config.json fields as the GGUF keys `prefix` + key ("qwen3moe.block_count"),
// what every architecture's config_to_gguf does: u32 values checked for range (the
// error names the field), required fields read with the helpers above.
struct HfConfigWriter {
  const nlohmann::json& c;
  GGUFFile* m;
  std::string prefix;
  Status put(const std::string& key, int64_t v, const char* field) const;  // a value derived from `field`
  Status u32(const std::string& key, const char* field) const;
  Status f32(const std::string& key, const char* field) const;
};

// Per-architecture descriptions (one file each).
const HfArch& hf_arch_qwen3moe();
const HfArch& hf_arch_kimi_k3();
const HfArch& hf_arch_deepseek2();
const HfArch& hf_arch_mixtral();

}  // namespace deltafin
