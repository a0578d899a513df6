#include "model/kimi_k3_mla.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "model/linear.h"
#include "model/ops.h"

namespace deltafin {

namespace {

// Multi-query attention where V is the first dv values of each cached K row, as
// llama.cpp computes it without flash attention on an F16 cache: Q rounded to F16
// for K.Q, softmax in F32 (double sum), probabilities rounded to F16 for P.V.
// q: [n, H, dk]; z: [n, H, dv].
void mqa_latent(ThreadPool* pool, const KVLayer& cache, int pos0, int n, int H, int dk, int dv, float scale,
                const float* q, float* z) {
  const int64_t n_tasks = int64_t(n) * H;
  auto body = [&](int64_t b, int64_t e) {
    std::vector<float> qh(static_cast<size_t>(dk)), p, acc(static_cast<size_t>(dv));
    for (int64_t task = b; task < e; ++task) {
      const int t = int(task / H), h = int(task % H);
      const int n_kv = pos0 + t + 1;
      const float* qp = q + (int64_t(t) * H + h) * dk;
      round_fp16_n(qp, qh.data(), dk);
      p.resize(size_t(n_kv));
      for (int j = 0; j < n_kv; ++j) {
        p[size_t(j)] = dot_lanes_f16(cache.k_at(j), qh.data(), dk) * scale;
      }
      softmax_inplace(p.data(), n_kv);
      round_fp16_n(p.data(), p.data(), n_kv);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int j = 0; j < n_kv; ++j) axpy_f16(p[size_t(j)], cache.k_at(j), acc.data(), dv);
      std::copy(acc.begin(), acc.end(), z + (int64_t(t) * H + h) * dv);
    }
  };
  if (pool) pool->parallel_for(n_tasks, 1, body);
  else body(0, n_tasks);
}

}  // namespace

void k3_mla_forward(ThreadPool* pool, const K3MlaShape& s, const K3MlaWeights& w, KVLayer& cache, int pos0,
                    const float* a, int n, float* out) {
  const AttnSeq seq{&cache, 0, pos0, n};
  k3_mla_forward_batch(pool, s, w, {&seq, 1}, a, n, out);
}

void k3_mla_forward_batch(ThreadPool* pool, const K3MlaShape& s, const K3MlaWeights& w,
                          std::span<const AttnSeq> seqs, const float* a, int n, float* out,
                          const K3MlaDump& dump) {
  const int H = s.n_head, dn = s.d_nope, dr = s.d_rope, dqk = dn + dr, r = s.kv_lora, dv = s.d_v;
  const int64_t krow = s.k_row();

  // Query.
  std::vector<float> q(size_t(n) * size_t(H) * size_t(dqk));
  if (w.q_a_norm.empty()) {
    linear(pool, w.wq, a, n, q.data());
  } else {
    const int64_t rq = w.wq_a.rows();
    std::vector<float> qa(size_t(n * rq));
    linear(pool, w.wq_a, a, n, qa.data());
    rms_norm_rows(qa.data(), w.q_a_norm.data(), rq, n, s.eps, qa.data());
    linear(pool, w.wq_b, qa.data(), n, q.data());
  }

  // Compressed KV: K row = [RMSNorm(c) | k_pe], stored (F16-rounded) in each sequence's cache.
  std::vector<float> kv(size_t(n * krow));
  linear(pool, w.wkv_a, a, n, kv.data());
  for (int t = 0; t < n; ++t) rms_norm(&kv[size_t(t * krow)], w.kv_a_norm.data(), r, s.eps, &kv[size_t(t * krow)]);
  for (const AttnSeq& sq : seqs) sq.cache->store(sq.pos0, sq.n, &kv[size_t(sq.row0 * krow)], nullptr);

  // Absorbed query Q_h = [k_b[h] q_nope_h | q_pe_h].
  std::vector<float> Q(size_t(n) * size_t(H) * size_t(krow));
  std::vector<float> qn(size_t(n) * size_t(dn)), qabs(size_t(n) * size_t(r));
  for (int h = 0; h < H; ++h) {
    for (int t = 0; t < n; ++t)
      std::copy_n(&q[size_t((int64_t(t) * H + h) * dqk)], dn, &qn[size_t(t) * size_t(dn)]);
    // llama.cpp's k_b product reads a permuted (non-contiguous) q_nope, which ggml's
    // mul_mat never hands to tinyBLAS: row by row (ggml_vec_dot_*) at any batch size.
    const Tensor kb = w.k_b.slice(h);
    matmul(pool, kb.type, kb.data, kb.rows(), kb.cols(), qn.data(), n, dn, qabs.data(), r);
    for (int t = 0; t < n; ++t) {
      float* dst = &Q[size_t((int64_t(t) * H + h) * krow)];
      std::copy_n(&qabs[size_t(t) * size_t(r)], r, dst);
      std::copy_n(&q[size_t((int64_t(t) * H + h) * dqk + dn)], dr, dst + r);
    }
  }

  std::vector<float> z(size_t(n) * size_t(H) * size_t(r));
  for (const AttnSeq& sq : seqs)
    mqa_latent(pool, *sq.cache, sq.pos0, sq.n, H, int(krow), r, 1.0f / std::sqrt(float(dqk)),
               &Q[size_t(int64_t(sq.row0) * H * krow)], &z[size_t(int64_t(sq.row0) * H * r)]);

  if (dump) dump("kqv", z.data(), int64_t(H) * r);
  // Decompress per head, gate, project.
  std::vector<float> o(size_t(n) * size_t(H) * size_t(dv)), zh(size_t(n) * size_t(r)), oh(size_t(n) * size_t(dv));
  for (int h = 0; h < H; ++h) {
    for (int t = 0; t < n; ++t) std::copy_n(&z[size_t((int64_t(t) * H + h) * r)], r, &zh[size_t(t) * size_t(r)]);
    linear(pool, w.v_b.slice(h), zh.data(), n, oh.data(), s.f32_gemm);
    for (int t = 0; t < n; ++t)
      std::copy_n(&oh[size_t(t) * size_t(dv)], dv, &o[size_t((int64_t(t) * H + h) * dv)]);
  }
  if (dump) dump("kqv_out", o.data(), int64_t(H) * dv);
  if (w.gate.valid()) {
    std::vector<float> g(o.size());
    linear(pool, w.gate, a, n, g.data());
    for (size_t i = 0; i < o.size(); ++i) o[i] = o[i] * sigmoid(g[i]);
    if (dump) dump("mla_gated", o.data(), int64_t(H) * dv);
  }
  linear(pool, w.wo, o.data(), n, out);
}

}  // namespace deltafin
