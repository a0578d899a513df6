// Kimi K3 as published on Hugging Face (config.json model_type "kimi_k3" nesting a
// "kimi_linear" text_config; the text model under language_model.*) <-> GGUF
// "kimi-k3" as deltafin's loader (model/kimi_k3.cpp) and llama.cpp's read it.
//   Layers: linear_attn_config.kda_layers / full_attn_layers (1-based) pick KDA or
//     gated MLA per layer (GGUF attention.head_count_kv 0 / 1); the first
//     first_k_dense_replace layers have a dense FFN, the rest a latent MoE.
//   Derived tensors (format/hf_derive.h): the attention-residual scores are
//     res_norm * res_proj (fused, F32), ssm_a is -exp(A_log), and the MLA kv_b_proj is
//     split per head into attn_k_b (transposed) and attn_v_b, kept F32 (llama.cpp's
//     CPU graph cannot run other types there).
//   Routed experts w1 / w2 / w3 (gate / down / up) are compressed-tensors MXFP4
//     (weight_packed + weight_scale), stacked into GGUF MXFP4 bit for bit; everything
//     else is BF16, 1-D tensors, the convolutions and the router widened to F32.
//   The vision tower and mm_projector are listed and skipped (hf_folder.h).
#include "format/hf_arch.h"

#include <set>

namespace deltafin {
namespace {

constexpr unsigned kKda = 1, kMla = 2, kDense = 4, kMoe = 8;
const std::string kA = "kimi-k3.";

// The 1-based layer list `field` of linear_attn_config, as 0-based indices.
Result<std::set<int64_t>> layer_list(const nlohmann::json& lin, const char* field, int64_t n_layer) {
  auto it = lin.find(field);
  if (it == lin.end() || !it->is_array())
    return make_error("config.json: linear_attn_config.{} is {}; a list of 1-based layer numbers is needed", field,
                      it == lin.end() ? std::string("missing") : it->dump());
  std::set<int64_t> out;
  for (const auto& x : *it) {
    if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > n_layer)
      return make_error("config.json: linear_attn_config.{} holds {}; layers are numbered 1..{}", field, x.dump(),
                        n_layer);
    if (!out.insert(x.get<int64_t>() - 1).second)
      return make_error("config.json: linear_attn_config.{} lists layer {} twice", field, x.dump());
  }
  return out;
}

// head_count_kv per layer: 0 = KDA, 1 = MLA; every layer in exactly one list.
Result<std::vector<int64_t>> layer_kinds(const nlohmann::json& c) {
  DF_ASSIGN(int64_t n, hf_config_int(c, "num_hidden_layers"));
  auto lin = c.find("linear_attn_config");
  if (lin == c.end() || !lin->is_object()) return make_error("config.json: 'linear_attn_config' is missing");
  DF_ASSIGN(std::set<int64_t> kda, layer_list(*lin, "kda_layers", n));
  DF_ASSIGN(std::set<int64_t> mla, layer_list(*lin, "full_attn_layers", n));
  std::vector<int64_t> kinds;
  for (int64_t l = 0; l < n; ++l) {
    const bool k = kda.count(l) > 0, m = mla.count(l) > 0;
    if (k == m)
      return make_error("config.json: layer {} is in {} of linear_attn_config.kda_layers and full_attn_layers", l + 1,
                        k ? "both" : "neither");
    kinds.push_back(m ? 1 : 0);
  }
  return kinds;
}

unsigned kind_of(const nlohmann::json& c, int layer) {
  auto kinds = layer_kinds(c);  // checked by to_gguf before any layer is planned
  const bool mla = kinds.ok() && size_t(layer) < kinds->size() && (*kinds)[size_t(layer)] == 1;
  const bool dense = layer < c.value("first_k_dense_replace", 0);
  return (mla ? kMla : kKda) | (dense ? kDense : kMoe);
}

// Multi-token-prediction layers after the last: published beside the model, not run.
bool skip_tensor(const nlohmann::json& c, const std::string& name) {
  const std::string pre = "language_model.model.layers.";
  if (name.rfind(pre, 0) != 0) return false;
  size_t i = pre.size();
  int64_t l = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && l < 1000000) l = l * 10 + (name[i++] - '0');
  return i > pre.size() && i < name.size() && name[i] == '.' && l >= c.value("num_hidden_layers", int64_t(1) << 40);
}

