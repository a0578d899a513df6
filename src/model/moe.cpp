#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>

#include "model/linear.h"
#include "model/ops.h"

namespace deltafin {

namespace {

// Indices of the k largest values, largest first (ties: lower index first).
void top_k(const float* v, int n, int k, int32_t* out) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
  std::copy(idx.begin(), idx.begin() + k, out);
}
}  // namespace

void route(const RouterConfig& rc, float* logits, int n_tok, int32_t* sel, float* w) {
  const int E = rc.n_expert, K = rc.n_used;
  std::vector<float> select(static_cast<size_t>(E));
  for (int t = 0; t < n_tok; ++t) {
    float* probs = logits + int64_t(t) * E;
    if (rc.gating == Gating::Softmax) {
      softmax_inplace(probs, E);
    } else {
      for (int e = 0; e < E; ++e) probs[e] = sigmoid(probs[e]);
    }
    for (int e = 0; e < E; ++e) select[size_t(e)] = probs[e] + (rc.score_bias ? rc.score_bias[e] : 0.0f);
    if (rc.n_group > 1) {
      // Score each group by the sum of its two best experts; keep the best groups.
      const int per = E / rc.n_group;
      std::vector<float> gscore(static_cast<size_t>(rc.n_group));
      for (int g = 0; g < rc.n_group; ++g) {
        int32_t best[2];
        top_k(&select[size_t(g * per)], per, 2, best);
        gscore[size_t(g)] = select[size_t(g * per + best[0])] + select[size_t(g * per + best[1])];
      }
      std::vector<int32_t> keep(static_cast<size_t>(rc.n_group_used));
      top_k(gscore.data(), rc.n_group, rc.n_group_used, keep.data());
      std::vector<bool> kept(size_t(rc.n_group), false);
      for (int32_t g : keep) kept[size_t(g)] = true;
      for (int e = 0; e < E; ++e)
        if (!kept[size_t(e / per)]) select[size_t(e)] = -INFINITY;
    }
    int32_t* s = sel + int64_t(t) * K;
    float* wt = w + int64_t(t) * K;
    top_k(select.data(), E, K, s);
    for (int k = 0; k < K; ++k) wt[k] = probs[s[k]];
    if (rc.norm_weights) {
      float sum = 0;
      for (int k = 0; k < K; ++k) sum += wt[k];
      sum = std::max(sum, 6.103515625e-5f);
      for (int k = 0; k < K; ++k) wt[k] /= sum;
    }
    if (rc.weights_scale != 0.0f && rc.weights_scale != 1.0f)
      for (int k = 0; k < K; ++k) wt[k] *= rc.weights_scale;
  }
}

void glu_activate(const FfnActParams& a, float* gate, const float* up, int64_t n) {
  if (a.act == FfnAct::SwiGLU) {
    for (int64_t i = 0; i < n; ++i) gate[i] = silu(gate[i]) * up[i];
    return;
  }
  // SiTU: beta*tanh(g/beta)*sigmoid(g) * (lb > 0 ? lb*tanh(u/lb) : u)
  const float b = a.situ_beta, lb = a.situ_linear_beta;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    float act = (std::tanh(g * (1.0f / b)) * b) * sigmoid(g);
    float u = up[i];
    if (lb > 0.0f) u = std::tanh(u * (1.0f / lb)) * lb;
    gate[i] = act * u;
  }
}

