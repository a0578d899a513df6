// Multi-head latent attention (DeepSeek-V2/V3/R1, Kimi K2), as llama.cpp's
// src/models/deepseek2.cpp computes it on the CPU without flash attention.
//
//   q     = W_q_b RMSNorm(W_q_a a)  (q-LoRA)  or  W_q a         per head [q_nope (d_nope) | q_pe (d_rope)]
//   ckv   = W_kv_a a;  c = RMSNorm(ckv[:r_kv]);  k_pe = RoPE(ckv[r_kv:])   (one k_pe for all heads)
//   q_pe  = RoPE(q_pe)                                           (NORM pairs, at the token's position)
//
// Absorbed ("split" wk_b/wv_b) form, an MQA over the compressed latent cache:
//   Q_h = [k_b[h] q_nope_h (r_kv) | q_pe_h];  K = [c | k_pe] (cached, F16);  V = K[:r_kv] (a view)
//   z_h = softmax(kq_scale K Q_h) V;  o_h = v_b[h] z_h;  out = W_o [o_0 | ... | o_H-1]
// Legacy form (one wkv_b): plain MHA with a per-head K/V cache:
//   [k_nope_h | v_h] = (W_kv_b c)_h;  K_h = [k_nope_h | k_pe];  Q_h = [q_nope_h | q_pe_h]
//   out = W_o attention(Q, K, V)
//
// Precision points copied from llama.cpp: the cache is F16 (K rows; in the absorbed
// form V is the same F16 values); Q is rounded to F16 for the KQ product and the
// softmax output to F16 for the product with V; every matmul's input is converted
// to its weight's vec_dot type (q_nope for k_b, z for v_b, c for wkv_b, ...).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/attention.h"
#include "model/ops.h"
#include "core/tensor.h"

namespace deltafin {

struct MlaShape {
  int n_head = 0;
  int d_nope = 0, d_rope = 0;  // q/k head = d_nope + d_rope (key_length_mla); d_rope = n_rot
  int d_v = 0;                 // value head (value_length_mla)
  int r_q = 0;                 // q_lora_rank (0: plain W_q)
  int r_kv = 0;                // kv_lora_rank: latent width
  bool absorbed = true;        // wk_b/wv_b with the latent cache; false: wkv_b with an MHA cache
  float eps = 1e-6f;           // RMSNorm epsilon of q_a_norm / kv_a_norm
  float kq_scale = 1.0f;       // applied to Q.K before the softmax
  // Mistral-Large temperature tuning: Q *= log(floor(pos / temp_length) + 1) * temp_scale + 1.
  float temp_scale = 0.0f;
  int temp_length = 0;
  RopeParams rope;             // n_rot = d_rope, NORM pairs
  int d_qk() const { return d_nope + d_rope; }
  // Values per position in the cache: the latent row in the absorbed form, the
  // per-head K (and V) rows in the legacy form.
  int64_t k_row() const { return absorbed ? int64_t(r_kv) + d_rope : int64_t(n_head) * d_qk(); }
  int64_t v_row() const { return absorbed ? 0 : int64_t(n_head) * d_v; }
};

struct MlaWeights {
  Tensor wq_a, wq_b;             // q-LoRA (r_q > 0)
  std::vector<float> q_a_norm;   // [r_q]
  Tensor wq;                     // plain q projection (r_q == 0)
  Tensor wkv_a;                  // {n_embd, r_kv + d_rope}
  std::vector<float> kv_a_norm;  // [r_kv]
  Tensor wk_b;                   // absorbed: {d_nope, r_kv, H}
  Tensor wv_b;                   // absorbed: {r_kv, d_v, H}
  Tensor wkv_b;                  // legacy: {r_kv, H * (d_nope + d_v)}
  Tensor wo;                     // {H * d_v, n_embd}
};

// One attention block. a: [n, n_embd], the attn-normed input of positions
// pos0..pos0+n-1. Writes their rows into `cache` (initialised with k_row()/v_row()
// values per position), attends causally over positions 0..pos0+n-1 and writes
// out: [n, n_embd] (W_o's output, without the residual).
void mla_forward(ThreadPool* pool, const MlaShape& s, const MlaWeights& w, KVLayer& cache, int pos0,
                 const float* a, int n, float* out);

// The same block for several sequences at once: a/out: [n, n_embd] hold every
// sequence's rows (seqs cover rows 0..n-1, each with its own cache and positions).
// The projections run over all n rows together; RoPE, the cache and attention per
// sequence. Each row's result is bit-identical to mla_forward on its sequence alone.
void mla_forward_batch(ThreadPool* pool, const MlaShape& s, const MlaWeights& w, std::span<const AttnSeq> seqs,
                       const float* a, int n, float* out);

// The absorbed form's attention: H query heads against one latent KV head.
// cache rows hold [latent (r_kv) | k_pe (d_rope)] (F16-rounded); the value of a
// position is its first r_kv values. q: [n_tok, n_head, r_kv + d_rope];
// out: [n_tok, n_head, r_kv].
void mla_latent_attention(ThreadPool* pool, const KVLayer& cache, int r_kv, int n_head, float kq_scale,
                          int pos0, int n_tok, const float* q, float* out);

// Per-head products with a stacked weight {cols, rows, n_head} (slice h = head h):
// y[t*y_tok + h*y_head + r] = dot(W_h row r, x[t*x_tok + h*x_head .. + cols]).
void head_linear(ThreadPool* pool, const Tensor& w, int n_head, const float* x, int64_t x_tok,
                 int64_t x_head, int n_tok, float* y, int64_t y_tok, int64_t y_head);

}  // namespace deltafin
