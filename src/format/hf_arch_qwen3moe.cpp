// Qwen3-MoE as published on Hugging Face (model_type "qwen3_moe", BF16) <-> GGUF
// "qwen3moe" as llama.cpp's converter writes it: the same metadata keys, the same
// tensor names; q/k are not permuted (NEOX rope), experts are stacked over ne[2],
// 1-D norms and the router are stored F32.
#include "format/hf_arch.h"

namespace deltafin {
namespace {

Status to_gguf(const nlohmann::json& c, GGUFFile* m) {
  const std::string a = "qwen3moe.";
  const HfConfigWriter w{c, m, a};
  DF_TRY(w.u32("block_count", "num_hidden_layers"));
  DF_TRY(w.u32("context_length", "max_position_embeddings"));
  DF_TRY(w.u32("embedding_length", "hidden_size"));
  DF_TRY(w.u32("feed_forward_length", "intermediate_size"));
  DF_TRY(w.u32("attention.head_count", "num_attention_heads"));
  DF_TRY(w.u32("attention.head_count_kv", "num_key_value_heads"));
  if (c.contains("head_dim")) {
    DF_TRY(w.u32("attention.key_length", "head_dim"));
    DF_TRY(w.u32("attention.value_length", "head_dim"));
  }
  DF_ASSIGN(double theta, hf_config_float(c, "rope_theta"));
  m->set(a + "rope.freq_base", GGUFValue::f32(float(theta)));
  DF_ASSIGN(double eps, hf_config_float(c, "rms_norm_eps"));
  m->set(a + "attention.layer_norm_rms_epsilon", GGUFValue::f32(float(eps)));
  DF_TRY(w.u32("expert_count", "num_experts"));
  DF_TRY(w.u32("expert_used_count", "num_experts_per_tok"));
  DF_TRY(w.u32("expert_feed_forward_length", "moe_intermediate_size"));
  // What the GGUF cannot say: deltafin and llama.cpp's qwen3moe always normalise the
  // top-k weights and put experts in every layer.
  if (c.value("norm_topk_prob", true) != true)
    return make_error("config.json: 'norm_topk_prob' false is not supported for qwen3_moe");
  if (c.value("decoder_sparse_step", 1) != 1)
    return make_error("config.json: 'decoder_sparse_step' {} is not supported (experts in every layer only)",
                      c["decoder_sparse_step"].dump());
  if (auto it = c.find("mlp_only_layers"); it != c.end() && !(it->is_array() && it->empty()))
    return make_error("config.json: 'mlp_only_layers' {} is not supported (experts in every layer only)", it->dump());
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null()) {
    const std::string type = it->value("rope_type", it->value("type", std::string()));
    if (type != "yarn") return make_error("config.json: rope_scaling type '{}' is not supported", type);
    DF_ASSIGN(double factor, hf_config_float(*it, "factor"));
    DF_ASSIGN(int64_t orig, hf_config_int(*it, "original_max_position_embeddings"));
    m->set(a + "rope.scaling.type", GGUFValue::str("yarn"));
    m->set(a + "rope.scaling.factor", GGUFValue::f32(float(factor)));
    m->set(a + "rope.scaling.original_context_length", GGUFValue::u32(uint32_t(orig)));
  }
  return {};
}

Status to_config(const GGUFFile& m, nlohmann::json* out) {
  nlohmann::json& c = *out;
  const std::string a = "qwen3moe.";
  auto i = [&](const char* key) -> Result<int64_t> { return m.get_int(a + key); };
  DF_ASSIGN(c["num_hidden_layers"], i("block_count"));
  DF_ASSIGN(c["max_position_embeddings"], i("context_length"));
  DF_ASSIGN(c["hidden_size"], i("embedding_length"));
  DF_ASSIGN(c["intermediate_size"], i("feed_forward_length"));
  DF_ASSIGN(c["num_attention_heads"], i("attention.head_count"));
  DF_ASSIGN(c["num_key_value_heads"], i("attention.head_count_kv"));
  DF_ASSIGN(c["head_dim"], i("attention.key_length"));
  DF_ASSIGN(c["num_experts"], i("expert_count"));
  DF_ASSIGN(c["num_experts_per_tok"], i("expert_used_count"));
  DF_ASSIGN(c["moe_intermediate_size"], i("expert_feed_forward_length"));
  // F32 values written as the double they are, so the import's float() gives them back.
  DF_ASSIGN(c["rope_theta"], m.get_float(a + "rope.freq_base"));
  DF_ASSIGN(c["rms_norm_eps"], m.get_float(a + "attention.layer_norm_rms_epsilon"));
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = nlohmann::json::array();
  c["rope_scaling"] = nullptr;
  c["hidden_act"] = "silu";
  return {};
}

}  // namespace

const HfArch& hf_arch_qwen3moe() {
  static const HfArch a{
      "qwen3_moe",
      "qwen3moe",
      "Qwen3MoeForCausalLM",
      {
          {"token_embd.weight", "model.embed_tokens.weight"},
          {"blk.{L}.attn_norm.weight", "model.layers.{L}.input_layernorm.weight"},
          {"blk.{L}.attn_q.weight", "model.layers.{L}.self_attn.q_proj.weight"},
          {"blk.{L}.attn_k.weight", "model.layers.{L}.self_attn.k_proj.weight"},
          {"blk.{L}.attn_v.weight", "model.layers.{L}.self_attn.v_proj.weight"},
          {"blk.{L}.attn_output.weight", "model.layers.{L}.self_attn.o_proj.weight"},
          {"blk.{L}.attn_q_norm.weight", "model.layers.{L}.self_attn.q_norm.weight"},
          {"blk.{L}.attn_k_norm.weight", "model.layers.{L}.self_attn.k_norm.weight"},
          {"blk.{L}.ffn_norm.weight", "model.layers.{L}.post_attention_layernorm.weight"},
          {"blk.{L}.ffn_gate_inp.weight", "model.layers.{L}.mlp.gate.weight", false, true},
          {"blk.{L}.ffn_gate_exps.weight", "model.layers.{L}.mlp.experts.{E}.gate_proj.weight"},
          {"blk.{L}.ffn_up_exps.weight", "model.layers.{L}.mlp.experts.{E}.up_proj.weight"},
          {"blk.{L}.ffn_down_exps.weight", "model.layers.{L}.mlp.experts.{E}.down_proj.weight"},
          {"output_norm.weight", "model.norm.weight"},
          {"output.weight", "lm_head.weight", /*optional=*/true},
      },
      to_gguf,
      to_config,
  };
  return a;
}

}  // namespace deltafin
