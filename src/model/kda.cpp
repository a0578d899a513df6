#include "model/kda.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/types.h"
#include "model/linear.h"
#include "model/ops.h"

namespace deltafin {

namespace {

// Dot product in the order of ggml_vec_dot_f32 (the F32 row kernel, kernels/types.h):
// the recurrence's output is rounded to F16 before the next matmul on F16 and BF16
// files, where a last-bit difference can become a whole rounding step.
float dot_f32(int n, const float* a, const float* b) {
  static const VecDotFn dot = type_traits(DType::F32)->vec_dot;
  float s;
  dot(n, &s, a, b);
  return s;
}

// One token of the gated delta rule for one head (ggml_gated_delta_net, KDA mode).
// st: [S][S], row j holds S[.][j] (value j, contiguous over keys i).
// out (may be null): S^T q / sqrt(S). tmp: 2*S floats of scratch.
void kda_step(int S, float* st, const float* q, const float* k, const float* v, const float* g, float beta,
              float* out, float* tmp) {
  float* decay = tmp;
  float* delta = tmp + S;
  for (int i = 0; i < S; ++i) decay[i] = std::exp(g[i]);
  for (int j = 0; j < S; ++j) {
    float* row = st + int64_t(j) * S;
    for (int i = 0; i < S; ++i) row[i] *= decay[i];
  }
  for (int j = 0; j < S; ++j) delta[j] = (v[j] - dot_f32(S, st + int64_t(j) * S, k)) * beta;
  for (int j = 0; j < S; ++j) mad_f32(S, st + int64_t(j) * S, k, delta[j]);
  if (out) {
    const float scale = 1.0f / std::sqrt(float(S));
    for (int j = 0; j < S; ++j) out[j] = dot_f32(S, st + int64_t(j) * S, q) * scale;
  }
}

// Shifts one raw projection row z [d_inner] into a conv state block [d_inner][d_conv-1].
void conv_push(float* block, const float* z, int64_t d_inner, int w) {
  for (int64_t c = 0; c < d_inner; ++c) {
    float* s = block + c * w;
    for (int j = 0; j + 1 < w; ++j) s[j] = s[j + 1];
    if (w > 0) s[w - 1] = z[c];
  }
}

template <class F>
void par(ThreadPool* pool, int64_t n, int64_t grain, F&& f) {
  if (pool) pool->parallel_for(n, grain, f);
  else f(0, n);
}

}  // namespace

int64_t KdaState::entry_size() const { return 7 * s_.d_inner() + s_.n_head; }

void KdaState::init(const KdaShape& s, int window) {
  s_ = s;
  pos_ = 0;
  base_pos_ = 0;
  pin_pos_ = -1;
  window_ = std::max(window, 0);
  const int64_t d = s.d_inner();
  conv_.assign(size_t(3 * d * (s.d_conv - 1)), 0.0f);
  rec_.assign(size_t(int64_t(s.n_head) * s.head_dim * s.head_dim), 0.0f);
  base_conv_ = conv_;
  base_rec_ = rec_;
  log_.assign(size_t(window_) * size_t(entry_size()), 0.0f);
}

// Applies the logged tokens [from, to) to a conv + recurrent state pair.
void KdaState::replay(std::vector<float>& conv, std::vector<float>& rec, int from, int to) {
  const int S = s_.head_dim, H = s_.n_head, w = s_.d_conv - 1;
  const int64_t d = s_.d_inner();
  std::vector<float> tmp(size_t(2 * S));
  for (int p = from; p < to; ++p) {
    const float* e = entry(p);
    const float *q = e, *k = e + d, *v = e + 2 * d, *g = e + 3 * d, *beta = e + 4 * d, *z = beta + H;
    for (int h = 0; h < H; ++h) {
      const int64_t o = int64_t(h) * S;
      kda_step(S, &rec[size_t(o * S)], q + o, k + o, v + o, g + o, beta[h], nullptr, tmp.data());
    }
    for (int b = 0; b < 3; ++b) conv_push(&conv[size_t(b * d * w)], z + b * d, d, w);
  }
}

void KdaState::advance_base(int new_base) {
  if (new_base <= base_pos_) return;
  if (new_base == pos_) {
    base_conv_ = conv_;
    base_rec_ = rec_;
  } else {
    replay(base_conv_, base_rec_, base_pos_, new_base);
  }
  base_pos_ = new_base;
}

uint64_t KdaState::memory_bytes() const {
  return (3 * (conv_.size() + rec_.size()) + log_.size()) * sizeof(float);
}

void KdaState::save(StateWriter& w) const {
  w.pod(int32_t(pos_));
  w.pod(int32_t(window_));
  w.pod(int32_t(base_pos_));
  w.pod(int32_t(pin_pos_));
  for (const auto* v : {&conv_, &rec_, &base_conv_, &base_rec_, &pin_conv_, &pin_rec_, &log_}) w.vec(*v);
}

bool KdaState::load(StateReader& r) {
  int32_t pos = 0, window = 0, base = 0, pin = 0;
  if (!r.pod(&pos) || !r.pod(&window) || !r.pod(&base) || !r.pod(&pin) || window != window_ || pos < base ||
      base < 0 || (window_ > 0 && pos - base > window_) || pin < -1)
    return false;
  const size_t nc = conv_.size(), nr = rec_.size(), nl = log_.size();
  // Each vector as init() sized it (the pinned copies: that, or empty when none).
  if (!r.vec(&conv_, nc) || conv_.size() != nc || !r.vec(&rec_, nr) || rec_.size() != nr ||
      !r.vec(&base_conv_, nc) || base_conv_.size() != nc || !r.vec(&base_rec_, nr) || base_rec_.size() != nr ||
      !r.vec(&pin_conv_, nc) || !r.vec(&pin_rec_, nr) || !r.vec(&log_, nl) || log_.size() != nl)
    return false;
  if (pin >= 0 ? pin_conv_.size() != nc || pin_rec_.size() != nr : !pin_conv_.empty() || !pin_rec_.empty())
    return false;
  pos_ = pos;
  base_pos_ = base;
  pin_pos_ = pin;
  return true;
}

void KdaState::pin() {
  pin_pos_ = pos_;
  pin_conv_ = conv_;
  pin_rec_ = rec_;
}

Status KdaState::truncate(int n) {
  if (n >= pos_) return {};
  if (n < base_pos_ && n == pin_pos_) {
    conv_ = base_conv_ = pin_conv_;
    rec_ = base_rec_ = pin_rec_;
    pos_ = base_pos_ = n;
    return {};
  }
  if (n < base_pos_)
    return make_error("cannot roll the KDA state back to position {}: only positions {}..{} are kept "
                      "(rollback window {} tokens)", n, base_pos_, pos_, window_);
  conv_ = base_conv_;
  rec_ = base_rec_;
  replay(conv_, rec_, base_pos_, n);
  pos_ = n;
  return {};
}

void kda_forward(ThreadPool* pool, const KdaShape& s, const KdaWeights& w, KdaState& st, const float* a, int n,
                 float* out) {
  const KdaSeq seq{&st, 0, n};
  kda_forward_batch(pool, s, w, {&seq, 1}, a, n, out);
}

void kda_forward_batch(ThreadPool* pool, const KdaShape& s, const KdaWeights& w, std::span<const KdaSeq> seqs,
                       const float* a, int n, float* out, const KdaDump& dump) {
  const int S = s.head_dim, H = s.n_head, K = s.d_conv, W = K - 1;
  const int64_t d = s.d_inner();
  const int64_t n_seq = int64_t(seqs.size());

  // Rollback bookkeeping, per sequence: the snapshot moves to new_base. If that is
  // inside this batch it is taken on the way (conv below, recurrence further down);
  // otherwise it is replayed from the log before new entries overwrite old slots.
  struct Book {
    int pos0, new_pos, new_base, snap_t;  // snap_t: this batch's tokens folded into the snapshot
    bool keep;
  };
  std::vector<Book> book(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    KdaState& st = *seqs[i].st;
    Book& b = book[i];
    b.pos0 = st.pos_;
    b.new_pos = b.pos0 + seqs[i].n;
    b.keep = st.window_ > 0;
    b.new_base = b.keep ? std::max(st.base_pos_, b.new_pos - st.window_) : b.new_pos;
    b.snap_t = b.new_base - b.pos0;
    if (b.keep && b.new_base <= b.pos0) st.advance_base(b.new_base);
  }

  // Projections (all rows) and short convolutions (per sequence):
  // q/k/v = silu(conv([state | z])).
  std::vector<float> z(size_t(3 * n * d)), qkv(size_t(3 * n * d));
  const Tensor* proj[3] = {&w.wq, &w.wk, &w.wv};
  const std::vector<float>* cw[3] = {&w.conv_q, &w.conv_k, &w.conv_v};
  for (int b = 0; b < 3; ++b) linear(pool, *proj[b], a, n, &z[size_t(b * n * d)]);
  // ggml_silu over each row of d values (silu_lanes, ops.h).
  const int lanes = silu_lanes();
  const int64_t vec_end = lanes > 0 ? d - d % lanes : 0;
  par(pool, n_seq * 3 * d, 64, [&](int64_t c0, int64_t c1) {
    std::vector<float> row;
    for (int64_t task = c0; task < c1; ++task) {
      const KdaSeq& sq = seqs[size_t(task / (3 * d))];
      KdaState& st = *sq.st;
      const Book& bk = book[size_t(task / (3 * d))];
      const int64_t bc = task % (3 * d);
      const int b = int(bc / d), m = sq.n;
      const int64_t c = bc % d;
      row.resize(size_t(W + m));
      float* state = &st.conv_[size_t((b * d + c) * W)];
      const float* zb = &z[size_t(b * n * d + int64_t(sq.row0) * d)];
      const float* wt = &(*cw[b])[size_t(c * K)];
      float* xb = &qkv[size_t(b * n * d + int64_t(sq.row0) * d)];
      for (int j = 0; j < W; ++j) row[size_t(j)] = state[j];
      for (int t = 0; t < m; ++t) row[size_t(W + t)] = zb[int64_t(t) * d + c];
      for (int t = 0; t < m; ++t) {
        // Fused multiply-adds in tap order, as ggml_ssm_conv's loop compiles (contracted)
        // in llama.cpp's CPU build: its result is rounded to F16 before the next matmul
        // of F16 weights, where a last-bit difference can become a whole F16 step.
        float sum = 0.0f;
        for (int i = 0; i < K; ++i) sum = std::fma(row[size_t(t + i)], wt[i], sum);
        xb[int64_t(t) * d + c] = c < vec_end ? silu_vec(sum, lanes) : silu(sum);
      }
      if (bk.keep && bk.snap_t > 0)
        for (int j = 0; j < W; ++j) st.base_conv_[size_t((b * d + c) * W + j)] = row[size_t(bk.snap_t + j)];
      for (int j = 0; j < W; ++j) state[j] = row[size_t(m + j)];
    }
  });
  float* q = &qkv[0];
  float* k = &qkv[size_t(n * d)];
  const float* v = &qkv[size_t(2 * n * d)];
  if (dump) {
    dump("kda_q_conv", q, d);
    dump("kda_k_conv", k, d);
    dump("kda_v_conv", v, d);
  }
  // L2 norm per head: rms_norm(x, eps/S) * (1/sqrt(S)) (build_gdn_l2_norm).
  {
    const float fs = float(S), l2_eps = s.eps / fs, l2_scale = 1.0f / std::sqrt(fs);
    for (float* x : {q, k}) {
      rms_norm_rows(x, nullptr, S, int64_t(n) * H, l2_eps, x);
      for (int64_t i = 0; i < int64_t(n) * d; ++i) x[i] *= l2_scale;
    }
  }

  // Decay gate g [n][d_inner] and beta [n][H].
  std::vector<float> fa(size_t(int64_t(n) * w.f_a.rows())), g(size_t(n * d)), beta(size_t(n * H));
  linear(pool, w.f_a, a, n, fa.data());
  linear(pool, w.f_b, fa.data(), n, g.data());
  const bool lower = std::isfinite(s.gate_lower_bound);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < H; ++h) {
      float* gh = &g[size_t(int64_t(t) * d + int64_t(h) * S)];
      const float A = w.a[size_t(h)];
      for (int i = 0; i < S; ++i) {
        float x = gh[i] + w.dt_bias[size_t(h * S + i)];
        if (lower) {
          x = sigmoid((x * A) * -1.0f) * s.gate_lower_bound;
        } else {
          x = (x > 20.0f ? x : std::log(1.0f + std::exp(x))) * A;
        }
        gh[i] = x;
      }
    }
  linear(pool, w.beta, a, n, beta.data());
  for (float& b : beta) b = sigmoid(b);
  if (dump) {
    dump("kda_g1", g.data(), d);
    dump("kda_beta", beta.data(), H);
  }

