// Synthetic deepseek2 (DeepSeek-V3/R1, Kimi K2): the tensors and metadata llama.cpp's
// deepseek2 loader reads, laid out as convert_hf_to_gguf.py writes them. MLA in the
// absorbed form (attn_k_b/attn_v_b, key_length_mla set) when mla_split_kv_b, else
// the legacy attn_kv_b form; q-LoRA when q_lora_rank > 0; sigmoid routing with a
// score bias, expert groups, weight norm and a routed scaling factor; YaRN when
// yarn_factor > 0.
#include <cmath>

#include "model/weights.h"
#include "synth/plan_common.h"
#include "synth/synth.h"

namespace deltafin {

Status plan_deepseek2(const SynthSpec& s, SynthPlan* p) {
  if (s.nope_dim < 1 || s.rope_dim < 2 || s.rope_dim % 2 || s.kv_lora_rank < 1 || s.v_head_dim < 1)
    return make_error("synth deepseek2: need nope_dim >= 1, an even rope_dim >= 2, kv_lora_rank >= 1");
  if (s.n_dense_lead >= s.n_layer) return make_error("synth deepseek2: every layer would be dense");
  if (s.nextn < 0 || s.nextn > 1) return make_error("synth deepseek2: nextn must be 0 or 1");
  if (s.n_shared < 1) return make_error("synth deepseek2: llama.cpp needs at least one shared expert");
  if (s.n_layer == 26 || s.n_layer == 27)
    return make_error("synth deepseek2: 26/27 layers make llama.cpp treat the model as 'lite' (no q-LoRA)");
  if (s.n_group > 1 && (s.n_expert % s.n_group || s.n_group_used < 1 || s.n_group_used >= s.n_group ||
                        s.n_expert / s.n_group < 2 || s.n_used > s.n_group_used * (s.n_expert / s.n_group)))
    return make_error("synth deepseek2: bad expert groups ({} experts, {} groups, {} used, top-{})", s.n_expert,
                      s.n_group, s.n_group_used, s.n_used);

  GGUFFile& m = p->meta;
  DF_ASSIGN(int64_t n_vocab, synth_vocab(s, &m));
  const std::string a = "deepseek2.";
  auto u32 = [&](const char* k, int64_t v) { m.set(a + k, GGUFValue::u32(uint32_t(v))); };
  auto f32 = [&](const char* k, float v) { m.set(a + k, GGUFValue::f32(v)); };
  const int64_t E = s.n_embd, H = s.n_head, dn = s.nope_dim, dr = s.rope_dim, dv = s.v_head_dim;
  const int64_t dqk = dn + dr, r_q = s.q_lora_rank, r_kv = s.kv_lora_rank, F = s.n_ff_exp;
  const bool split = s.mla_split_kv_b;

  // MTP ("nextn") blocks follow the trunk's layers and count in block_count.
  u32("block_count", s.n_layer + s.nextn);
  if (s.nextn > 0) u32("nextn_predict_layers", s.nextn);
  u32("context_length", s.n_ctx);
  u32("embedding_length", E);
  u32("feed_forward_length", s.n_ff);
  u32("attention.head_count", H);
  // The absorbed form is an MQA over the latent (one KV head of r_kv + d_rope).
  u32("attention.head_count_kv", split ? 1 : H);
  f32("rope.freq_base", s.freq_base);
  f32("attention.layer_norm_rms_epsilon", 1e-6f);
  u32("expert_gating_func", 2);  // sigmoid
  u32("leading_dense_block_count", s.n_dense_lead);
  u32("vocab_size", n_vocab);
  u32("attention.q_lora_rank", r_q);  // read unless the model is "lite"; 0 means attn_q
  u32("attention.kv_lora_rank", r_kv);
  if (split) {
    u32("attention.key_length", r_kv + dr);
    u32("attention.value_length", r_kv);
    u32("attention.key_length_mla", dqk);
    u32("attention.value_length_mla", dv);
  } else {
    u32("attention.key_length", dqk);
    u32("attention.value_length", dv);
  }
  u32("expert_feed_forward_length", F);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_used);
  u32("expert_shared_count", s.n_shared);
  f32("expert_weights_scale", s.routed_scale);
  m.set(a + "expert_weights_norm", GGUFValue::boolean(true));
  u32("expert_group_count", s.n_group);
  u32("expert_group_used_count", s.n_group_used);
  u32("rope.dimension_count", dr);
  if (s.yarn_factor > 0) {
    // As the converter writes a DeepSeek-V3 / Kimi-K2 config's rope_scaling. The
    // beta keys are written too (K2's config has beta_fast = 1); llama.cpp ignores
    // them for deepseek2 and uses 32/1.
    m.set(a + "rope.scaling.type", GGUFValue::str("yarn"));
    f32("rope.scaling.factor", s.yarn_factor);
    u32("rope.scaling.original_context_length", s.yarn_orig_ctx);
    f32("rope.scaling.yarn_beta_fast", 1.0f);
    f32("rope.scaling.yarn_beta_slow", 1.0f);
    f32("rope.scaling.yarn_log_multiplier", 0.1f * s.yarn_mscale_all_dim);
  }
  m.set("general.file_type", GGUFValue::u32(0));

