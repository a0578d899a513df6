#include "model/attention.h"

#include <cassert>
#include <cmath>
#include <vector>

#include "model/ops.h"

namespace deltafin {

void KVLayer::store(int pos0, int n, const float* kv_k, const float* kv_v) {
  assert(pos0 + n <= capacity() && "KVLayer::store past the cache (a state fitted to fewer rows?)");
  to_fp16_n(kv_k, &k[size_t(pos0) * size_t(k_row)], int64_t(n) * k_row);
  if (v_row > 0) to_fp16_n(kv_v, &v[size_t(pos0) * size_t(v_row)], int64_t(n) * v_row);
}

void attention(ThreadPool* pool, const AttentionShape& s, const KVLayer& cache, int pos0, int n_tok,
               const float* q, float* out) {
  const int group = s.n_head / s.n_head_kv;
  const int64_t n_tasks = int64_t(n_tok) * s.n_head;
  auto body = [&](int64_t b, int64_t e) {
    std::vector<float> qh(static_cast<size_t>(s.head_dim_k)), p, acc(size_t(s.head_dim_v));
    for (int64_t task = b; task < e; ++task) {
      const int t = int(task / s.n_head), h = int(task % s.n_head);
      const int kvh = h / group;
      const int n_kv = pos0 + t + 1;  // causal: positions 0..pos0+t
      const float* qp = q + (int64_t(t) * s.n_head + h) * s.head_dim_k;
      round_fp16_n(qp, qh.data(), s.head_dim_k);
      p.resize(size_t(n_kv));
      for (int j = 0; j < n_kv; ++j) {
        const uint16_t* kr = cache.k_at(j) + size_t(kvh) * size_t(s.head_dim_k);
        float sc = dot_lanes_f16(kr, qh.data(), s.head_dim_k) * s.scale;
        if (s.softcap > 0) sc = s.softcap * std::tanh(sc / s.softcap);
        p[size_t(j)] = sc;
      }
      softmax_inplace(p.data(), n_kv);
      round_fp16_n(p.data(), p.data(), n_kv);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int j = 0; j < n_kv; ++j) {
        axpy_f16(p[size_t(j)], cache.v_at(j) + size_t(kvh) * size_t(s.head_dim_v), acc.data(), s.head_dim_v);
      }
      float* o = out + (int64_t(t) * s.n_head + h) * s.head_dim_v;
      for (int d = 0; d < s.head_dim_v; ++d) o[d] = acc[size_t(d)];
    }
  };
  if (pool) pool->parallel_for(n_tasks, 1, body);
  else body(0, n_tasks);
}

}  // namespace deltafin
