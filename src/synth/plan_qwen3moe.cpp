// Synthetic qwen3moe: the tensors and metadata llama.cpp's qwen3moe loader reads.
#include <cmath>

#include "model/weights.h"
#include "synth/plan_common.h"
#include "synth/synth.h"

namespace deltafin {

Status plan_qwen3moe(const SynthSpec& s, SynthPlan* p) {
  GGUFFile& m = p->meta;
  DF_ASSIGN(int64_t n_vocab, synth_vocab(s, &m));
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

  const int64_t E = s.n_embd, HD = s.head_dim;
  const std::vector<float> skew = synth_router_skew(s, s.n_expert);

  p->tensors.push_back(plan_embedding(s, n_vocab, !skew.empty()));
  for (int il = 0; il < s.n_layer; ++il) {
    auto n = [&](const char* x) { return layer_name(il, x); };
    plan_gqa_attention(s, il, &p->tensors);
    p->tensors.push_back(plan_norm(n("attn_q_norm.weight"), HD));
    p->tensors.push_back(plan_norm(n("attn_k_norm.weight"), HD));
    p->tensors.push_back(plan_norm(n("ffn_norm.weight"), E));
    p->tensors.push_back(plan_router(s, il, E, skew));
    plan_expert_stacks(s, il, E, &p->tensors);
  }
  plan_output_head(s, n_vocab, &p->tensors);
  return {};
}

// The common tiny shape as it is: 2 layers of 256, GQA 4/2, 8 experts (top-2).
void tiny_qwen3moe(SynthSpec*) {}

}  // namespace deltafin
