// llama: Llama 1/2/3 (dense) and Mixtral 8x7B / 8x22B (routed experts), as
// llama.cpp's `llama` architecture computes them.
//   x = embed(tokens)
//   per layer: h = rms(x) -> GQA attention, NORM rope (adjacent pairs: the GGUF
//              converter permuted q/k), optional rope_freqs frequency factors
//              x = x + attn (+ attn_output.bias)
//              h = rms(x) -> dense:  down(silu(gate h) * up h)
//                            MoE:    softmax router, top-k, weights renormalised over
//                                    the chosen k (= Mixtral's softmax over the top-k
//                                    logits), sum_k w_k * down_k(silu(gate_k h) * up_k h)
//              x = x + ffn
//   logits = output(rms(x))   (output falls back to the token embedding)
//
// llama.cpp ignores these keys for `llama`, and so do we: expert_feed_forward_length
// (the expert width is feed_forward_length), expert_weights_norm/scale,
// expert_gating_func, attention.scale, expert_shared_*.
//
// Not supported (with an error naming the file): the pre-2024 Mixtral layout with one
// tensor per expert (blk.N.ffn_gate.E.weight; llama.cpp no longer loads it either),
// experts without ffn_gate_exps, longrope scaling, per-layer head counts.
#include <fmt/format.h>

#include <cmath>
#include <regex>
#include <set>

#include "model/arch.h"
#include "model/gqa.h"

namespace deltafin {
namespace {

struct Config {
  int n_layer = 0, n_ctx_train = 0;
  int64_t n_embd = 0, n_vocab = 0;
  int64_t n_ff = 0;  // dense FFN width, or each expert's width (Mixtral: 14336)
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_expert = 0, n_used = 0;  // n_expert == 0: dense
  float eps = 1e-5f;
  RopeParams rope;  // NORM pairing, n_rot == head_dim
};

struct Layer {
  std::vector<float> attn_norm, ffn_norm;
  Tensor wq, wk, wv, wqkv, wo;            // either wq/wk/wv or the fused wqkv [q | k | v]
  std::vector<float> bq, bk, bv, bqkv, bo;  // optional biases (empty: none)
  Tensor gate_inp;                          // MoE router [n_embd, n_expert]
  Tensor ffn_gate, ffn_up, ffn_down;        // dense FFN
  std::vector<float> b_gate, b_up, b_down;  // optional dense FFN biases
};

// y[t] += b for every token row (b empty: nothing).
void add_bias(float* y, int n_tok, const std::vector<float>& b) {
  if (b.empty()) return;
  const size_t w = b.size();
  for (int t = 0; t < n_tok; ++t)
    for (size_t i = 0; i < w; ++i) y[size_t(t) * w + i] += b[i];
}

class Llama final : public ArchModel {
 public:
  Status load(ModelFile& file, LoadOptions& opts) {
    pool_ = opts.pool;
    pager_ = opts.pager;
    DF_TRY(check_layout(file));
    DF_TRY(load_config(file));
    DF_TRY(bind_checked(file, opts, [&](WeightLoader& w) { return bind(w, file); }));
    if (opts.check_only) return {};
    DF_TRY(attach_experts(file, opts, &experts_, &info_));
    describe("llama", c_.n_vocab, c_.n_embd, c_.n_layer, c_.n_ctx_train, c_.n_expert, c_.n_used);
    return {};
  }

  std::unique_ptr<SeqState> new_state(int n_ctx) const override {
    const int64_t kv_w = int64_t(c_.n_head_kv) * c_.head_dim;
    return new_kv_state(n_ctx, c_.n_layer, kv_w, kv_w);
  }