Status to_gguf(const nlohmann::json& c, GGUFFile* m) {
  const HfConfigWriter w{c, m, kA};
  DF_TRY(w.u32("block_count", "num_hidden_layers"));
  DF_TRY(w.u32("context_length", "max_position_embeddings"));
  DF_TRY(w.u32("embedding_length", "hidden_size"));
  DF_TRY(w.u32("attention.head_count", "num_attention_heads"));
  DF_TRY(w.f32("attention.layer_norm_rms_epsilon", "rms_norm_eps"));
  DF_ASSIGN(std::vector<int64_t> kinds, layer_kinds(c));
  m->set(kA + "attention.head_count_kv", GGUFValue::int_array(GGUFType::U32, kinds));

  // MLA (NoPE: the rope part of each head exists but is never rotated).
  DF_ASSIGN(int64_t kv_lora, hf_config_int(c, "kv_lora_rank"));
  DF_ASSIGN(int64_t rope, hf_config_int(c, "qk_rope_head_dim"));
  DF_ASSIGN(int64_t nope, hf_config_int(c, "qk_nope_head_dim"));
  DF_ASSIGN(int64_t dv, hf_config_int(c, "v_head_dim"));
  DF_TRY(w.put("attention.key_length", kv_lora + rope, "kv_lora_rank"));
  DF_TRY(w.put("attention.value_length", kv_lora, "kv_lora_rank"));
  DF_TRY(w.put("attention.key_length_mla", nope + rope, "qk_nope_head_dim"));
  DF_TRY(w.put("attention.value_length_mla", dv, "v_head_dim"));
  DF_TRY(w.put("attention.kv_lora_rank", kv_lora, "kv_lora_rank"));
  DF_TRY(w.put("rope.dimension_count", rope, "qk_rope_head_dim"));
  if (auto q = c.find("q_lora_rank"); q != c.end() && !q->is_null()) {
    DF_TRY(w.u32("attention.q_lora_rank", "q_lora_rank"));
  }
  if (c.value("mla_use_nope", true) != true)
    return make_error("config.json: 'mla_use_nope' false (rotary MLA) is not supported for kimi_k3");

  // KDA: one head count for KDA and MLA in deltafin's and llama.cpp's kimi-k3.
  const nlohmann::json& lin = c["linear_attn_config"];
  DF_ASSIGN(int64_t heads, hf_config_int(lin, "num_heads"));
  if (heads != c.value("num_attention_heads", int64_t(-1)))
    return make_error("config.json: linear_attn_config.num_heads {} differs from num_attention_heads {}; not supported",
                      heads, c["num_attention_heads"].dump());
  DF_ASSIGN(int64_t head_dim, hf_config_int(lin, "head_dim"));
  DF_ASSIGN(int64_t conv, hf_config_int(lin, "short_conv_kernel_size"));
  DF_TRY(w.put("kda.head_dim", head_dim, "linear_attn_config.head_dim"));
  DF_TRY(w.put("ssm.conv_kernel", conv, "linear_attn_config.short_conv_kernel_size"));
  if (auto lb = lin.find("gate_lower_bound"); lb != lin.end() && !lb->is_null()) {
    DF_ASSIGN(double v, hf_config_float(lin, "gate_lower_bound"));
    m->set(kA + "kda.gate_lower_bound", GGUFValue::f32(float(v)));
  }

  // FFN: leading dense layers, then the latent MoE.
  DF_TRY(w.u32("leading_dense_block_count", "first_k_dense_replace"));
  DF_TRY(w.u32("feed_forward_length", "intermediate_size"));
  DF_TRY(w.u32("expert_feed_forward_length", "moe_intermediate_size"));
  DF_TRY(w.u32("expert_count", "num_experts"));
  DF_TRY(w.u32("expert_used_count", "num_experts_per_token"));
  m->set(kA + "expert_shared_count", GGUFValue::u32(uint32_t(std::max<int64_t>(0, c.value("num_shared_experts", 0)))));
  const std::string act = c.value("moe_router_activation_func", std::string("sigmoid"));
  if (act != "sigmoid" && act != "softmax")
    return make_error("config.json: moe_router_activation_func '{}' is not supported (sigmoid, softmax)", act);
  m->set(kA + "expert_gating_func", GGUFValue::u32(act == "sigmoid" ? 2 : 1));
  m->set(kA + "expert_weights_norm", GGUFValue::boolean(c.value("moe_renormalize", true)));
  m->set(kA + "expert_weights_scale", GGUFValue::f32(float(c.value("routed_scaling_factor", 1.0))));
  const int64_t groups = c.value("num_expert_group", int64_t(1));
  if (groups > 1) {
    DF_TRY(w.put("expert_group_count", groups, "num_expert_group"));
    DF_TRY(w.u32("expert_group_used_count", "topk_group"));
  }
  if (auto lat = c.find("routed_expert_hidden_size"); lat != c.end() && !lat->is_null()) {
    DF_TRY(w.u32("expert_latent_length", "routed_expert_hidden_size"));
  }
  if (c.value("moe_layer_freq", 1) != 1)
    return make_error("config.json: 'moe_layer_freq' {} is not supported (experts in every layer after the dense ones)",
                      c["moe_layer_freq"].dump());
  int64_t res_block = 0;
  if (auto r = c.find("attn_res_block_size"); r != c.end() && !r->is_null()) {
    DF_ASSIGN(res_block, hf_config_int(c, "attn_res_block_size"));
  }
  DF_TRY(w.put("attn_res.block_size", res_block, "attn_res_block_size"));
  DF_TRY(w.f32("activation.situ_beta", "activation_situ_beta"));
  DF_TRY(w.f32("activation.situ_linear_beta", "activation_situ_linear_beta"));
  return {};
}

