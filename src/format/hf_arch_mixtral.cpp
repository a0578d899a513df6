// Mixtral as published on Hugging Face (model_type "mixtral", MixtralForCausalLM,
// BF16) <-> GGUF "llama" as llama.cpp's converter writes it (LlamaModel): the same
// metadata keys; q_proj/k_proj rows permuted from the rotate-half RoPE layout to the
// adjacent pairs llama's rope rotates (HfPart::RopeQ/RopeK, hf_arch.h); the experts'
// w1/w3/w2 stacked over ne[2] as ffn_gate_exps/ffn_up_exps/ffn_down_exps; 1-D norms
// and the router stored F32. Mixtral's router is a softmax over all experts, top-k,
// renormalised over the k chosen: what llama.cpp's llama graph does with no key to say
// so. The tokenizer is SentencePiece's tokenizer.model (format/hf_tokenizer.h).
#include "format/hf_arch.h"

namespace deltafin {
namespace {

// A config field that may be absent or null; false when it is either.
bool has_value(const nlohmann::json& c, const char* field) {
  auto it = c.find(field);
  return it != c.end() && !it->is_null();
}

Status to_gguf(const nlohmann::json& c, GGUFFile* m) {
  const std::string a = "llama.";
  const HfConfigWriter w{c, m, a};
  DF_TRY(w.u32("block_count", "num_hidden_layers"));
  DF_TRY(w.u32("context_length", "max_position_embeddings"));
  DF_TRY(w.u32("embedding_length", "hidden_size"));
  // For llama the expert width too (llama.cpp reads no expert_feed_forward_length).
  DF_TRY(w.u32("feed_forward_length", "intermediate_size"));
  DF_TRY(w.u32("attention.head_count", "num_attention_heads"));
  DF_TRY(w.u32("attention.head_count_kv", "num_key_value_heads"));
  DF_TRY(w.f32("rope.freq_base", "rope_theta"));
  DF_TRY(w.f32("attention.layer_norm_rms_epsilon", "rms_norm_eps"));
  DF_TRY(w.u32("expert_count", "num_local_experts"));
  DF_TRY(w.u32("expert_used_count", "num_experts_per_tok"));
  DF_TRY(w.u32("vocab_size", "vocab_size"));
  // The head size: head_dim when given (then also the key and value lengths, as the
  // converter writes them), else hidden_size / num_attention_heads.
  DF_ASSIGN(int64_t heads, hf_config_int(c, "num_attention_heads"));
  DF_ASSIGN(int64_t hidden, hf_config_int(c, "hidden_size"));
  if (heads <= 0) return make_error("config.json: 'num_attention_heads' is {}; at least 1 is needed", heads);
  int64_t head_dim = hidden / heads;
  if (has_value(c, "head_dim")) {
    DF_ASSIGN(head_dim, hf_config_int(c, "head_dim"));
    DF_TRY(w.put("attention.key_length", head_dim, "head_dim"));
    DF_TRY(w.put("attention.value_length", head_dim, "head_dim"));
  } else if (hidden % heads != 0) {
    return make_error("config.json: 'hidden_size' {} is not a multiple of 'num_attention_heads' {} and there is no "
                      "'head_dim'",
                      hidden, heads);
  }
  if (head_dim <= 0 || head_dim % 2 != 0)
    return make_error("config.json: the head size {} must be a positive even number (RoPE rotates pairs)", head_dim);
  DF_TRY(w.put("rope.dimension_count", head_dim, "head_dim"));

  // What the GGUF cannot say, refused rather than run differently.
  const std::string act = c.value("hidden_act", std::string("silu"));
  if (act != "silu") return make_error("config.json: 'hidden_act' '{}' is not supported for mixtral (silu)", act);
  if (has_value(c, "rope_scaling"))
    return make_error("config.json: 'rope_scaling' {} is not supported for mixtral", c["rope_scaling"].dump());
  // Sliding-window attention narrower than the context: neither llama.cpp's llama
  // nor deltafin runs it (the converter drops the key), so the model would differ.
  if (has_value(c, "sliding_window")) {
    DF_ASSIGN(int64_t sw, hf_config_int(c, "sliding_window"));
    DF_ASSIGN(int64_t ctx, hf_config_int(c, "max_position_embeddings"));
    if (sw < ctx)
      return make_error("config.json: 'sliding_window' {} < 'max_position_embeddings' {}: sliding-window attention "
                        "is not supported",
                        sw, ctx);
  }
  return {};
}

Status to_config(const GGUFFile& m, nlohmann::json* out) {
  nlohmann::json& c = *out;
  const std::string a = "llama.";
  auto i = [&](const char* key) -> Result<int64_t> { return m.get_int(a + key); };
  if (!m.find(a + "expert_count"))
    return make_error("llama: a dense model (no llama.expert_count) has no Mixtral form");
  if (m.string_or(a + "rope.scaling.type", "none") != "none")
    return make_error("llama: rope scaling '{}' has no Mixtral config.json form", m.string_or(a + "rope.scaling.type", ""));
  DF_ASSIGN(c["num_hidden_layers"], i("block_count"));
  DF_ASSIGN(c["max_position_embeddings"], i("context_length"));
  DF_ASSIGN(int64_t hidden, i("embedding_length"));
  c["hidden_size"] = hidden;
  DF_ASSIGN(c["intermediate_size"], i("feed_forward_length"));
  DF_ASSIGN(int64_t heads, i("attention.head_count"));
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = m.int_or(a + "attention.head_count_kv", heads);
  const int64_t head_dim = m.int_or(a + "attention.key_length", heads > 0 ? hidden / heads : 0);
  if (m.int_or(a + "rope.dimension_count", head_dim) != head_dim)
    return make_error("llama: rope.dimension_count differs from the head size {}; Mixtral rotates whole heads", head_dim);
  c["head_dim"] = head_dim;
  DF_ASSIGN(c["num_local_experts"], i("expert_count"));
  DF_ASSIGN(c["num_experts_per_tok"], i("expert_used_count"));
  // F32 values written as the double they are, so the import's float() gives them back.
  DF_ASSIGN(c["rope_theta"], m.get_float(a + "rope.freq_base"));
  DF_ASSIGN(c["rms_norm_eps"], m.get_float(a + "attention.layer_norm_rms_epsilon"));
  c["hidden_act"] = "silu";
  c["rope_scaling"] = nullptr;
  c["sliding_window"] = nullptr;
  c["attention_dropout"] = 0.0;
  c["output_router_logits"] = false;
  return {};
}

}  // namespace

const HfArch& hf_arch_mixtral() {
  using enum HfLayers;
  static const HfArch a{
      "mixtral",
      "llama",
      "MixtralForCausalLM",
      {
          {"token_embd.weight", "model.embed_tokens.weight"},
          {"blk.{L}.attn_norm.weight", "model.layers.{L}.input_layernorm.weight"},
          {"blk.{L}.attn_q.weight", "model.layers.{L}.self_attn.q_proj.weight", false, false, HfDerive::None, "", 0,
           All, HfPart::RopeQ},
          {"blk.{L}.attn_k.weight", "model.layers.{L}.self_attn.k_proj.weight", false, false, HfDerive::None, "", 0,
           All, HfPart::RopeK},
          {"blk.{L}.attn_v.weight", "model.layers.{L}.self_attn.v_proj.weight"},
          {"blk.{L}.attn_output.weight", "model.layers.{L}.self_attn.o_proj.weight"},
          {"blk.{L}.ffn_norm.weight", "model.layers.{L}.post_attention_layernorm.weight"},
          {"blk.{L}.ffn_gate_inp.weight", "model.layers.{L}.block_sparse_moe.gate.weight", false, true},
          {"blk.{L}.ffn_gate_exps.weight", "model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight"},
          {"blk.{L}.ffn_down_exps.weight", "model.layers.{L}.block_sparse_moe.experts.{E}.w2.weight"},
          {"blk.{L}.ffn_up_exps.weight", "model.layers.{L}.block_sparse_moe.experts.{E}.w3.weight"},
          {"output_norm.weight", "model.norm.weight"},
          {"output.weight", "lm_head.weight", /*optional=*/true},
      },
      to_gguf,
      to_config,
  };
  return a;
}

}  // namespace deltafin
