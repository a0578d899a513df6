// Causal multi-head attention with grouped KV heads over an F16 KV cache, computed
// as llama.cpp computes it without flash attention: K and V stored as F16, Q rounded
// to F16 for the KQ product, softmax in F32 with double accumulation, and the
// probabilities rounded to F16 for the product with V.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace deltafin {

// One layer's cache: rows are positions; a row holds n_kv_head * head_dim values.
struct KVLayer {
  int64_t k_row = 0, v_row = 0;  // values per position
  // F16 values, as llama.cpp's F16 cache holds them.
  std::vector<uint16_t> k, v;    // capacity n_ctx rows
  void init(int n_ctx, int64_t k_values, int64_t v_values) {
    k_row = k_values;
    v_row = v_values;
    k.assign(size_t(n_ctx) * size_t(k_values), 0);
    v.assign(size_t(n_ctx) * size_t(v_values), 0);
  }
  int capacity() const { return k_row ? int(k.size() / size_t(k_row)) : 0; }
  const uint16_t* k_at(int pos) const { return &k[size_t(pos) * size_t(k_row)]; }
  const uint16_t* v_at(int pos) const { return &v[size_t(pos) * size_t(v_row)]; }
  // Resizes to `rows` positions, keeping the first ones (memory freed or taken).
  void fit(int rows) {
    k.resize(size_t(rows) * size_t(k_row));
    v.resize(size_t(rows) * size_t(v_row));
    k.shrink_to_fit();
    v.shrink_to_fit();
  }
  // Stores rows for positions [pos0, pos0 + n) from floats.
  void store(int pos0, int n, const float* kv_k, const float* kv_v);
};

// One sequence's rows in a batched layer: rows [row0, row0 + n) of the batch are its
// positions pos0..pos0+n-1, cached in `cache` (its own).
struct AttnSeq {
  KVLayer* cache = nullptr;
  int row0 = 0;
  int pos0 = 0;
  int n = 0;
};

struct AttentionShape {
  int n_head = 0, n_head_kv = 0;
  int head_dim_k = 0, head_dim_v = 0;
  float scale = 1.0f;       // applied to QK before the softmax
  float softcap = 0.0f;     // tanh soft-capping of scores (0: none)
};

// q: [n_tok, n_head, head_dim_k] for positions pos0..pos0+n_tok-1 whose K/V are
// already stored in `cache`; out: [n_tok, n_head, head_dim_v].
void attention(ThreadPool* pool, const AttentionShape& s, const KVLayer& cache, int pos0, int n_tok,
               const float* q, float* out);

}  // namespace deltafin