Status to_config(const GGUFFile& m, nlohmann::json* out) {
  nlohmann::json& c = *out;
  auto i = [&](const char* key) -> Result<int64_t> { return m.get_int(kA + key); };
  auto has_tensor = [&](const std::string& suffix) {
    for (const auto& t : m.tensors)
      if (t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return true;
    return false;
  };
  DF_ASSIGN(int64_t n_layer, i("block_count"));
  c["num_hidden_layers"] = n_layer;
  DF_ASSIGN(c["max_position_embeddings"], i("context_length"));
  DF_ASSIGN(c["hidden_size"], i("embedding_length"));
  DF_ASSIGN(int64_t heads, i("attention.head_count"));
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = heads;
  DF_ASSIGN(c["rms_norm_eps"], m.get_float(kA + "attention.layer_norm_rms_epsilon"));
  const GGUFValue* kinds = m.find(kA + "attention.head_count_kv");
  if (!kinds || !kinds->is_array() || int64_t(kinds->ints.size()) != n_layer)
    return make_error("kimi-k3.attention.head_count_kv must be an array of {} layer kinds", n_layer);
  nlohmann::json kda = nlohmann::json::array(), full = nlohmann::json::array();
  for (int64_t l = 0; l < n_layer; ++l) (kinds->ints[size_t(l)] ? full : kda).push_back(l + 1);
  DF_ASSIGN(int64_t rope, i("rope.dimension_count"));
  DF_ASSIGN(int64_t dqk, i("attention.key_length_mla"));
  c["kv_lora_rank"] = m.int_or(kA + "attention.kv_lora_rank", 0);
  c["q_lora_rank"] = m.find(kA + "attention.q_lora_rank") ? nlohmann::json(m.int_or(kA + "attention.q_lora_rank", 0))
                                                          : nlohmann::json(nullptr);
  c["qk_rope_head_dim"] = rope;
  c["qk_nope_head_dim"] = dqk - rope;
  DF_ASSIGN(c["v_head_dim"], i("attention.value_length_mla"));
  c["mla_use_nope"] = true;
  c["mla_use_output_gate"] = has_tensor(".attn_gate.weight");
  nlohmann::json lin = {{"num_heads", heads}, {"kda_layers", kda}, {"full_attn_layers", full}};
  DF_ASSIGN(lin["head_dim"], i("kda.head_dim"));
  DF_ASSIGN(lin["short_conv_kernel_size"], i("ssm.conv_kernel"));
  if (m.find(kA + "kda.gate_lower_bound")) {
    DF_ASSIGN(lin["gate_lower_bound"], m.get_float(kA + "kda.gate_lower_bound"));
  }
  c["linear_attn_config"] = lin;
  c["first_k_dense_replace"] = m.int_or(kA + "leading_dense_block_count", 0);
  c["intermediate_size"] = m.int_or(kA + "feed_forward_length", 0);
  // Scalar or per-layer array (model/hparams.h); the first MoE layer's value.
  const GGUFValue* ff = m.find(kA + "expert_feed_forward_length");
  if (!ff) return make_error("kimi-k3.expert_feed_forward_length is missing");
  c["moe_intermediate_size"] = ff->is_array() ? ff->ints.back() : m.int_or(kA + "expert_feed_forward_length", 0);
  DF_ASSIGN(c["num_experts"], i("expert_count"));
  DF_ASSIGN(c["num_experts_per_token"], i("expert_used_count"));
  c["num_shared_experts"] = m.int_or(kA + "expert_shared_count", 0);
  c["moe_router_activation_func"] = m.int_or(kA + "expert_gating_func", 2) == 2 ? "sigmoid" : "softmax";
  c["moe_renormalize"] = m.bool_or(kA + "expert_weights_norm", false);
  c["routed_scaling_factor"] = m.float_or(kA + "expert_weights_scale", 1.0);
  c["num_expert_group"] = std::max<int64_t>(1, m.int_or(kA + "expert_group_count", 1));
  c["topk_group"] = std::max<int64_t>(1, m.int_or(kA + "expert_group_used_count", 1));
  c["use_grouped_topk"] = m.int_or(kA + "expert_group_count", 1) > 1;
  if (m.find(kA + "expert_latent_length")) c["routed_expert_hidden_size"] = m.int_or(kA + "expert_latent_length", 0);
  c["latent_moe_use_norm"] = has_tensor(".ffn_routed_norm.weight");
  c["moe_layer_freq"] = 1;
  c["num_nextn_predict_layers"] = 0;
  c["attn_res_block_size"] = m.int_or(kA + "attn_res.block_size", 0);
  DF_ASSIGN(c["activation_situ_beta"], m.get_float(kA + "activation.situ_beta"));
  DF_ASSIGN(c["activation_situ_linear_beta"], m.get_float(kA + "activation.situ_linear_beta"));
  c["hidden_act"] = "situ";
  return {};
}

}  // namespace