  // All slices' rows go through the row-wise ops together; rope positions, the KV
  // cache and attention are per slice.
  Status forward_batch(std::span<const BatchSlice> slices, const ForwardOptions& fo) override {
    DF_TRY(check_batch(slices, c_.n_vocab));
    const BatchRows rows(slices);
    const int n = rows.n;
    const int64_t E = c_.n_embd, HD = c_.head_dim;
    const int64_t q_w = HD * c_.n_head, kv_w = HD * c_.n_head_kv, qkv_w = q_w + 2 * kv_w;
    const size_t N = size_t(n);
    std::vector<float> x(N * size_t(E)), h(N * size_t(E)), q(N * size_t(q_w)), k(N * size_t(kv_w)),
        v(N * size_t(kv_w)), att(N * size_t(q_w)), o(N * size_t(E));
    std::vector<float> qkv, rl, rw;
    std::vector<int32_t> sel;
    if (c_.n_expert > 0) {
      rl.resize(N * size_t(c_.n_expert));
      rw.resize(N * size_t(c_.n_used));
      sel.resize(N * size_t(c_.n_used));
    }
    embed(slices, rows, E, x.data());

    GqaAttention gqa(pool_, {c_.n_head, c_.n_head_kv, int(HD), int(HD), 1.0f / std::sqrt(float(HD)), 0.0f},
                     c_.rope, rope_freqs_);
    RouterConfig rc;
    rc.gating = Gating::Softmax;
    rc.n_expert = c_.n_expert;
    rc.n_used = c_.n_used;
    rc.norm_weights = true;  // hard-coded in llama.cpp's llama graph
    for (int il = 0; il < c_.n_layer; ++il) {
      DF_TRY(enter_layer(il));
      const Layer& L = layers_[size_t(il)];
      rms_norm_rows(x.data(), L.attn_norm.data(), E, n, c_.eps, h.data());
      dump("attn_norm", il, rows, h.data(), E);
      if (L.wqkv.valid()) {
        qkv.resize(N * size_t(qkv_w));
        linear(pool_, L.wqkv, h.data(), n, qkv.data());
        add_bias(qkv.data(), n, L.bqkv);
        for (size_t t = 0; t < N; ++t) {
          const float* r = &qkv[t * size_t(qkv_w)];
          std::copy_n(r, q_w, &q[t * size_t(q_w)]);
          std::copy_n(r + q_w, kv_w, &k[t * size_t(kv_w)]);
          std::copy_n(r + q_w + kv_w, kv_w, &v[t * size_t(kv_w)]);
        }
      } else {
        linear(pool_, L.wq, h.data(), n, q.data());
        linear(pool_, L.wk, h.data(), n, k.data());
        linear(pool_, L.wv, h.data(), n, v.data());
      }
      add_bias(q.data(), n, L.bq);
      add_bias(k.data(), n, L.bk);
      add_bias(v.data(), n, L.bv);
      dump("Qcur", il, rows, q.data(), q_w);
      dump("Kcur", il, rows, k.data(), kv_w);
      dump("Vcur", il, rows, v.data(), kv_w);
      gqa.forward(slices, rows, il, q.data(), k.data(), v.data(), att.data());
      dump("kqv_out", il, rows, att.data(), q_w);
      linear(pool_, L.wo, att.data(), n, o.data());
      add_bias(o.data(), n, L.bo);
      dump("attn_out", il, rows, o.data(), E);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      dump("ffn_inp", il, rows, x.data(), E);

      rms_norm_rows(x.data(), L.ffn_norm.data(), E, n, c_.eps, h.data());
      dump("ffn_norm", il, rows, h.data(), E);
      if (c_.n_expert > 0) {
        linear(pool_, L.gate_inp, h.data(), n, rl.data());
        dump("ffn_moe_logits", il, rows, rl.data(), c_.n_expert);
        route(rc, rl.data(), n, sel.data(), rw.data());
        DF_TRY(moe_ffn(pool_, *experts_, il, h.data(), n, E, E, c_.n_used, sel.data(), rw.data(), {}, o.data(),
                       fo.resident_experts_only));
        dump("ffn_moe_out", il, rows, o.data(), E);
      } else {
        dense(L, h.data(), n, o.data());
        dump("ffn_out", il, rows, o.data(), E);
      }
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      dump("l_out", il, rows, x.data(), E);
      if (c_.n_expert > 0 && il + 1 < c_.n_layer && !fo.resident_experts_only) {
        DF_TRY(peek_layer(il + 1));
        const Layer& next = layers_[size_t(il + 1)];
        predict_next_experts(pool_, *experts_, {il + 1, &next.gate_inp, next.ffn_norm.data(), c_.eps, rc}, x.data(),
                             n, E);
      }
    }
    finish_batch(slices, rows, x.data(), E, c_.eps, c_.n_vocab);
    return {};
  }

 private:
  // Refuses layouts llama.cpp's llama loader does not read, before anything else
  // reports them as a pile of missing tensors.
  static Status check_layout(ModelFile& file) {
    static const std::regex per_expert(R"(blk\.\d+\.ffn_(gate|up|down)\.\d+\.weight)");
    for (const auto& [name, ref] : file.tensors()) {
      if (std::regex_match(name, per_expert))
        return make_error(
            "{}: tensor '{}' is in the old per-expert Mixtral layout (one tensor per expert), which "
            "deltafin does not support and current llama.cpp no longer loads; re-convert the model with "
            "a current convert_hf_to_gguf.py to get stacked blk.N.ffn_{{gate,up,down}}_exps.weight tensors",
            file.path(), name);
    }
    return {};
  }

