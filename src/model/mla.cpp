#include "model/mla.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "model/linear.h"

namespace deltafin {

void head_linear(ThreadPool* pool, const Tensor& w, int n_head, const float* x, int64_t x_tok,
                 int64_t x_head, int n_tok, float* y, int64_t y_tok, int64_t y_head) {
  for (int h = 0; h < n_head; ++h) {
    const Tensor wh = w.slice(h);
    matmul(pool, wh.type, wh.data, wh.rows(), wh.cols(), x + int64_t(h) * x_head, n_tok, x_tok,
           y + int64_t(h) * y_head, y_tok);
  }
}

void mla_latent_attention(ThreadPool* pool, const KVLayer& cache, int r_kv, int n_head, float kq_scale,
                          int pos0, int n_tok, const float* q, float* out) {
  const int64_t D = cache.k_row;  // r_kv + d_rope
  // Heads are handled in groups so that one read of a cache row serves several heads
  // (all heads share the single latent KV head).
  constexpr int kGroup = 8;
  const int n_groups = (n_head + kGroup - 1) / kGroup;
  const int64_t n_tasks = int64_t(n_tok) * n_groups;
  auto body = [&](int64_t b, int64_t e) {
    std::vector<float> qh(size_t(kGroup) * size_t(D)), p, acc(static_cast<size_t>(r_kv));
    for (int64_t task = b; task < e; ++task) {
      const int t = int(task / n_groups), g = int(task % n_groups);
      const int h0 = g * kGroup, nh = std::min(kGroup, n_head - h0);
      const int n_kv = pos0 + t + 1;  // causal: positions 0..pos0+t
      // Q is rounded to F16 for the product with the F16 cache (vec_dot_type of F16).
      for (int i = 0; i < nh; ++i) {
        const float* qp = q + (int64_t(t) * n_head + h0 + i) * D;
        round_fp16_n(qp, &qh[size_t(i * D)], D);
      }
      p.resize(size_t(nh) * size_t(n_kv));
      for (int j = 0; j < n_kv; ++j) {
        const uint16_t* kr = cache.k_at(j);
        for (int i = 0; i < nh; ++i) {
          const float* qi = &qh[size_t(i * D)];
          p[size_t(i) * size_t(n_kv) + size_t(j)] = dot_lanes_f16(kr, qi, D) * kq_scale;
        }
      }
      for (int i = 0; i < nh; ++i) {
        float* pi = &p[size_t(i) * size_t(n_kv)];
        softmax_inplace(pi, n_kv);
        round_fp16_n(pi, pi, n_kv);
        // V is the latent part of the same F16 cache rows; the probabilities are
        // rounded to F16 for that product.
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int j = 0; j < n_kv; ++j) axpy_f16(pi[j], cache.k_at(j), acc.data(), r_kv);
        std::copy(acc.begin(), acc.end(), out + (int64_t(t) * n_head + h0 + i) * r_kv);
      }
    }
  };
  if (pool) pool->parallel_for(n_tasks, 1, body);
  else body(0, n_tasks);
}

void mla_forward(ThreadPool* pool, const MlaShape& s, const MlaWeights& w, KVLayer& cache, int pos0,
                 const float* a, int n, float* out) {
  const AttnSeq seq{&cache, 0, pos0, n};
  mla_forward_batch(pool, s, w, {&seq, 1}, a, n, out);
}

