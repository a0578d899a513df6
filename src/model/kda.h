// Kimi Delta Attention (KDA): linear attention with short causal convolutions on
// q/k/v and a per-head S x S recurrent state with per-key-channel decay, computed as
// llama.cpp computes it (kimi_k3_conv1d + ggml_ssm_conv, build_gdn_l2_norm, and the
// fused ggml_gated_delta_net, which llama.cpp runs for batches and single tokens
// alike). Per token t and head h (S = head_dim, a = attn-normed input):
//
//   z_X   = W_X a                      X in {q, k, v}          [d_inner = H*S]
//   X     = silu(causal_conv_{d_conv}(z_X))                    per channel, no bias
//   q, k  = L2-normalized per head;  g = decay gate (< 0);  beta = sigmoid(W_beta a)
//   S_h   = S_h * exp(g) (along keys);  d = (v - S_h^T k) * beta;  S_h += k d^T
//   o_h   = RMSNorm(S_h^T q / sqrt(S), o_norm) * sigmoid(W_g a)
//   out   = W_o o
//
// The state also keeps what is needed to roll back up to `window` tokens (for
// speculative decoding): a snapshot of conv + recurrent state at `base_pos` and a
// ring of the per-token recurrence inputs since then; truncate() restores the
// snapshot and replays the ring, which reproduces the states bit for bit.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "model/state_io.h"
#include "core/tensor.h"

namespace deltafin {

// Receives a layer's intermediate tensors by name, each as [n, width] (kda_forward_batch).
using KdaDump = std::function<void(const char* name, const float* t, int64_t width)>;

struct KdaShape {
  int n_head = 0;    // H
  int head_dim = 0;  // S: key and value size per head
  int d_conv = 0;    // short convolution width (4)
  float eps = 0;     // RMS eps, used by the L2 norms and o_norm
  // K3: g = lb * sigmoid(-(z * A)); unset (-inf, kimi-linear): g = softplus(z) * A.
  float gate_lower_bound = -INFINITY;
  int64_t d_inner() const { return int64_t(n_head) * head_dim; }
};

// One KDA layer's weights. Matrices are [cols -> rows] views (any type); the small
// vectors are converted to floats at load.
struct KdaWeights {
  Tensor wq, wk, wv;                          // n_embd -> d_inner
  std::vector<float> conv_q, conv_k, conv_v;  // [d_inner][d_conv], tap d_conv-1 = current token
  Tensor f_a, f_b;                            // n_embd -> S -> d_inner (decay gate)
  std::vector<float> dt_bias;                 // [d_inner]
  std::vector<float> a;                       // [H], holds -exp(A_log)
  Tensor beta;                                // n_embd -> H
  Tensor g;                                   // n_embd -> d_inner (output gate)
  std::vector<float> o_norm;                  // [S]
  Tensor wo;                                  // d_inner -> n_embd
};

class KdaState;

// One sequence's rows in a batched KDA layer: rows [row0, row0 + n) of the batch.
struct KdaSeq {
  KdaState* st = nullptr;
  int row0 = 0;
  int n = 0;
};

// Per-sequence state of one KDA layer. pos = tokens folded in so far.
class KdaState {
 public:
  // window: how many of the latest tokens truncate() can drop (0: none).
  void init(const KdaShape& s, int window);
  int pos() const { return pos_; }
  // Oldest position truncate() can return to.
  int min_pos() const { return base_pos_; }
  // Back to position n (min_pos() <= n <= pos(), or n == pinned_pos()); the state
  // is then identical to the one the forward pass had after n tokens.
  Status truncate(int n);
  // Keeps a copy of the state now, a position truncate() can return to however far
  // back it is (one at a time; e.g. a prompt's end, for the chat's next turn).
  void pin();
  int pinned_pos() const { return pin_pos_; }  // -1: none
  // The most memory the state takes: the state, its rollback base and a pinned copy
  // (conv + recurrent each) and the rollback log.
  uint64_t memory_bytes() const;
  // All of it as bytes, and back into a state init() gave the same shape and window
  // (false when the bytes do not fit it).
  void save(StateWriter& w) const;
  bool load(StateReader& r);

 private:
  friend void kda_forward_batch(ThreadPool*, const KdaShape&, const KdaWeights&, std::span<const KdaSeq>,
                                const float*, int, float*, const KdaDump&);
  int64_t entry_size() const;                 // floats per logged token
  float* entry(int p) { return &log_[size_t(p % window_) * size_t(entry_size())]; }
  void replay(std::vector<float>& conv, std::vector<float>& rec, int from, int to);
  void advance_base(int new_base);            // moves the snapshot forward to new_base

  KdaShape s_;
  int pos_ = 0;
  std::vector<float> conv_;  // [3 (q,k,v)][d_inner][d_conv-1], j = 0 oldest
  std::vector<float> rec_;   // [H][S (value j)][S (key i)]: S_h[i][j] at h*S*S + j*S + i
  int window_ = 0;
  int base_pos_ = 0;
  std::vector<float> base_conv_, base_rec_;
  int pin_pos_ = -1;
  std::vector<float> pin_conv_, pin_rec_;
  // Per token in [base_pos_, pos_), at slot p % window_: q, k, v, g [d_inner each],
  // beta [H], then the raw projections z_q, z_k, z_v [d_inner each] (for the conv).
  std::vector<float> log_;
};

// Runs n tokens through one KDA layer, appending them to `st`.
// a: [n, n_embd] attn-normed input; out: [n, n_embd].
void kda_forward(ThreadPool* pool, const KdaShape& s, const KdaWeights& w, KdaState& st, const float* a, int n,
                 float* out);

// Several sequences at once (distinct states; seqs cover rows 0..n-1 of a/out): the
// projections run over all rows together, the convolutions, the recurrence and the
// rollback log per sequence. Each row's result is bit-identical to kda_forward on
// its sequence alone. dump, when set, sees the intermediates under llama.cpp's graph
// names (kda_q_conv, kda_k_conv, kda_v_conv, kda_g1, kda_beta, kda_scan_out,
// kda_g2, kda_normed), each as [n, width].
void kda_forward_batch(ThreadPool* pool, const KdaShape& s, const KdaWeights& w, std::span<const KdaSeq> seqs,
                       const float* a, int n, float* out, const KdaDump& dump = {});

}  // namespace deltafin
