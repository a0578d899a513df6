// Kimi-K3's gated MLA layer (llama.cpp kimi-k3.cpp:build_mla_layer), in the
// absorbed form: multi-query attention over the compressed latent, with no RoPE at
// all (the "pe" dims take part un-rotated) and a sigmoid output gate.
//
//   q     = W_q_b RMSNorm(W_q_a a) (or W_q a)        per head [q_nope (d_nope) | q_pe (d_rope)]
//   ckv   = W_kv_a a;  c = RMSNorm(ckv[:r_kv]);  k_pe = ckv[r_kv:]
//   Q_h   = [k_b[h] q_nope_h (r_kv) | q_pe_h];  K = [c | k_pe] (cached, F16);  V = K[:r_kv]
//   z_h   = softmax(K Q_h / sqrt(d_nope + d_rope)) V      (llama.cpp's non-flash path)
//   o     = [v_b[h] z_h]_h * sigmoid(W_gate a);  out = W_o o
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/attention.h"
#include "core/tensor.h"

namespace deltafin {

struct K3MlaShape {
  int n_head = 0;
  int d_nope = 0, d_rope = 0;  // q/k head = d_nope + d_rope (key_length_mla)
  int d_v = 0;                 // value head (value_length_mla)
  int kv_lora = 0;             // r_kv: latent width, also the attention's value width
  float eps = 0;
  bool f32_gemm = false;  // v_b in ggml's batch order also when F32 (kernels/matmul.h)
  int64_t k_row() const { return int64_t(kv_lora) + d_rope; }
};

struct K3MlaWeights {
  Tensor wq_a, wq_b;               // q-LoRA (when q_a_norm is non-empty)
  std::vector<float> q_a_norm;
  Tensor wq;                       // plain q projection otherwise
  Tensor wkv_a;                    // n_embd -> r_kv + d_rope
  std::vector<float> kv_a_norm;    // [r_kv]
  Tensor k_b;                      // {d_nope, r_kv, H}: slice h maps q_nope_h -> latent
  Tensor v_b;                      // {r_kv, d_v, H}: slice h maps latent -> value head
  Tensor gate;                     // optional {n_embd, H*d_v}
  Tensor wo;                       // H*d_v -> n_embd
};

// a: [n, n_embd] attn-normed input for positions cache-row pos0..pos0+n-1; the new
// K rows are written into `cache` (k_row() values each, F16-rounded; v unused).
// out: [n, n_embd].
void k3_mla_forward(ThreadPool* pool, const K3MlaShape& s, const K3MlaWeights& w, KVLayer& cache, int pos0,
                    const float* a, int n, float* out);

// Several sequences at once: a/out: [n, n_embd] hold every sequence's rows (seqs
// cover rows 0..n-1, each with its own cache and positions); projections over all
// rows, cache and attention per sequence. Bit-identical per row to k3_mla_forward.
// dump, when set, sees the intermediates under llama.cpp's graph names (kqv_out:
// [n, H*d_v] before the gate; mla_gated after it), each as [n, width].
using K3MlaDump = std::function<void(const char* name, const float* t, int64_t width)>;
void k3_mla_forward_batch(ThreadPool* pool, const K3MlaShape& s, const K3MlaWeights& w,
                          std::span<const AttnSeq> seqs, const float* a, int n, float* out,
                          const K3MlaDump& dump = {});

}  // namespace deltafin