void mla_forward_batch(ThreadPool* pool, const MlaShape& s, const MlaWeights& w, std::span<const AttnSeq> seqs,
                       const float* a, int n, float* out) {
  const int H = s.n_head, dqk = s.d_qk();
  const int64_t q_w = int64_t(H) * dqk, ckv_w = int64_t(s.r_kv) + s.d_rope;
  std::vector<int> pos(static_cast<size_t>(n));  // per row: its position in its sequence
  for (const AttnSeq& q : seqs)
    for (int t = 0; t < q.n; ++t) pos[size_t(q.row0 + t)] = q.pos0 + t;

  // Query: [n, H, d_qk].
  std::vector<float> q(size_t(n) * size_t(q_w));
  if (s.r_q > 0) {
    std::vector<float> qa(size_t(n) * size_t(s.r_q));
    linear(pool, w.wq_a, a, n, qa.data());
    rms_norm_rows(qa.data(), w.q_a_norm.data(), s.r_q, n, s.eps, qa.data());
    linear(pool, w.wq_b, qa.data(), n, q.data());
  } else {
    linear(pool, w.wq, a, n, q.data());
  }

  // Compressed KV: [n, r_kv + d_rope] = [RMSNorm(c) | RoPE(k_pe)], which is exactly the
  // absorbed form's cache row.
  std::vector<float> ckv(size_t(n) * size_t(ckv_w)), rope_c(static_cast<size_t>(s.d_rope));
  linear(pool, w.wkv_a, a, n, ckv.data());
  for (int t = 0; t < n; ++t) {
    float* row = &ckv[size_t(t) * size_t(ckv_w)];
    rope_cache(s.rope, float(pos[size_t(t)]), rope_c.data());
    rope_apply(s.rope, rope_c.data(), row + s.r_kv, 1, s.d_rope);
    rms_norm(row, w.kv_a_norm.data(), s.r_kv, s.eps, row);
    rope_apply(s.rope, rope_c.data(), &q[size_t(t) * size_t(q_w)] + s.d_nope, H, dqk);
  }

  // Optional Mistral-Large temperature on the whole query (after RoPE / absorption),
  // computed in double as llama_graph's input does.
  auto temp = [&](int t) {
    const float p = float(pos[size_t(t)]);
    return float(std::log(std::floor(p / float(s.temp_length)) + 1.0) * s.temp_scale + 1.0);
  };

  std::vector<float> o(size_t(n) * size_t(H) * size_t(s.d_v));
  if (s.absorbed) {
    // Q_h = [k_b[h] q_nope_h | q_pe_h]: [n, H, r_kv + d_rope].
    const int64_t D = ckv_w;
    std::vector<float> Q(size_t(n) * size_t(H) * size_t(D));
    head_linear(pool, w.wk_b, H, q.data(), q_w, dqk, n, Q.data(), H * D, D);
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < H; ++h)
        std::copy_n(&q[size_t(t) * size_t(q_w) + size_t(h * dqk + s.d_nope)], s.d_rope,
                    &Q[(size_t(t) * size_t(H) + size_t(h)) * size_t(D) + size_t(s.r_kv)]);
    if (s.temp_scale != 0.0f)
      for (int t = 0; t < n; ++t) {
        const float st = temp(t);
        for (int64_t i = 0; i < H * D; ++i) Q[size_t(t * H * D + i)] *= st;
      }
    std::vector<float> z(size_t(n) * size_t(H) * size_t(s.r_kv));
    for (const AttnSeq& sq : seqs) {
      const size_t r0 = size_t(sq.row0);
      sq.cache->store(sq.pos0, sq.n, &ckv[r0 * size_t(ckv_w)], nullptr);
      mla_latent_attention(pool, *sq.cache, s.r_kv, H, s.kq_scale, sq.pos0, sq.n, &Q[r0 * size_t(H * D)],
                           &z[r0 * size_t(H) * size_t(s.r_kv)]);
    }
    // Decompress each head's latent output: o_h = v_b[h] z_h.
    head_linear(pool, w.wv_b, H, z.data(), int64_t(H) * s.r_kv, s.r_kv, n, o.data(), int64_t(H) * s.d_v, s.d_v);
  } else {
    // [k_nope_h | v_h] per head from the normed latent.
    const int64_t kv_w = int64_t(H) * (s.d_nope + s.d_v);
    std::vector<float> kv(size_t(n) * size_t(kv_w));
    matmul(pool, w.wkv_b.type, w.wkv_b.data, w.wkv_b.rows(), w.wkv_b.cols(), ckv.data(), n, ckv_w, kv.data(),
           kv_w);
    std::vector<float> K(size_t(n) * size_t(q_w)), V(size_t(n) * size_t(H) * size_t(s.d_v));
    for (int t = 0; t < n; ++t) {
      const float* k_pe = &ckv[size_t(t) * size_t(ckv_w) + size_t(s.r_kv)];
      for (int h = 0; h < H; ++h) {
        const float* src = &kv[size_t(t) * size_t(kv_w) + size_t(h) * size_t(s.d_nope + s.d_v)];
        float* kd = &K[size_t(t) * size_t(q_w) + size_t(h * dqk)];
        std::copy_n(src, s.d_nope, kd);
        std::copy_n(k_pe, s.d_rope, kd + s.d_nope);
        std::copy_n(src + s.d_nope, s.d_v, &V[(size_t(t) * size_t(H) + size_t(h)) * size_t(s.d_v)]);
      }
    }
    if (s.temp_scale != 0.0f)
      for (int t = 0; t < n; ++t) {
        const float st = temp(t);
        for (int64_t i = 0; i < q_w; ++i) q[size_t(t * q_w + i)] *= st;
      }
    AttentionShape as{H, H, dqk, s.d_v, s.kq_scale, 0.0f};
    for (const AttnSeq& sq : seqs) {
      const size_t r0 = size_t(sq.row0);
      sq.cache->store(sq.pos0, sq.n, &K[r0 * size_t(q_w)], &V[r0 * size_t(H) * size_t(s.d_v)]);
      attention(pool, as, *sq.cache, sq.pos0, sq.n, &q[r0 * size_t(q_w)], &o[r0 * size_t(H) * size_t(s.d_v)]);
    }
  }
  linear(pool, w.wo, o.data(), n, out);
}

}  // namespace deltafin
