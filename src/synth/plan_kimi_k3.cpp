// Synthetic kimi-k3: the tensors and metadata llama.cpp's kimi-k3 loader reads.
// Layer pattern as in Kimi-K3: every kda_period-th layer (1-based) is gated MLA, the
// others KDA; the first n_dense_lead layers have a dense SiTU FFN, the rest a latent
// MoE (routed experts at width moe_latent, or n_embd when 0) with shared experts;
// attention residuals every attn_res_block layers.
#include <cmath>

#include "model/weights.h"
#include "synth/plan_common.h"
#include "synth/synth.h"

namespace deltafin {

Status plan_kimi_k3(const SynthSpec& s, SynthPlan* p) {
  if (s.kda_head_dim <= 0 || s.d_conv < 1 || s.kv_lora_rank <= 0 || s.n_head <= 0)
    return make_error("synth kimi-k3: kda_head_dim, d_conv, kv_lora_rank and n_head must be positive");
  if (s.n_expert % std::max(s.n_group, 1) != 0)
    return make_error("synth kimi-k3: {} experts do not split into {} groups", s.n_expert, s.n_group);
  GGUFFile& m = p->meta;
  DF_ASSIGN(int64_t n_vocab, synth_vocab(s, &m));
  const std::string a = "kimi-k3.";
  auto u32 = [&](const std::string& k, int64_t v) { m.set(a + k, GGUFValue::u32(uint32_t(v))); };
  auto f32 = [&](const std::string& k, float v) { m.set(a + k, GGUFValue::f32(v)); };

  const int64_t E = s.n_embd, H = s.n_head, S = s.kda_head_dim, D = H * S, K = s.d_conv;
  const int64_t dn = s.nope_dim, dr = s.rope_dim, dqk = dn + dr, dv = s.v_head_dim;
  const int64_t r_kv = s.kv_lora_rank, r_q = s.q_lora_rank;
  const int64_t F = s.n_ff_exp, L = s.moe_latent > 0 ? s.moe_latent : E, F_sh = F * std::max(s.n_shared, 1);
  auto is_mla = [&](int il) { return s.kda_period > 0 && (il + 1) % s.kda_period == 0; };

  std::vector<int64_t> kinds;  // head_count_kv per layer: 0 = KDA, 1 = MLA
  for (int il = 0; il < s.n_layer; ++il) kinds.push_back(is_mla(il) ? 1 : 0);
  u32("block_count", s.n_layer);
  u32("context_length", s.n_ctx);
  u32("embedding_length", E);
  u32("attention.head_count", H);
  m.set(a + "attention.head_count_kv", GGUFValue::int_array(GGUFType::U32, kinds));
  f32("attention.layer_norm_rms_epsilon", 1e-5f);
  u32("attention.key_length", r_kv + dr);
  u32("attention.value_length", r_kv);
  u32("attention.key_length_mla", dqk);
  u32("attention.value_length_mla", dv);
  if (r_q > 0) u32("attention.q_lora_rank", r_q);
  u32("attention.kv_lora_rank", r_kv);
  u32("rope.dimension_count", dr);
  u32("ssm.conv_kernel", K);
  u32("kda.head_dim", S);
  f32("kda.gate_lower_bound", s.kda_gate_lower_bound);
  u32("leading_dense_block_count", s.n_dense_lead);
  u32("feed_forward_length", s.n_ff);
  u32("expert_feed_forward_length", F);
  u32("expert_shared_count", s.n_shared);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_used);
  u32("expert_gating_func", 2);
  m.set(a + "expert_weights_norm", GGUFValue::boolean(true));
  f32("expert_weights_scale", 2.5f);
  if (s.moe_latent > 0) u32("expert_latent_length", s.moe_latent);
  if (s.n_group > 1) {
    u32("expert_group_count", s.n_group);
    u32("expert_group_used_count", s.n_group_used);
  }
  u32("attn_res.block_size", s.attn_res_block);
  f32("activation.situ_beta", s.situ_beta);
  f32("activation.situ_linear_beta", s.situ_linear_beta);
  m.set("general.file_type", GGUFValue::u32(0));

  auto mat = [&](std::string name, int64_t cols, int64_t rows, float gain = 1.0f) {
    return plan_matrix(s, std::move(name), cols, rows, gain);
  };
  // The per-head MLA matrices stay F32: the oracle's llama.cpp (CPU) cannot run K3
  // otherwise (a non-F32 attn_k_b aborts graph scheduling, a Q8_0 or F16 attn_v_b
  // gives NaN logits).
  auto mat3 = [&](std::string name, int64_t cols, int64_t rows, int64_t n) {
    return plan_matrix3(DType::F32, std::move(name), cols, rows, n);
  };
  auto vec = [&](std::string name, std::vector<int64_t> shape, float std) {
    TensorPlan t = plan_tensor(std::move(name), DType::F32, std::move(shape));
    t.init = Init::Bias;
    t.std = std;
    return t;
  };
  const std::vector<float> skew = synth_router_skew(s, s.n_expert);
  auto& T = p->tensors;

