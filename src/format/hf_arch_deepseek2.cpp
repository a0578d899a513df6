// DeepSeek-V3 and Kimi K2 as published on Hugging Face (model_type "deepseek_v3":
// FP8 E4M3 with 128x128 block scales, or INT4 pack-quantized experts for K2 Thinking,
// or BF16) <-> GGUF "deepseek2" as llama.cpp's converter writes it: MLA served as MQA
// over the latent (head_count_kv 1, key/value lengths of the latent, the *_mla
// lengths of the heads), kv_b_proj split into attn_k_b (transposed) and attn_v_b,
// leading dense layers, shared experts, sigmoid routing with the score-correction
// bias, expert groups, the routed scaling factor and YaRN. The multi-token-prediction
// layers after num_hidden_layers are dropped, as the converter drops them.
#include <cmath>
#include <string>

#include "format/hf_arch.h"

namespace deltafin {
namespace {

constexpr uint32_t kGatingSoftmax = 1, kGatingSigmoid = 2;  // llama.cpp's expert_gating_func

Status to_gguf(const nlohmann::json& c, GGUFFile* m) {
  const std::string a = "deepseek2.";
  const HfConfigWriter w{c, m, a};
  DF_TRY(w.u32("block_count", "num_hidden_layers"));
  DF_TRY(w.u32("context_length", "max_position_embeddings"));
  DF_TRY(w.u32("embedding_length", "hidden_size"));
  DF_TRY(w.u32("feed_forward_length", "intermediate_size"));
  DF_TRY(w.u32("attention.head_count", "num_attention_heads"));
  m->set(a + "attention.head_count_kv", GGUFValue::u32(1));  // MLA as MQA over the latent
  DF_TRY(w.f32("rope.freq_base", "rope_theta"));
  DF_TRY(w.f32("attention.layer_norm_rms_epsilon", "rms_norm_eps"));
  const std::string scoring = c.value("scoring_func", std::string("softmax"));
  if (scoring != "sigmoid" && scoring != "softmax")
    return make_error("config.json: 'scoring_func' '{}' is not supported (sigmoid, softmax)", scoring);
  m->set(a + "expert_gating_func", GGUFValue::u32(scoring == "sigmoid" ? kGatingSigmoid : kGatingSoftmax));
  DF_TRY(w.put("leading_dense_block_count", c.value("first_k_dense_replace", int64_t(0)), "first_k_dense_replace"));
  DF_TRY(w.u32("vocab_size", "vocab_size"));
  if (auto q = c.find("q_lora_rank"); q != c.end() && !q->is_null()) DF_TRY(w.u32("attention.q_lora_rank", "q_lora_rank"));
  DF_ASSIGN(int64_t r_kv, hf_config_int(c, "kv_lora_rank"));
  DF_ASSIGN(int64_t d_rope, hf_config_int(c, "qk_rope_head_dim"));
  DF_ASSIGN(int64_t d_nope, hf_config_int(c, "qk_nope_head_dim"));
  DF_ASSIGN(int64_t d_v, hf_config_int(c, "v_head_dim"));
  DF_TRY(w.put("attention.kv_lora_rank", r_kv, "kv_lora_rank"));
  DF_TRY(w.put("attention.key_length", r_kv + d_rope, "kv_lora_rank"));
  DF_TRY(w.put("attention.value_length", r_kv, "kv_lora_rank"));
  DF_TRY(w.put("attention.key_length_mla", d_nope + d_rope, "qk_nope_head_dim"));
  DF_TRY(w.put("attention.value_length_mla", d_v, "v_head_dim"));
  DF_TRY(w.u32("expert_feed_forward_length", "moe_intermediate_size"));
  DF_TRY(w.u32("expert_count", "n_routed_experts"));
  DF_TRY(w.u32("expert_used_count", "num_experts_per_tok"));
  DF_TRY(w.u32("expert_shared_count", "n_shared_experts"));
  m->set(a + "expert_weights_scale", GGUFValue::f32(float(c.value("routed_scaling_factor", 1.0))));
  m->set(a + "expert_weights_norm", GGUFValue::boolean(c.value("norm_topk_prob", false)));
  if (c.contains("n_group") && !c["n_group"].is_null()) DF_TRY(w.u32("expert_group_count", "n_group"));
  if (c.contains("topk_group") && !c["topk_group"].is_null()) DF_TRY(w.u32("expert_group_used_count", "topk_group"));
  DF_TRY(w.put("rope.dimension_count", d_rope, "qk_rope_head_dim"));
  if (c.value("moe_layer_freq", 1) != 1)
    return make_error("config.json: 'moe_layer_freq' {} is not supported (experts in every layer after the dense ones)",
                      c["moe_layer_freq"].dump());
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null()) {
    const std::string type = it->value("rope_type", it->value("type", std::string()));
    if (type != "yarn") return make_error("config.json: rope_scaling type '{}' is not supported", type);
    DF_ASSIGN(double factor, hf_config_float(*it, "factor"));
    DF_ASSIGN(int64_t orig, hf_config_int(*it, "original_max_position_embeddings"));
    m->set(a + "rope.scaling.type", GGUFValue::str("yarn"));
    m->set(a + "rope.scaling.factor", GGUFValue::f32(float(factor)));
    DF_TRY(w.put("rope.scaling.original_context_length", orig, "rope_scaling.original_max_position_embeddings"));
    if (it->contains("beta_fast")) m->set(a + "rope.scaling.yarn_beta_fast", GGUFValue::f32(float((*it)["beta_fast"].get<double>())));
    if (it->contains("beta_slow")) m->set(a + "rope.scaling.yarn_beta_slow", GGUFValue::f32(float((*it)["beta_slow"].get<double>())));
    // The converter stores 0.1 * mscale_all_dim (llama.cpp divides it back for deepseek2).
    if (auto ms = it->find("mscale_all_dim"); ms != it->end() && ms->is_number())
      m->set(a + "rope.scaling.yarn_log_multiplier", GGUFValue::f32(float(0.1 * ms->get<double>())));
  }
  return {};
}

Status to_config(const GGUFFile& m, nlohmann::json* out) {
  nlohmann::json& c = *out;
  const std::string a = "deepseek2.";
  auto i = [&](const char* key) -> Result<int64_t> { return m.get_int(a + key); };
  if (m.int_or(a + "nextn_predict_layers", 0) != 0)
    return make_error("deepseek2: multi-token-prediction layers are not exported (llama.cpp's converter drops them)");
  if (!m.find(a + "attention.key_length_mla"))
    return make_error("deepseek2: only the split kv_b form (attn_k_b/attn_v_b, key_length_mla) exports");
  DF_ASSIGN(c["num_hidden_layers"], i("block_count"));
  DF_ASSIGN(c["max_position_embeddings"], i("context_length"));
  DF_ASSIGN(c["hidden_size"], i("embedding_length"));
  DF_ASSIGN(c["intermediate_size"], i("feed_forward_length"));
  DF_ASSIGN(c["num_attention_heads"], i("attention.head_count"));
  c["num_key_value_heads"] = c["num_attention_heads"];  // as published; GGUF's 1 is the MQA view
  DF_ASSIGN(int64_t r_q, i("attention.q_lora_rank"));
  c["q_lora_rank"] = r_q > 0 ? nlohmann::json(r_q) : nlohmann::json(nullptr);
  DF_ASSIGN(c["kv_lora_rank"], i("attention.kv_lora_rank"));
  DF_ASSIGN(int64_t d_rope, i("rope.dimension_count"));
  DF_ASSIGN(int64_t k_mla, i("attention.key_length_mla"));
  c["qk_rope_head_dim"] = d_rope;
  c["qk_nope_head_dim"] = k_mla - d_rope;
  DF_ASSIGN(c["v_head_dim"], i("attention.value_length_mla"));
  DF_ASSIGN(c["moe_intermediate_size"], i("expert_feed_forward_length"));
  DF_ASSIGN(c["n_routed_experts"], i("expert_count"));
  DF_ASSIGN(c["num_experts_per_tok"], i("expert_used_count"));
  DF_ASSIGN(c["n_shared_experts"], i("expert_shared_count"));
  c["first_k_dense_replace"] = m.int_or(a + "leading_dense_block_count", 0);
  c["n_group"] = std::max<int64_t>(1, m.int_or(a + "expert_group_count", 1));
  c["topk_group"] = std::max<int64_t>(1, m.int_or(a + "expert_group_used_count", 1));
  c["topk_method"] = "noaux_tc";
  const int64_t gating = m.int_or(a + "expert_gating_func", kGatingSoftmax);
  if (gating != kGatingSoftmax && gating != kGatingSigmoid)
    return make_error("deepseek2: expert_gating_func {} has no config.json form", gating);
  c["scoring_func"] = gating == kGatingSigmoid ? "sigmoid" : "softmax";
  c["norm_topk_prob"] = m.bool_or(a + "expert_weights_norm", false);
  // F32 values written as the double they are, so the import's float() gives them back.
  c["routed_scaling_factor"] = m.float_or(a + "expert_weights_scale", 1.0);
  DF_ASSIGN(c["rope_theta"], m.get_float(a + "rope.freq_base"));
  DF_ASSIGN(c["rms_norm_eps"], m.get_float(a + "attention.layer_norm_rms_epsilon"));
  c["rope_scaling"] = nullptr;
  if (m.string_or(a + "rope.scaling.type", "") == "yarn") {
    nlohmann::json y = {{"type", "yarn"}};
    DF_ASSIGN(y["factor"], m.get_float(a + "rope.scaling.factor"));
    DF_ASSIGN(y["original_max_position_embeddings"], i("rope.scaling.original_context_length"));
    if (m.find(a + "rope.scaling.yarn_beta_fast")) y["beta_fast"] = m.float_or(a + "rope.scaling.yarn_beta_fast", 32);
    if (m.find(a + "rope.scaling.yarn_beta_slow")) y["beta_slow"] = m.float_or(a + "rope.scaling.yarn_beta_slow", 1);
    if (m.find(a + "rope.scaling.yarn_log_multiplier")) {
      const double ms = m.float_or(a + "rope.scaling.yarn_log_multiplier", 0) / 0.1;
      y["mscale"] = ms;
      y["mscale_all_dim"] = ms;
    }
    c["rope_scaling"] = y;
  }
  c["moe_layer_freq"] = 1;
  c["num_nextn_predict_layers"] = 0;
  c["hidden_act"] = "silu";
  c["attention_bias"] = false;
  return {};
}

// The layer number of "model.layers.N...." (-1 for other names).
int layer_of(const std::string& name) {
  static const std::string p = "model.layers.";
  if (name.compare(0, p.size(), p) != 0) return -1;
  size_t q = p.size();
  int n = 0;
  while (q < name.size() && name[q] >= '0' && name[q] <= '9' && n < 100000) n = n * 10 + (name[q++] - '0');
  return q > p.size() && q < name.size() && name[q] == '.' ? n : -1;
}

// DeepSeek-V3 ships its MTP block as layer num_hidden_layers (num_nextn_predict_layers).
bool skip(const nlohmann::json& c, const std::string& name) {
  const int L = layer_of(name);
  auto n = c.find("num_hidden_layers");
  return L >= 0 && n != c.end() && n->is_number_integer() && L >= n->get<int64_t>();
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// DeepSeek-V3 / Kimi K2 in FP8: every linear layer of the decoder (attention, dense
// and shared FFNs, experts), not the embeddings, the head, the norms or the router.
// Kimi K2 Thinking in INT4: the routed experts only.
bool quantized(HfEncoding enc, const std::string& name) {
  if (layer_of(name) < 0 || (!ends_with(name, "_proj.weight") && !ends_with(name, "_mqa.weight"))) return false;
  if (enc == HfEncoding::Fp8) return true;
  if (enc == HfEncoding::Int4) return name.find(".mlp.experts.") != std::string::npos;
  return false;
}

}  // namespace

const HfArch& hf_arch_deepseek2() {
  using enum HfLayers;
  static const HfArch a{
      "deepseek_v3",
      "deepseek2",
      "DeepseekV3ForCausalLM",
      {
          {"token_embd.weight", "model.embed_tokens.weight"},
          {"blk.{L}.attn_norm.weight", "model.layers.{L}.input_layernorm.weight"},
          {"blk.{L}.attn_q_a_norm.weight", "model.layers.{L}.self_attn.q_a_layernorm.weight", true},
          {"blk.{L}.attn_kv_a_norm.weight", "model.layers.{L}.self_attn.kv_a_layernorm.weight"},
          {"blk.{L}.attn_q.weight", "model.layers.{L}.self_attn.q_proj.weight", true},
          {"blk.{L}.attn_q_a.weight", "model.layers.{L}.self_attn.q_a_proj.weight", true},
          {"blk.{L}.attn_q_b.weight", "model.layers.{L}.self_attn.q_b_proj.weight", true},
          {"blk.{L}.attn_kv_a_mqa.weight", "model.layers.{L}.self_attn.kv_a_proj_with_mqa.weight"},
          {"blk.{L}.attn_k_b.weight", "model.layers.{L}.self_attn.kv_b_proj.weight", false, false, HfDerive::None, "", 0, All, HfPart::KvbK},
          {"blk.{L}.attn_v_b.weight", "model.layers.{L}.self_attn.kv_b_proj.weight", false, false, HfDerive::None, "", 0, All, HfPart::KvbV},
          {"blk.{L}.attn_output.weight", "model.layers.{L}.self_attn.o_proj.weight"},
          {"blk.{L}.ffn_norm.weight", "model.layers.{L}.post_attention_layernorm.weight"},
          {"blk.{L}.ffn_gate.weight", "model.layers.{L}.mlp.gate_proj.weight", false, false, HfDerive::None, "", 0, Dense},
          {"blk.{L}.ffn_up.weight", "model.layers.{L}.mlp.up_proj.weight", false, false, HfDerive::None, "", 0, Dense},
          {"blk.{L}.ffn_down.weight", "model.layers.{L}.mlp.down_proj.weight", false, false, HfDerive::None, "", 0, Dense},
          {"blk.{L}.ffn_gate_inp.weight", "model.layers.{L}.mlp.gate.weight", false, true, HfDerive::None, "", 0, Moe},
          {"blk.{L}.exp_probs_b.bias", "model.layers.{L}.mlp.gate.e_score_correction_bias", true, false, HfDerive::None, "", 0, Moe},
          {"blk.{L}.ffn_gate_exps.weight", "model.layers.{L}.mlp.experts.{E}.gate_proj.weight", false, false, HfDerive::None, "", 0, Moe},
          {"blk.{L}.ffn_up_exps.weight", "model.layers.{L}.mlp.experts.{E}.up_proj.weight", false, false, HfDerive::None, "", 0, Moe},
          {"blk.{L}.ffn_down_exps.weight", "model.layers.{L}.mlp.experts.{E}.down_proj.weight", false, false, HfDerive::None, "", 0, Moe},
          {"blk.{L}.ffn_gate_shexp.weight", "model.layers.{L}.mlp.shared_experts.gate_proj.weight", false, false, HfDerive::None, "", 0, Moe},
          {"blk.{L}.ffn_up_shexp.weight", "model.layers.{L}.mlp.shared_experts.up_proj.weight", false, false, HfDerive::None, "", 0, Moe},
          {"blk.{L}.ffn_down_shexp.weight", "model.layers.{L}.mlp.shared_experts.down_proj.weight", false, false, HfDerive::None, "", 0, Moe},
          {"output_norm.weight", "model.norm.weight"},
          {"output.weight", "lm_head.weight", /*optional=*/true},
      },
      to_gguf,
      to_config,
      /*container_type=*/"",
      /*container_class=*/"",
      /*layer_kind=*/nullptr,
      skip,
      quantized,
  };
  return a;
}

}  // namespace deltafin