  // The recurrence, one (sequence, head) per task.
  std::vector<float> o(size_t(n * d));
  par(pool, n_seq * H, 1, [&](int64_t j0, int64_t j1) {
    std::vector<float> tmp(size_t(2 * S));
    for (int64_t j = j0; j < j1; ++j) {
      const KdaSeq& sq = seqs[size_t(j / H)];
      const Book& bk = book[size_t(j / H)];
      const int64_t h = j % H;
      float* sh = &sq.st->rec_[size_t(h * S * S)];
      for (int t = 0; t < sq.n; ++t) {
        const int r = sq.row0 + t;
        const int64_t off = int64_t(r) * d + h * S;
        kda_step(S, sh, q + off, k + off, v + off, &g[size_t(off)], beta[size_t(r * H + h)], &o[size_t(off)],
                 tmp.data());
        if (bk.keep && t + 1 == bk.snap_t)
          std::copy_n(sh, size_t(S) * size_t(S), &sq.st->base_rec_[size_t(h * S * S)]);
      }
    }
  });

  for (size_t i = 0; i < seqs.size(); ++i) {
    KdaState& st = *seqs[i].st;
    const Book& bk = book[i];
    if (bk.keep && bk.snap_t > 0) st.base_pos_ = bk.new_base;
    // Log the inputs of the tokens still inside the rollback window.
    if (bk.keep) {
      for (int p = std::max(bk.pos0, bk.new_pos - st.window_); p < bk.new_pos; ++p) {
        const int r = seqs[i].row0 + p - bk.pos0;
        float* e = st.entry(p);
        std::copy_n(q + int64_t(r) * d, d, e);
        std::copy_n(k + int64_t(r) * d, d, e + d);
        std::copy_n(v + int64_t(r) * d, d, e + 2 * d);
        std::copy_n(&g[size_t(r * d)], d, e + 3 * d);
        std::copy_n(&beta[size_t(r * H)], H, e + 4 * d);
        for (int b = 0; b < 3; ++b) std::copy_n(&z[size_t(b * n * d + r * d)], d, e + 4 * d + H + b * d);
      }
    }
    st.pos_ = bk.new_pos;
    if (!bk.keep) st.base_pos_ = bk.new_pos;
  }

  // Output: per-head RMSNorm, sigmoid gate, projection.
  if (dump) dump("kda_scan_out", o.data(), d);
  rms_norm_rows(o.data(), w.o_norm.data(), S, int64_t(n) * H, s.eps, o.data());
  std::vector<float> g2(size_t(n * d));
  linear(pool, w.g, a, n, g2.data());
  if (dump) {
    dump("kda_g2", g2.data(), d);
    dump("kda_normed", o.data(), d);
  }
  for (size_t i = 0; i < o.size(); ++i) o[i] = o[i] * sigmoid(g2[i]);
  linear(pool, w.wo, o.data(), n, out);
}

}  // namespace deltafin
