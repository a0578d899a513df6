// Synthetic qwen3moe: the tensors and metadata llama.cpp's qwen3moe loader reads.
#include <cmath>

#include "model/weights.h"
#include "synth/synth.h"

namespace deltafin {

Status plan_qwen3moe(const SynthSpec& s, SynthPlan* p) {
  GGUFFile& m = p->meta;
  DF_ASSIGN(int64_t n_vocab, synth_vocab(s.vocab_path, &m));
  const std::string a = "qwen3moe.";
  m.set(a + "block_count", GGUFValue::u32(uint32_t(s.n_layer)));
  m.set(a + "context_length", GGUFValue::u32(uint32_t(s.n_ctx)));
  m.set(a + "embedding_length", GGUFValue::u32(uint32_t(s.n_embd)));
  m.set(a + "feed_forward_length", GGUFValue::u32(uint32_t(s.n_ff)));
  m.set(a + "attention.head_count", GGUFValue::u32(uint32_t(s.n_head)));
  m.set(a + "attention.head_count_kv", GGUFValue::u32(uint32_t(s.n_head_kv)));
  m.set(a + "attention.key_length", GGUFValue::u32(uint32_t(s.head_dim)));
  m.set(a + "attention.value_length", GGUFValue::u32(uint32_t(s.head_dim)));
  m.set(a + "rope.freq_base", GGUFValue::f32(1000000.0f));
  m.set(a + "attention.layer_norm_rms_epsilon", GGUFValue::f32(1e-6f));
  m.set(a + "expert_count", GGUFValue::u32(uint32_t(s.n_expert)));
  m.set(a + "expert_used_count", GGUFValue::u32(uint32_t(s.n_used)));
  m.set(a + "expert_feed_forward_length", GGUFValue::u32(uint32_t(s.n_ff_exp)));
  m.set("general.file_type", GGUFValue::u32(0));

  const int64_t E = s.n_embd, HD = s.head_dim, F = s.n_ff_exp;
  auto mat = [&](std::string name, int64_t cols, int64_t rows, float gain = 1.0f) {
    TensorPlan t{std::move(name), fit_type(s.type, cols), {cols, rows}};
    t.std = gain / std::sqrt(float(cols));
    return t;
  };
  auto norm = [&](std::string name, int64_t n) {
    TensorPlan t{std::move(name), DType::F32, {n}};
    t.init = Init::NormWeight;
    return t;
  };
  const std::vector<float> skew = synth_router_skew(s, s.n_expert);

  TensorPlan emb{"token_embd.weight", fit_type(s.type, E), {E, n_vocab}};
  emb.std = 1.0f;
  emb.add_dir_all_rows = !skew.empty();
  p->tensors.push_back(emb);
  for (int il = 0; il < s.n_layer; ++il) {
    auto n = [&](const char* x) { return layer_name(il, x); };
    p->tensors.push_back(norm(n("attn_norm.weight"), E));
    p->tensors.push_back(mat(n("attn_q.weight"), E, HD * s.n_head));
    p->tensors.push_back(mat(n("attn_k.weight"), E, HD * s.n_head_kv));
    p->tensors.push_back(mat(n("attn_v.weight"), E, HD * s.n_head_kv));
    p->tensors.push_back(mat(n("attn_output.weight"), HD * s.n_head, E));
    p->tensors.push_back(norm(n("attn_q_norm.weight"), HD));
    p->tensors.push_back(norm(n("attn_k_norm.weight"), HD));
    p->tensors.push_back(norm(n("ffn_norm.weight"), E));
    TensorPlan router{n("ffn_gate_inp.weight"), DType::F32, {E, s.n_expert}};
    router.std = 2.0f / std::sqrt(float(E));
    router.row_dir = skew;
    p->tensors.push_back(router);
    for (const char* nm : {"ffn_gate_exps.weight", "ffn_up_exps.weight"}) {
      TensorPlan t{n(nm), s.expert_type, {E, F, s.n_expert}};
      t.std = 1.0f / std::sqrt(float(E));
      t.expert = true;
      p->tensors.push_back(t);
    }
    TensorPlan down{n("ffn_down_exps.weight"), s.expert_type, {F, E, s.n_expert}};
    down.std = 1.0f / std::sqrt(float(F));
    down.expert = true;
    p->tensors.push_back(down);
  }
  p->tensors.push_back(norm("output_norm.weight", E));
  p->tensors.push_back(mat("output.weight", E, n_vocab, 3.0f));
  return {};
}

}  // namespace deltafin
