// Mixture-of-experts blocks shared by the architectures: routing (router logits ->
// chosen experts and their weights) and the routed expert FFN, which asks the
// ExpertStore for the union of the experts a batch of tokens needs, computes every
// token routed to each, and sums per token in routing order (as llama.cpp does).
#pragma once
#include <cstdint>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "core/tensor.h"
#include "store/expert_store.h"

namespace deltafin {

enum class Gating { Softmax, Sigmoid };

struct RouterConfig {
  Gating gating = Gating::Softmax;
  int n_expert = 0;
  int n_used = 0;
  bool norm_weights = false;     // divide the chosen weights by their sum
  float weights_scale = 0.0f;    // 0 or 1: none
  int n_group = 1;               // expert groups (DeepSeek V3): keep the best n_group_used
  int n_group_used = 0;
  const float* score_bias = nullptr;  // [n_expert], added for selection only
};

// logits: [n_tok, n_expert] (consumed as scratch). sel/w: [n_tok, n_used].
void route(const RouterConfig& rc, float* logits, int n_tok, int32_t* sel, float* w);

enum class FfnAct { SwiGLU, SiTU };
struct FfnActParams {
  FfnAct act = FfnAct::SwiGLU;
  float situ_beta = 0, situ_linear_beta = 0;
};

// Applies the gated activation: gate[i] <- act(gate[i], up[i]).
void glu_activate(const FfnActParams& a, float* gate, const float* up, int64_t n);

// out[t] = sum_k w[t,k] * FFN_{sel[t,k]}(x[t]) over the routed experts of `layer`.
// x: [n_tok, n_in]; out: [n_tok, n_out] (overwritten). Experts whose input and output
// widths differ from n_embd (latent MoE) are fine: n_in/n_out are the expert's.
// resident_only (self-speculation drafts, ForwardOptions): experts not in RAM now are
// skipped, nothing is read, and each token's remaining weights are rescaled to its
// full weight sum.
Status moe_ffn(ThreadPool* pool, ExpertStore& store, int layer, const float* x, int n_tok,
               int64_t n_in, int64_t n_out, int n_used, const int32_t* sel, const float* w,
               const FfnActParams& act, float* out, bool resident_only);

// Next-layer prediction, shared by the architectures' layer loops: after layer L,
// applies layer `layer` (= L + 1)'s router to the residual stream entering it (x:
// [n_tok, n_embd], RMS-normed here with that layer's ffn_norm `norm`, as its MoE
// input will be) and hands the union of the top-k experts to store.predict(). Does
// nothing when the store does not want a prediction. Reads x only: outputs do not
// depend on it.
struct NextRouter {
  int layer = -1;
  const Tensor* gate_inp = nullptr;  // [n_embd, n_expert]
  const float* norm = nullptr;       // [n_embd]
  float eps = 0;
  RouterConfig rc;
};
void predict_next_experts(ThreadPool* pool, ExpertStore& store, const NextRouter& next, const float* x, int n_tok,
                          int64_t n_embd);

// Dense gated FFN: out = down(act(gate x, up x)). out: [n_tok, down.rows()].
void dense_ffn(ThreadPool* pool, const Tensor& gate, const Tensor& up, const Tensor& down,
               const float* x, int n_tok, const FfnActParams& act, float* out);

}  // namespace deltafin