const HfArch& hf_arch_kimi_k3() {
  const std::string M = "language_model.model.", Ly = M + "layers.{L}.", At = Ly + "self_attn.",
                    Moe = Ly + "block_sparse_moe.";
  using D = HfDerive;
  static const HfArch a{
      "kimi_linear",
      "kimi-k3",
      "KimiLinearForCausalLM",
      {
          {"token_embd.weight", M + "embed_tokens.weight"},
          {"blk.{L}.attn_norm.weight", Ly + "input_layernorm.weight"},
          {"blk.{L}.ffn_norm.weight", Ly + "post_attention_layernorm.weight"},
          {"blk.{L}.attn_res_score.weight", Ly + "self_attention_res_norm.weight", true, true, D::Mul,
           Ly + "self_attention_res_proj.weight"},
          {"blk.{L}.ffn_res_score.weight", Ly + "mlp_res_norm.weight", true, true, D::Mul, Ly + "mlp_res_proj.weight"},
          // KDA layers.
          {"blk.{L}.ssm_conv1d_q.weight", At + "q_conv1d.weight", false, true, D::None, "", kKda},
          {"blk.{L}.ssm_conv1d_k.weight", At + "k_conv1d.weight", false, true, D::None, "", kKda},
          {"blk.{L}.ssm_conv1d_v.weight", At + "v_conv1d.weight", false, true, D::None, "", kKda},
          {"blk.{L}.attn_q.weight", At + "q_proj.weight", false, false, D::None, "", kKda},
          {"blk.{L}.attn_k.weight", At + "k_proj.weight", false, false, D::None, "", kKda},
          {"blk.{L}.attn_v.weight", At + "v_proj.weight", false, false, D::None, "", kKda},
          {"blk.{L}.ssm_f_a.weight", At + "f_a_proj.weight", false, false, D::None, "", kKda},
          {"blk.{L}.ssm_f_b.weight", At + "f_b_proj.weight", false, false, D::None, "", kKda},
          {"blk.{L}.ssm_beta.weight", At + "b_proj.weight", false, false, D::None, "", kKda},
          {"blk.{L}.ssm_a", At + "A_log", false, true, D::NegExp, "", kKda},
          {"blk.{L}.ssm_dt.bias", At + "dt_bias", false, true, D::None, "", kKda},
          {"blk.{L}.ssm_g.weight", At + "g_proj.weight", false, false, D::None, "", kKda},
          {"blk.{L}.ssm_norm.weight", At + "o_norm.weight", false, true, D::None, "", kKda},
          // Gated MLA layers (q-LoRA or a plain q_proj; the output gate optional).
          {"blk.{L}.attn_q_a_norm.weight", At + "q_a_layernorm.weight", true, true, D::None, "", kMla},
          {"blk.{L}.attn_q_a.weight", At + "q_a_proj.weight", true, false, D::None, "", kMla},
          {"blk.{L}.attn_q_b.weight", At + "q_b_proj.weight", true, false, D::None, "", kMla},
          {"blk.{L}.attn_q.weight", At + "q_proj.weight", true, false, D::None, "", kMla},
          {"blk.{L}.attn_kv_a_mqa.weight", At + "kv_a_proj_with_mqa.weight", false, false, D::None, "", kMla},
          {"blk.{L}.attn_kv_a_norm.weight", At + "kv_a_layernorm.weight", false, true, D::None, "", kMla},
          {"blk.{L}.attn_k_b.weight", At + "kv_b_proj.weight", false, true, D::None, "", kMla, HfLayers::All,
           HfPart::KvbK},
          {"blk.{L}.attn_v_b.weight", At + "kv_b_proj.weight", false, true, D::None, "", kMla, HfLayers::All,
           HfPart::KvbV},
          {"blk.{L}.attn_gate.weight", At + "g_proj.weight", true, false, D::None, "", kMla},
          {"blk.{L}.attn_output.weight", At + "o_proj.weight"},
          // Leading dense FFN layers.
          {"blk.{L}.ffn_gate.weight", Ly + "mlp.gate_proj.weight", false, false, D::None, "", kDense},
          {"blk.{L}.ffn_up.weight", Ly + "mlp.up_proj.weight", false, false, D::None, "", kDense},
          {"blk.{L}.ffn_down.weight", Ly + "mlp.down_proj.weight", false, false, D::None, "", kDense},
          // Latent MoE layers.
          {"blk.{L}.ffn_gate_inp.weight", Moe + "gate.weight", false, true, D::None, "", kMoe},
          {"blk.{L}.exp_probs_b.bias", Moe + "gate.e_score_correction_bias", false, true, D::None, "", kMoe},
          {"blk.{L}.ffn_gate_exps.weight", Moe + "experts.{E}.w1.weight", false, false, D::None, "", kMoe},
          {"blk.{L}.ffn_down_exps.weight", Moe + "experts.{E}.w2.weight", false, false, D::None, "", kMoe},
          {"blk.{L}.ffn_up_exps.weight", Moe + "experts.{E}.w3.weight", false, false, D::None, "", kMoe},
          {"blk.{L}.ffn_routed_down.weight", Moe + "routed_expert_down_proj.weight", true, false, D::None, "", kMoe},
          {"blk.{L}.ffn_routed_up.weight", Moe + "routed_expert_up_proj.weight", true, false, D::None, "", kMoe},
          {"blk.{L}.ffn_routed_norm.weight", Moe + "routed_expert_norm.weight", true, true, D::None, "", kMoe},
          {"blk.{L}.ffn_gate_shexp.weight", Moe + "shared_experts.gate_proj.weight", true, false, D::None, "", kMoe},
          {"blk.{L}.ffn_up_shexp.weight", Moe + "shared_experts.up_proj.weight", true, false, D::None, "", kMoe},
          {"blk.{L}.ffn_down_shexp.weight", Moe + "shared_experts.down_proj.weight", true, false, D::None, "", kMoe},
          {"output_res_score.weight", M + "output_attn_res_norm.weight", true, true, D::Mul,
           M + "output_attn_res_proj.weight"},
          {"output_norm.weight", M + "norm.weight"},
          {"output.weight", "language_model.lm_head.weight"},
      },
      to_gguf,
      to_config,
      "kimi_k3",
      "KimiK3ForConditionalGeneration",
      kind_of,
      skip_tensor,
  };
  return a;
}

}  // namespace deltafin
