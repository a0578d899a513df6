// Grouped-query attention of one layer in a batched pass, after the q/k/v
// projections, as llama.cpp's llama-like graphs compute it: RoPE on q and k at each
// row's own position, each slice's K/V appended to its KvState cache, then causal
// attention per slice (model/attention.h).
#pragma once
#include <span>
#include <vector>

#include "model/arch.h"

namespace deltafin {

class GqaAttention {
 public:
  // freq_factors: llama-3 rope_freqs, [rope.n_rot / 2] dividing each pair's angle;
  // empty: none. Must outlive this object. rope.n_rot == shape.head_dim_k.
  GqaAttention(ThreadPool* pool, const AttentionShape& shape, const RopeParams& rope,
               std::span<const float> freq_factors = {});

  // Layer il of every slice (states are KvStates). q: [rows.n, n_head * head_dim_k],
  // k: [rows.n, n_head_kv * head_dim_k] (both rotated in place), v: [rows.n,
  // n_head_kv * head_dim_v]; out: [rows.n, n_head * head_dim_v].
  void forward(std::span<const BatchSlice> slices, const BatchRows& rows, int il, float* q, float* k,
               const float* v, float* out);

 private:
  ThreadPool* pool_;
  AttentionShape shape_;
  RopeParams rope_;
  std::span<const float> freq_factors_;
  std::vector<float> rope_c_;  // one position's cos/sin table, reused across calls
};

}  // namespace deltafin