Status moe_ffn(ThreadPool* pool, ExpertStore& store, int layer, const float* x, int n_tok,
               int64_t n_in, int64_t n_out, int n_used, const int32_t* sel, const float* w,
               const FfnActParams& act, float* out, bool resident_only) {
  // Union of experts, each with the (token, slot) pairs routed to it.
  std::map<int32_t, std::vector<int>> routed;  // expert -> list of t*n_used+k
  for (int t = 0; t < n_tok; ++t)
    for (int k = 0; k < n_used; ++k) routed[sel[t * n_used + k]].push_back(t * n_used + k);

  // Per (token, slot) results, summed in slot order at the end. Slots of skipped
  // experts (resident-only mode) stay zero.
  const size_t n_slots = size_t(n_tok) * size_t(n_used);
  std::vector<float> slot_out(n_slots * size_t(n_out), 0.0f);
  // Scratch rows of one expert's computation (one per thread when experts run in
  // parallel).
  struct Scratch {
    std::vector<float> xs, g, u, d;
  };
  Scratch main_scratch;
  // Computes expert e (weights ew, pinned) for its routed rows, scaled by wt, and
  // releases it. mp: the pool its matmuls split over (null: this thread alone).
  auto run_expert = [&](int32_t e, const ExpertWeights& ew, const float* wt, ThreadPool* mp, Scratch& sc) {
    const std::vector<int>& slots = routed.at(e);
    const int m = int(slots.size());
    const int64_t n_ff = ew.up.rows();
    sc.xs.resize(size_t(m) * size_t(n_in));
    for (int i = 0; i < m; ++i)
      std::copy_n(x + int64_t(slots[size_t(i)] / n_used) * n_in, n_in, sc.xs.begin() + int64_t(i) * n_in);
    sc.g.resize(size_t(m) * size_t(n_ff));
    sc.u.resize(size_t(m) * size_t(n_ff));
    sc.d.resize(size_t(m) * size_t(n_out));
    linear_expert(mp, ew.up, sc.xs.data(), m, sc.u.data());
    linear_expert(mp, ew.gate, sc.xs.data(), m, sc.g.data());
    glu_activate(act, sc.g.data(), sc.u.data(), int64_t(m) * n_ff);
    linear_expert(mp, ew.down, sc.g.data(), m, sc.d.data());
    store.release(layer, e);
    for (int i = 0; i < m; ++i) {
      const int slot = slots[size_t(i)];
      const float wk = wt[slot];
      float* dst = &slot_out[size_t(slot) * size_t(n_out)];
      const float* src = &sc.d[size_t(i) * size_t(n_out)];
      for (int64_t j = 0; j < n_out; ++j) dst[j] = src[j] * wk;
    }
  };

  if (resident_only) {
    // A self-speculation draft: only the experts in RAM now. Each token's skipped
    // weight goes to its remaining experts in proportion (their weights are scaled
    // to the sum of all its chosen weights); a token with none left gets zero.
    std::vector<std::pair<int32_t, ExpertWeights>> have;
    std::vector<char> kept(n_slots, 0);
    for (const auto& [e, slots] : routed) {
      ExpertWeights ew;
      if (!store.try_acquire_resident(layer, e, &ew)) continue;
      have.emplace_back(e, ew);
      for (int s : slots) kept[size_t(s)] = 1;
    }
    std::vector<float> wt(n_slots);
    for (int t = 0; t < n_tok; ++t) {
      float all = 0, part = 0;
      for (int k = 0; k < n_used; ++k) {
        const size_t s = size_t(t * n_used + k);
        all += w[s];
        if (kept[s]) part += w[s];
      }
      const float scale = part != 0.0f ? all / part : 0.0f;
      for (int k = 0; k < n_used; ++k) {
        const size_t s = size_t(t * n_used + k);
        wt[s] = kept[s] ? w[s] * scale : 0.0f;
      }
    }
    for (const auto& [e, ew] : have) run_expert(e, ew, wt.data(), pool, main_scratch);
  } else {
    // Ask for the whole union first so that every missing expert's read is in
    // flight, then compute them in the order they land. Each expert writes only its
    // own (token, slot) rows and the sum below runs in slot order, so the result does
    // not depend on that order, nor on which thread computed which expert.
    std::vector<int32_t> todo;
    todo.reserve(routed.size());
    for (const auto& r : routed) todo.push_back(r.first);
    store.request(layer, todo.data(), int(todo.size()));
    const int n_threads = pool != nullptr ? pool->size() : 1;
    // With at least two experts per thread each thread takes whole experts: a decode
    // step's matmuls are too small to split without the threads waiting on each other
    // more than they compute, and a prompt's split by row tiles leaves one thread
    // idle at every matmul's end (three per expert) and every expert's serial work
    // (gather, activation). Only with fewer experts than that do the matmuls split.
    const bool per_expert = n_threads > 1 && int(todo.size()) >= 2 * n_threads;
    if (!per_expert) {
      while (!todo.empty()) {
        int which = 0;
        DF_ASSIGN(ExpertWeights ew, store.acquire_any(layer, todo.data(), int(todo.size()), &which));
        const int32_t e = todo[size_t(which)];
        todo.erase(todo.begin() + which);
        run_expert(e, ew, w, pool, main_scratch);
      }
    } else {
      std::mutex mu;  // guards todo and err; held while waiting for the next expert to land
      Status err;
      pool->run([&](int, int) {
        Scratch sc;
        for (;;) {
          int32_t e = -1;
          ExpertWeights ew;
          {
            std::lock_guard<std::mutex> lk(mu);
            if (todo.empty() || !err.ok()) return;
            int which = 0;
            Result<ExpertWeights> r = store.acquire_any(layer, todo.data(), int(todo.size()), &which);
            if (!r.ok()) {
              err = r.error();
              return;
            }
            ew = r.value();
            e = todo[size_t(which)];
            todo.erase(todo.begin() + which);
          }
          run_expert(e, ew, w, nullptr, sc);
        }
      });
      if (!err.ok()) return err;
    }
  }
  for (int t = 0; t < n_tok; ++t) {
    float* o = out + int64_t(t) * n_out;
    const float* s0 = &slot_out[size_t(t) * size_t(n_used) * size_t(n_out)];
    std::copy_n(s0, n_out, o);
    for (int k = 1; k < n_used; ++k) {
      const float* sk = s0 + int64_t(k) * n_out;
      for (int64_t j = 0; j < n_out; ++j) o[j] += sk[j];
    }
  }
  return {};
}

void predict_next_experts(ThreadPool* pool, ExpertStore& store, const NextRouter& next, const float* x, int n_tok,
                          int64_t n_embd) {
  if (!store.wants_prediction(next.layer)) return;
  const RouterConfig& rc = next.rc;
  std::vector<float> h(size_t(n_tok) * size_t(n_embd)), logits(size_t(n_tok) * size_t(rc.n_expert)),
      w(size_t(n_tok) * size_t(rc.n_used));
  std::vector<int32_t> sel(size_t(n_tok) * size_t(rc.n_used));
  rms_norm_rows(x, next.norm, n_embd, n_tok, next.eps, h.data());
  linear(pool, *next.gate_inp, h.data(), n_tok, logits.data());
  route(rc, logits.data(), n_tok, sel.data(), w.data());
  std::sort(sel.begin(), sel.end());
  sel.erase(std::unique(sel.begin(), sel.end()), sel.end());
  store.predict(next.layer, sel.data(), int(sel.size()));
}

void dense_ffn(ThreadPool* pool, const Tensor& gate, const Tensor& up, const Tensor& down,
               const float* x, int n_tok, const FfnActParams& act, float* out) {
  const int64_t n_ff = up.rows();
  std::vector<float> g(size_t(n_tok) * size_t(n_ff)), u(size_t(n_tok) * size_t(n_ff));
  linear(pool, up, x, n_tok, u.data());
  linear(pool, gate, x, n_tok, g.data());
  glu_activate(act, g.data(), u.data(), int64_t(n_tok) * n_ff);
  linear(pool, down, g.data(), n_tok, out);
}

}  // namespace deltafin