  Status load_config(ModelFile& file) {
    HParams hp(file.meta(), "llama", file.path());
    c_.n_layer = int(hp.req_int("block_count", 1, kMaxLayers));
    c_.n_ctx_train = int(hp.req_int("context_length", 0, kMaxContext));
    c_.n_embd = hp.req_int("embedding_length", 1, kMaxDim);
    c_.eps = float(hp.req_positive("attention.layer_norm_rms_epsilon"));
    if (!hp.has("attention.head_count")) hp.fail("missing key 'llama.attention.head_count'");
    DF_TRY(hp.finish());

    // Per-layer-capable keys (scalar or one value per layer). llama.cpp sizes every
    // layer from layer 0's value; differing heads would need per-layer KV shapes.
    auto uniform = [&](const char* name, int64_t def) {
      std::vector<int64_t> v = hp.per_layer_int(name, c_.n_layer, def);
      if (v.empty()) return def;
      for (int64_t x : v)
        if (x != v[0]) hp.fail(fmt::format("per-layer values of 'llama.{}' differ; not supported", name));
      return v[0];
    };
    c_.n_head = int(uniform("attention.head_count", 0));
    c_.n_head_kv = int(uniform("attention.head_count_kv", c_.n_head));
    c_.n_ff = uniform("feed_forward_length", 0);
    c_.n_expert = int(hp.int_or("expert_count", 0));
    c_.n_used = int(uniform("expert_used_count", 0));
    if (c_.n_head <= 0) hp.fail("llama.attention.head_count must be > 0");
    if (c_.n_head_kv <= 0 || (c_.n_head > 0 && c_.n_head % c_.n_head_kv != 0))
      hp.fail("llama.attention.head_count must be a multiple of llama.attention.head_count_kv");
    if (c_.n_ff <= 0) hp.fail("llama.feed_forward_length must be > 0 (the FFN or expert width)");
    if (c_.n_expert < 0 || c_.n_used < 0) hp.fail("expert counts must not be negative");
    if (c_.n_expert > 0 && (c_.n_used <= 0 || c_.n_used > c_.n_expert))
      hp.fail(fmt::format("llama.expert_used_count ({}) must be in 1..llama.expert_count ({})", c_.n_used,
                          c_.n_expert));
    if (c_.n_expert == 0 && c_.n_used != 0)
      hp.fail("llama.expert_used_count is set but llama.expert_count is 0");
    DF_TRY(hp.finish());

    c_.head_dim = int(hp.int_or("attention.key_length", c_.n_embd / c_.n_head));
    const int64_t head_v = hp.int_or("attention.value_length", c_.n_embd / c_.n_head);
    const int64_t n_rot = hp.int_or("rope.dimension_count", c_.head_dim);
    if (c_.head_dim <= 0 || c_.head_dim % 2 != 0) hp.fail("the head size must be a positive even number");
    if (head_v != c_.head_dim)
      hp.fail(fmt::format("attention.value_length ({}) must equal the key length ({})", head_v, c_.head_dim));
    if (n_rot != c_.head_dim)
      hp.fail(fmt::format("rope.dimension_count ({}) must equal the head size ({}) for llama", n_rot,
                          c_.head_dim));
    c_.rope = hp.rope(c_.head_dim, /*neox=*/false, c_.n_ctx_train);
    return hp.finish();
  }

