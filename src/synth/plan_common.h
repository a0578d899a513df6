// Building blocks the per-architecture synth plans share: the tensor kinds every
// architecture has (matrices, norms, the token embedding) and the routed-expert
// block (router + stacked gate/up/down experts).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "synth/synth.h"

namespace deltafin {

TensorPlan plan_tensor(std::string name, DType type, std::vector<int64_t> shape);
// A core matrix of the spec's type (F32 where its block does not fit), values of
// standard deviation gain / sqrt(cols).
TensorPlan plan_matrix(const SynthSpec& s, std::string name, int64_t cols, int64_t rows,
                       float gain = 1.0f);
// A stack of n such matrices of `type`.
TensorPlan plan_matrix3(DType type, std::string name, int64_t cols, int64_t rows, int64_t n);
TensorPlan plan_norm(std::string name, int64_t n);
// token_embd.weight; with skew, every row carries the direction the router offsets use.
TensorPlan plan_embedding(const SynthSpec& s, int64_t n_vocab, bool skewed);
// output_norm.weight and output.weight (gain 3).
void plan_output_head(const SynthSpec& s, int64_t n_vocab, std::vector<TensorPlan>* out);
// blk.L.ffn_gate_inp.weight: F32 router over `width` inputs with the skew offsets.
TensorPlan plan_router(const SynthSpec& s, int layer, int64_t width, const std::vector<float>& skew);
// blk.L.ffn_{gate,up,down}_exps.weight: the experts (expert_type) between `width`
// and the expert width.
void plan_expert_stacks(const SynthSpec& s, int layer, int64_t width, std::vector<TensorPlan>* out);
// blk.L.attn_norm, attn_{q,k,v}, attn_output: a GQA block of n_head / n_head_kv heads
// of head_dim over n_embd.
void plan_gqa_attention(const SynthSpec& s, int layer, std::vector<TensorPlan>* out);
// blk.L.ffn_{gate,up,down}<suffix>.weight: a gated FFN n_embd -> width -> n_embd
// ("": a dense layer's, "_shexp": the shared experts').
void plan_gated_ffn(const SynthSpec& s, int layer, const char* suffix, int64_t width, std::vector<TensorPlan>* out);
// The tiny presets' MLA shape (deepseek2, kimi-k3): 3 layers, the first dense, one
// shared expert, q-LoRA and kv latent 256, 2 expert groups of which 1 is kept.
void tiny_mla_shape(SynthSpec* d);

}  // namespace deltafin