  auto mat = [&](std::string name, int64_t cols, int64_t rows, float gain = 1.0f) {
    return plan_matrix(s, std::move(name), cols, rows, gain);
  };
  auto mat3 = [&](std::string name, int64_t cols, int64_t rows, int64_t n) {
    return plan_matrix3(fit_type(s.type, cols), std::move(name), cols, rows, n);
  };
  // Skew: the router rows get offsets along the direction every embedding carries
  // (as for qwen3moe), and the selection bias (where DeepSeek-V3's load balancing
  // acts) gets the per-expert offsets x0.1. Sigmoid scores are bounded, so this is
  // only roughly Zipf: with 64 experts, top-8, no groups and --skew 1 the most
  // popular experts take about 10% of the slots (Zipf(1): 11%, 8.5%, 6.6%, ...).
  const std::vector<float> skew = synth_router_skew(s, s.n_expert);
  auto& T = p->tensors;

  T.push_back(plan_embedding(s, n_vocab, !skew.empty()));
  for (int il = 0; il < s.n_layer + s.nextn; ++il) {
    auto n = [&](const char* x) { return layer_name(il, x); };
    if (il >= s.n_layer) {
      // An MTP block: [enorm(embed(next token)) | hnorm(h)] -> eh_proj -> a MoE layer
      // -> shared_head_norm -> the output head (no nextn.embed_tokens /
      // shared_head_head: the trunk's are used, as llama.cpp allows).
      T.push_back(plan_norm(n("nextn.enorm.weight"), E));
      T.push_back(plan_norm(n("nextn.hnorm.weight"), E));
      T.push_back(mat(n("nextn.eh_proj.weight"), 2 * E, E));
      T.push_back(plan_norm(n("nextn.shared_head_norm.weight"), E));
    }
    T.push_back(plan_norm(n("attn_norm.weight"), E));
    if (r_q > 0) T.push_back(plan_norm(n("attn_q_a_norm.weight"), r_q));
    T.push_back(plan_norm(n("attn_kv_a_norm.weight"), r_kv));
    if (r_q > 0) {
      T.push_back(mat(n("attn_q_a.weight"), E, r_q));
      T.push_back(mat(n("attn_q_b.weight"), r_q, H * dqk));
    } else {
      T.push_back(mat(n("attn_q.weight"), E, H * dqk));
    }
    T.push_back(mat(n("attn_kv_a_mqa.weight"), E, r_kv + dr));
    if (split) {
      T.push_back(mat3(n("attn_k_b.weight"), dn, r_kv, H));
      T.push_back(mat3(n("attn_v_b.weight"), r_kv, dv, H));
    } else {
      T.push_back(mat(n("attn_kv_b.weight"), r_kv, H * (dn + dv)));
    }
    T.push_back(mat(n("attn_output.weight"), H * dv, E));
    T.push_back(plan_norm(n("ffn_norm.weight"), E));
    if (il < s.n_dense_lead) {
      plan_gated_ffn(s, il, "", s.n_ff, &T);
      continue;
    }
    T.push_back(plan_router(s, il, E, skew));
    TensorPlan bias = plan_tensor(n("exp_probs_b.bias"), DType::F32, {s.n_expert});
    bias.init = Init::Bias;
    bias.std = 0.1f;
    if (!skew.empty()) {
      bias.values.resize(size_t(s.n_expert));
      for (int e = 0; e < s.n_expert; ++e) bias.values[size_t(e)] = 0.1f * skew[size_t(e)];
    }
    T.push_back(bias);
    plan_expert_stacks(s, il, E, &T);
    plan_gated_ffn(s, il, "_shexp", F * s.n_shared, &T);
  }
  plan_output_head(s, n_vocab, &T);
  return {};
}

void tiny_deepseek2(SynthSpec* d) {
  tiny_mla_shape(d);
  // DeepSeek-V3's form: absorbed MLA (wk_b/wv_b), q-LoRA, 2 expert groups of which
  // 1 is kept, YaRN x8 over a 512-token original context (so contexts past 512
  // exercise the interpolation) with DeepSeek-V2-Lite's mscale_all_dim 0.707 (the
  // deepseek2 special case of llama.cpp's attn_factor).
  d->mla_split_kv_b = true;
  d->yarn_factor = 8.0f;
  d->yarn_orig_ctx = 512;
  d->yarn_mscale_all_dim = 0.707f;
  d->routed_scale = 2.5f;
}

}  // namespace deltafin