  T.push_back(plan_embedding(s, n_vocab, !skew.empty()));
  for (int il = 0; il < s.n_layer; ++il) {
    auto n = [&](const char* x) { return layer_name(il, x); };
    T.push_back(plan_norm(n("attn_norm.weight"), E));
    T.push_back(plan_norm(n("ffn_norm.weight"), E));
    if (s.attn_res_block > 0) {
      // HF res_norm.weight * res_proj.weight, fused by the converter.
      T.push_back(vec(n("attn_res_score.weight"), {E}, 1.5f / std::sqrt(float(E))));
      T.push_back(vec(n("ffn_res_score.weight"), {E}, 1.5f / std::sqrt(float(E))));
    }
    if (!is_mla(il)) {
      for (const char* c : {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"})
        T.push_back(vec(n(c), {K, 1, D}, 0.6f));  // F32: ggml_ssm_conv asserts it
      T.push_back(mat(n("attn_q.weight"), E, D));
      T.push_back(mat(n("attn_k.weight"), E, D));
      T.push_back(mat(n("attn_v.weight"), E, D));
      T.push_back(mat(n("ssm_f_a.weight"), E, S));
      T.push_back(mat(n("ssm_f_b.weight"), S, D));
      T.push_back(mat(n("ssm_beta.weight"), E, H));
      // ssm_a holds -exp(A_log); under the lower-bound gate, g = lb * sigmoid(-A z)
      // lies in (lb, 0) whatever A's sign, so a positive ~1 draw is as good.
      T.push_back(plan_norm(n("ssm_a"), H));
      T.push_back(vec(n("ssm_dt.bias"), {D}, 2.0f));  // spreads the decay rates
      T.push_back(mat(n("ssm_g.weight"), E, D));
      T.push_back(plan_norm(n("ssm_norm.weight"), S));
      T.push_back(mat(n("attn_output.weight"), D, E));
    } else {
      if (r_q > 0) {
        T.push_back(plan_norm(n("attn_q_a_norm.weight"), r_q));
        T.push_back(mat(n("attn_q_a.weight"), E, r_q));
        T.push_back(mat(n("attn_q_b.weight"), r_q, H * dqk));
      } else {
        T.push_back(mat(n("attn_q.weight"), E, H * dqk));
      }
      T.push_back(mat(n("attn_kv_a_mqa.weight"), E, r_kv + dr));
      T.push_back(plan_norm(n("attn_kv_a_norm.weight"), r_kv));
      T.push_back(mat3(n("attn_k_b.weight"), dn, r_kv, H));
      T.push_back(mat3(n("attn_v_b.weight"), r_kv, dv, H));
      if (s.mla_gate) T.push_back(mat(n("attn_gate.weight"), E, H * dv));
      T.push_back(mat(n("attn_output.weight"), H * dv, E));
    }
    if (il < s.n_dense_lead) {
      plan_gated_ffn(s, il, "", s.n_ff, &T);
      continue;
    }
    T.push_back(plan_router(s, il, E, skew));
    T.push_back(vec(n("exp_probs_b.bias"), {s.n_expert}, 0.05f));
    plan_expert_stacks(s, il, L, &T);
    if (s.moe_latent > 0) {
      T.push_back(mat(n("ffn_routed_down.weight"), E, L));
      T.push_back(mat(n("ffn_routed_up.weight"), L, E));
      T.push_back(plan_norm(n("ffn_routed_norm.weight"), L));
    }
    if (s.n_shared > 0) plan_gated_ffn(s, il, "_shexp", F_sh, &T);
  }
  if (s.attn_res_block > 0) T.push_back(vec("output_res_score.weight", {E}, 1.5f / std::sqrt(float(E))));
  plan_output_head(s, n_vocab, &T);
  return {};
}

void tiny_kimi_k3(SynthSpec* d) {
  tiny_mla_shape(d);
  // Layers: KDA (dense FFN), KDA, KDA, MLA, KDA; attention residuals every 2.
  d->n_layer = 5;
  d->kda_period = 4;
  d->kda_head_dim = 64;
  d->moe_latent = 128;
  d->attn_res_block = 2;
  d->expert_type = DType::MXFP4;
}

}  // namespace deltafin
