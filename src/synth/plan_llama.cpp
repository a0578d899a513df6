// Synthetic llama: the tensors and metadata llama.cpp's llama loader reads — Mixtral
// (stacked experts, softmax top-k router) when n_expert > 0, dense Llama otherwise.
// Files also carry rope frequency factors (rope_freqs.weight, as Llama 3 has) so that
// tests exercise them, unless SynthSpec::rope_freqs is off: Mixtral itself has none
// (nor can its Hugging Face folder hold them), which changes no other shape.
#include <cmath>

#include "model/weights.h"
#include "synth/plan_common.h"
#include "synth/synth.h"

namespace deltafin {


Status plan_llama(const SynthSpec& s, SynthPlan* p) {
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0)
    return make_error("synth: llama needs n_head a multiple of n_head_kv");
  if (s.n_expert < 0 || (s.n_expert > 0 && (s.n_used <= 0 || s.n_used > s.n_expert)))
    return make_error("synth: llama needs 0 < experts used <= experts (or no experts: dense)");
  GGUFFile& m = p->meta;
  DF_ASSIGN(int64_t n_vocab, synth_vocab(s, &m));
  const bool moe = s.n_expert > 0;
  const int64_t E = s.n_embd, HD = s.head_dim, F = moe ? s.n_ff_exp : s.n_ff;
  const float freq_base = 1000000.0f;  // Mixtral's
  const std::string a = "llama.";
  m.set(a + "block_count", GGUFValue::u32(uint32_t(s.n_layer)));
  m.set(a + "context_length", GGUFValue::u32(uint32_t(s.n_ctx)));
  m.set(a + "embedding_length", GGUFValue::u32(uint32_t(E)));
  // For llama this is also the expert width (expert_feed_forward_length is not read).
  m.set(a + "feed_forward_length", GGUFValue::u32(uint32_t(F)));
  m.set(a + "attention.head_count", GGUFValue::u32(uint32_t(s.n_head)));
  m.set(a + "attention.head_count_kv", GGUFValue::u32(uint32_t(s.n_head_kv)));
  if (HD * s.n_head != E) {
    m.set(a + "attention.key_length", GGUFValue::u32(uint32_t(HD)));
    m.set(a + "attention.value_length", GGUFValue::u32(uint32_t(HD)));
  }
  m.set(a + "rope.dimension_count", GGUFValue::u32(uint32_t(HD)));  // must equal the head size
  m.set(a + "rope.freq_base", GGUFValue::f32(freq_base));
  m.set(a + "attention.layer_norm_rms_epsilon", GGUFValue::f32(1e-5f));
  if (moe) {
    m.set(a + "expert_count", GGUFValue::u32(uint32_t(s.n_expert)));
    m.set(a + "expert_used_count", GGUFValue::u32(uint32_t(s.n_used)));
  }
  m.set(a + "vocab_size", GGUFValue::u32(uint32_t(n_vocab)));
  m.set("general.file_type", GGUFValue::u32(0));

  const std::vector<float> skew = synth_router_skew(s, s.n_expert);

  p->tensors.push_back(plan_embedding(s, n_vocab, moe && !skew.empty()));
  // rope_freqs: one positive factor per rotated pair (angle / factor), here random
  // around 1 (1 + N(0, 0.1)) — Llama 3's are 1..8 — which moves every angle enough
  // that a wrong index or a multiply-for-divide shows in the logits.
  if (s.rope_freqs) p->tensors.push_back(plan_norm("rope_freqs.weight", HD / 2));
  for (int il = 0; il < s.n_layer; ++il) {
    auto n = [&](const char* x) { return layer_name(il, x); };
    plan_gqa_attention(s, il, &p->tensors);
    p->tensors.push_back(plan_norm(n("ffn_norm.weight"), E));
    if (!moe) {
      plan_gated_ffn(s, il, "", F, &p->tensors);
      continue;
    }
    p->tensors.push_back(plan_router(s, il, E, skew));
    plan_expert_stacks(s, il, E, &p->tensors);
  }
  plan_output_head(s, n_vocab, &p->tensors);
  return {};
}

// The common tiny shape as it is: Mixtral-like, 2 layers of 256, 8 experts (top-2).
void tiny_llama(SynthSpec*) {}

}  // namespace deltafin