  // Every tensor's name and shape (bind_checked).
  Status bind(WeightLoader& w, const ModelFile& file) {
    std::set<std::string> bound;  // every name asked for, present or not
    auto req = [&](const std::string& nm, std::initializer_list<int64_t> shape) {
      bound.insert(nm);
      return w.require(nm, shape);
    };
    auto opt = [&](const std::string& nm, std::initializer_list<int64_t> shape) {
      bound.insert(nm);
      return w.optional(nm, shape);
    };
    auto opt_vec = [&](const std::string& nm, int64_t n) {
      Tensor t = opt(nm, {n});
      return t.valid() ? to_f32(t) : std::vector<float>{};
    };

    const int64_t E = c_.n_embd, HD = c_.head_dim, F = c_.n_ff, X = c_.n_expert;
    const int64_t q_w = HD * c_.n_head, kv_w = HD * c_.n_head_kv;
    bound.insert({"token_embd.weight", "output_norm.weight", "output.weight"});
    c_.n_vocab = bind_head(w, E, /*may_tie=*/true);
    rope_freqs_ = opt_vec("rope_freqs.weight", HD / 2);
    for (float f : rope_freqs_)
      if (!(f > 0.0f)) return make_error("{}: rope_freqs.weight has a non-positive factor", file.path());

    layers_.assign(size_t(c_.n_layer), Layer{});
    for (int il = 0; il < c_.n_layer; ++il) {
      Layer& L = layers_[size_t(il)];
      auto n = [&](const char* s) { return layer_name(il, s); };
      L.attn_norm = to_f32(req(n("attn_norm.weight"), {E}));
      if (w.has(n("attn_qkv.weight"))) {
        L.wqkv = req(n("attn_qkv.weight"), {E, q_w + 2 * kv_w});
        L.bqkv = opt_vec(n("attn_qkv.bias"), q_w + 2 * kv_w);
        if (L.bqkv.empty()) {
          // Separate biases beside a fused weight count only when all three exist.
          std::vector<float> bq = opt_vec(n("attn_q.bias"), q_w), bk = opt_vec(n("attn_k.bias"), kv_w),
                             bv = opt_vec(n("attn_v.bias"), kv_w);
          if (!bq.empty() && !bk.empty() && !bv.empty()) {
            L.bqkv = bq;
            L.bqkv.insert(L.bqkv.end(), bk.begin(), bk.end());
            L.bqkv.insert(L.bqkv.end(), bv.begin(), bv.end());
          }
        }
      } else {
        L.wq = req(n("attn_q.weight"), {E, q_w});
        L.wk = req(n("attn_k.weight"), {E, kv_w});
        L.wv = req(n("attn_v.weight"), {E, kv_w});
        L.bq = opt_vec(n("attn_q.bias"), q_w);
        L.bk = opt_vec(n("attn_k.bias"), kv_w);
        L.bv = opt_vec(n("attn_v.bias"), kv_w);
      }
      L.wo = req(n("attn_output.weight"), {q_w, E});
      L.bo = opt_vec(n("attn_output.bias"), E);
      L.ffn_norm = to_f32(req(n("ffn_norm.weight"), {E}));
      if (X == 0) {
        L.ffn_gate = req(n("ffn_gate.weight"), {E, F});
        L.ffn_up = req(n("ffn_up.weight"), {E, F});
        L.ffn_down = req(n("ffn_down.weight"), {F, E});
        L.b_gate = opt_vec(n("ffn_gate.bias"), F);
        L.b_up = opt_vec(n("ffn_up.bias"), F);
        L.b_down = opt_vec(n("ffn_down.bias"), E);
      } else {
        L.gate_inp = req(n("ffn_gate_inp.weight"), {E, X});
        // llama.cpp treats ffn_gate_exps as optional (experts then compute silu(up));
        // our expert FFN always has a gate.
        if (!w.has(n("ffn_gate_exps.weight")))
          return make_error("{}: '{}' is missing: experts without a gate projection are not supported",
                            file.path(), n("ffn_gate_exps.weight"));
        bound.insert(n("ffn_gate_exps.weight"));
        bound.insert(n("ffn_up_exps.weight"));
        bound.insert(n("ffn_down_exps.weight"));
        w.expect_shape(n("ffn_gate_exps.weight"), {E, F, X});
        w.expect_shape(n("ffn_up_exps.weight"), {E, F, X});
        w.expect_shape(n("ffn_down_exps.weight"), {F, E, X});
      }
    }

    // llama.cpp refuses a file with tensors its loader did not ask for ("wrong number
    // of tensors"); so do we, rather than silently computing without them.
    std::vector<std::string> extra;
    for (const auto& [name, ref] : file.tensors())
      if (!bound.count(name)) extra.push_back(name);
    if (!extra.empty()) {
      std::string list;
      for (size_t i = 0; i < extra.size() && i < 10; ++i) list += "\n  " + extra[i];
      if (extra.size() > 10) list += fmt::format("\n  ... and {} more", extra.size() - 10);
      return make_error("{}: {} tensor(s) that a '{}' llama model does not use:{}", file.path(), extra.size(),
                        X > 0 ? "MoE" : "dense", list);
    }
    return {};
  }

  // out = down(silu(gate x + b_gate) * (up x + b_up)) + b_down   (llama.cpp build_ffn, PAR)
  void dense(const Layer& L, const float* x, int n, float* out) const {
    if (L.b_gate.empty() && L.b_up.empty() && L.b_down.empty()) {
      dense_ffn(pool_, L.ffn_gate, L.ffn_up, L.ffn_down, x, n, {}, out);
      return;
    }
    const size_t F = size_t(c_.n_ff);
    std::vector<float> g(size_t(n) * F), u(size_t(n) * F);
    linear(pool_, L.ffn_up, x, n, u.data());
    add_bias(u.data(), n, L.b_up);
    linear(pool_, L.ffn_gate, x, n, g.data());
    add_bias(g.data(), n, L.b_gate);
    glu_activate({}, g.data(), u.data(), int64_t(n) * c_.n_ff);
    linear(pool_, L.ffn_down, g.data(), n, out);
    add_bias(out, n, L.b_down);
  }

  Config c_;
  std::vector<float> rope_freqs_;  // empty: none
  std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> load_llama(ModelFile& file, LoadOptions& opts) { return load_arch<Llama>(file, opts); }

}  // namespace deltafin
