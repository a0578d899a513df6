#include "model/gqa.h"

#include <cmath>

namespace deltafin {
namespace {

// rope_cache() with llama-3 frequency factors: pair k's angle is theta_k / ff[k]
// before the frequency scaling and YaRN mix (ggml_rope_cache_init). ff: [n_rot/2].
void rope_cache_ff(const RopeParams& p, std::span<const float> ff, float pos, float* cache) {
  if (ff.empty()) {
    rope_cache(p, pos, cache);
    return;
  }
  const int n_dims = p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / float(n_dims));
  auto corr_dim = [&](float n_rot) {
    return float(n_dims) * std::log(float(p.n_ctx_orig) / (n_rot * 2.0f * float(M_PI))) /
           (2.0f * std::log(p.freq_base));
  };
  float low = 0, high = 0;
  if (p.ext_factor != 0.0f) {
    low = std::max(0.0f, std::floor(corr_dim(p.beta_fast)));
    high = std::min(float(n_dims - 1), std::ceil(corr_dim(p.beta_slow)));
  }
  float theta_base = pos;  // iterated product, as ggml's CPU backend does
  for (int i0 = 0; i0 < n_dims; i0 += 2) {
    const float theta_extrap = theta_base / ff[size_t(i0 / 2)];
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp, mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float y = (float(i0) / 2.0f - low) / std::max(0.001f, high - low);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cache[i0] = std::cos(theta) * mscale;
    cache[i0 + 1] = std::sin(theta) * mscale;
    theta_base *= theta_scale;
  }
}

}  // namespace

GqaAttention::GqaAttention(ThreadPool* pool, const AttentionShape& shape, const RopeParams& rope,
                           std::span<const float> freq_factors)
    : pool_(pool), shape_(shape), rope_(rope), freq_factors_(freq_factors),
      rope_c_(static_cast<size_t>(shape.head_dim_k)) {}

void GqaAttention::forward(std::span<const BatchSlice> slices, const BatchRows& rows, int il, float* q, float* k,
                           const float* v, float* out) {
  const AttentionShape& s = shape_;
  const size_t q_w = size_t(s.n_head) * size_t(s.head_dim_k), k_w = size_t(s.n_head_kv) * size_t(s.head_dim_k);
  const size_t v_w = size_t(s.n_head_kv) * size_t(s.head_dim_v), o_w = size_t(s.n_head) * size_t(s.head_dim_v);
  for (int r = 0; r < rows.n; ++r) {
    rope_cache_ff(rope_, freq_factors_, float(rows.pos[size_t(r)]), rope_c_.data());
    rope_apply(rope_, rope_c_.data(), &q[size_t(r) * q_w], s.n_head, s.head_dim_k);
    rope_apply(rope_, rope_c_.data(), &k[size_t(r) * k_w], s.n_head_kv, s.head_dim_k);
  }
  for (size_t i = 0; i < slices.size(); ++i) {
    KvState& st = static_cast<KvState&>(*slices[i].state);
    const size_t r0 = size_t(rows.row0[i]);
    KVLayer& cache = st.kv[size_t(il)];
    cache.store(st.n_past, slices[i].n, &k[r0 * k_w], &v[r0 * v_w]);
    attention(pool_, s, cache, st.n_past, slices[i].n, &q[r0 * q_w], &out[r0 * o_w]);
  }
}

}  // namespace deltafin
