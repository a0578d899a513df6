#include "synth/plan_common.h"

#include <cmath>

#include "model/weights.h"

namespace deltafin {

TensorPlan plan_tensor(std::string name, DType type, std::vector<int64_t> shape) {
  TensorPlan t;
  t.name = std::move(name);
  t.type = type;
  t.shape = std::move(shape);
  return t;
}

TensorPlan plan_matrix(const SynthSpec& s, std::string name, int64_t cols, int64_t rows, float gain) {
  TensorPlan t = plan_tensor(std::move(name), fit_type(s.type, cols), {cols, rows});
  t.std = gain / std::sqrt(float(cols));
  return t;
}

TensorPlan plan_matrix3(DType type, std::string name, int64_t cols, int64_t rows, int64_t n) {
  TensorPlan t = plan_tensor(std::move(name), type, {cols, rows, n});
  t.std = 1.0f / std::sqrt(float(cols));
  return t;
}

TensorPlan plan_norm(std::string name, int64_t n) {
  TensorPlan t = plan_tensor(std::move(name), DType::F32, {n});
  t.init = Init::NormWeight;
  return t;
}

TensorPlan plan_embedding(const SynthSpec& s, int64_t n_vocab, bool skewed) {
  const int64_t E = s.n_embd;
  TensorPlan t = plan_tensor("token_embd.weight", fit_type(s.type, E), {E, n_vocab});
  t.std = 1.0f;
  t.add_dir_all_rows = skewed;
  return t;
}

void plan_output_head(const SynthSpec& s, int64_t n_vocab, std::vector<TensorPlan>* out) {
  out->push_back(plan_norm("output_norm.weight", s.n_embd));
  out->push_back(plan_matrix(s, "output.weight", s.n_embd, n_vocab, 3.0f));
}

TensorPlan plan_router(const SynthSpec& s, int layer, int64_t width, const std::vector<float>& skew) {
  TensorPlan t = plan_tensor(layer_name(layer, "ffn_gate_inp.weight"), DType::F32, {width, s.n_expert});
  t.std = 2.0f / std::sqrt(float(width));
  t.row_dir = skew;
  return t;
}

void plan_expert_stacks(const SynthSpec& s, int layer, int64_t width, std::vector<TensorPlan>* out) {
  const int64_t F = s.n_ff_exp;
  for (const char* nm : {"ffn_gate_exps.weight", "ffn_up_exps.weight"}) {
    TensorPlan t = plan_tensor(layer_name(layer, nm), s.expert_type, {width, F, s.n_expert});
    t.std = 1.0f / std::sqrt(float(width));
    t.expert = true;
    out->push_back(std::move(t));
  }
  TensorPlan down = plan_tensor(layer_name(layer, "ffn_down_exps.weight"), s.expert_type, {F, width, s.n_expert});
  down.std = 1.0f / std::sqrt(float(F));
  down.expert = true;
  out->push_back(std::move(down));
}

void plan_gqa_attention(const SynthSpec& s, int layer, std::vector<TensorPlan>* out) {
  const int64_t E = s.n_embd, HD = s.head_dim;
  auto n = [&](const char* x) { return layer_name(layer, x); };
  out->push_back(plan_norm(n("attn_norm.weight"), E));
  out->push_back(plan_matrix(s, n("attn_q.weight"), E, HD * s.n_head));
  out->push_back(plan_matrix(s, n("attn_k.weight"), E, HD * s.n_head_kv));
  out->push_back(plan_matrix(s, n("attn_v.weight"), E, HD * s.n_head_kv));
  out->push_back(plan_matrix(s, n("attn_output.weight"), HD * s.n_head, E));
}

void plan_gated_ffn(const SynthSpec& s, int layer, const char* suffix, int64_t width, std::vector<TensorPlan>* out) {
  const int64_t E = s.n_embd;
  auto n = [&](const char* part) { return layer_name(layer, (std::string("ffn_") + part + suffix + ".weight").c_str()); };
  out->push_back(plan_matrix(s, n("gate"), E, width));
  out->push_back(plan_matrix(s, n("up"), E, width));
  out->push_back(plan_matrix(s, n("down"), width, E));
}

void tiny_mla_shape(SynthSpec* d) {
  d->n_layer = 3;
  d->n_dense_lead = 1;
  d->n_shared = 1;
  d->kv_lora_rank = 256;
  d->q_lora_rank = 256;
  d->rope_dim = 64;
  d->nope_dim = 64;
  d->v_head_dim = 64;
  d->n_expert = 8;
  d->n_used = 2;
  d->n_group = 2;
  d->n_group_used = 1;
}

}  // namespace deltafin
