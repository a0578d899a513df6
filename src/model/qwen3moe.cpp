// qwen3moe: Qwen3-MoE (30B-A3B, 235B-A22B).
//   x = embed(tokens)
//   per layer: h = rms(x) -> GQA attention with per-head RMS-normed q and k, NEOX rope
//              x = x + attn;  h = rms(x) -> softmax router, top-k, weights normalised
//              x = x + sum_k w_k * down_k(silu(gate_k h) * up_k h)
//   logits = output(rms(x))   (output falls back to the token embedding)
#include <cmath>

#include "model/arch.h"
#include "model/gqa.h"

namespace deltafin {
namespace {

struct Config {
  int n_layer = 0, n_ctx_train = 0;
  int64_t n_embd = 0, n_vocab = 0, n_ff_exp = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_expert = 0, n_used = 0;
  float eps = 1e-6f;
  RopeParams rope;
};

struct Layer {
  std::vector<float> attn_norm, q_norm, k_norm, ffn_norm;
  Tensor wq, wk, wv, wo, gate_inp;
};

class Qwen3Moe final : public ArchModel {
 public:
  Status load(ModelFile& file, LoadOptions& opts) {
    pool_ = opts.pool;
    pager_ = opts.pager;
    const GGUFFile& m = file.meta();
    HParams hp(m, "qwen3moe", file.path());
    c_.n_layer = int(hp.req_int("block_count", 1, kMaxLayers));
    c_.n_ctx_train = int(hp.req_int("context_length", 0, kMaxContext));
    c_.n_embd = hp.req_int("embedding_length", 1, kMaxDim);
    c_.n_head = int(hp.req_int("attention.head_count", 1, kMaxDim));
    c_.n_head_kv = int(hp.int_or("attention.head_count_kv", c_.n_head));
    c_.n_expert = int(hp.req_int("expert_count", 1, kMaxDim));
    c_.n_used = int(hp.req_int("expert_used_count", 1, kMaxDim));
    c_.eps = float(hp.req_positive("attention.layer_norm_rms_epsilon"));
    DF_TRY(hp.finish());
    c_.head_dim = int(hp.int_or("attention.key_length", c_.n_embd / std::max(1, c_.n_head)));
    c_.n_ff_exp = hp.int_or("expert_feed_forward_length", 0);
    if (c_.n_ff_exp == 0) c_.n_ff_exp = hp.int_or("feed_forward_length", 0) / std::max(1, c_.n_used);
    int n_rot = int(hp.int_or("rope.dimension_count", c_.head_dim));
    if (n_rot != c_.head_dim) hp.fail("rope.dimension_count must equal the head size for qwen3moe");
    if (hp.int_or("attention.value_length", c_.head_dim) != c_.head_dim)
      hp.fail("attention.value_length must equal attention.key_length for qwen3moe");
    if (c_.n_expert <= 0 || c_.n_used <= 0 || c_.n_used > c_.n_expert)
      hp.fail("expert_count and expert_used_count must satisfy 0 < used <= count");
    if (c_.n_head_kv <= 0 || c_.n_head % c_.n_head_kv != 0)
      hp.fail("attention.head_count must be a multiple of attention.head_count_kv");
    c_.rope = hp.rope(n_rot, /*neox=*/true, c_.n_ctx_train);
    DF_TRY(hp.finish());

    DF_TRY(bind_checked(file, opts, [&](WeightLoader& w) { return bind(w); }));
    if (opts.check_only) return {};
    DF_TRY(attach_experts(file, opts, &experts_, &info_));
    describe("qwen3moe", c_.n_vocab, c_.n_embd, c_.n_layer, c_.n_ctx_train, c_.n_expert, c_.n_used);
    return {};
  }

  // Every tensor's name and shape (bind_checked).
  Status bind(WeightLoader& w) {
    const int64_t E = c_.n_embd, HD = c_.head_dim;
    c_.n_vocab = bind_head(w, E, /*may_tie=*/true);
    layers_.assign(size_t(c_.n_layer), Layer{});
    for (int il = 0; il < c_.n_layer; ++il) {
      Layer& L = layers_[size_t(il)];
      auto n = [&](const char* s) { return layer_name(il, s); };
      L.attn_norm = to_f32(w.require(n("attn_norm.weight"), {E}));
      L.wq = w.require(n("attn_q.weight"), {E, HD * c_.n_head});
      L.wk = w.require(n("attn_k.weight"), {E, HD * c_.n_head_kv});
      L.wv = w.require(n("attn_v.weight"), {E, HD * c_.n_head_kv});
      L.wo = w.require(n("attn_output.weight"), {HD * c_.n_head, E});
      L.q_norm = to_f32(w.require(n("attn_q_norm.weight"), {HD}));
      L.k_norm = to_f32(w.require(n("attn_k_norm.weight"), {HD}));
      L.ffn_norm = to_f32(w.require(n("ffn_norm.weight"), {E}));
      L.gate_inp = w.require(n("ffn_gate_inp.weight"), {E, c_.n_expert});
      w.expect_shape(n("ffn_gate_exps.weight"), {E, c_.n_ff_exp, c_.n_expert});
      w.expect_shape(n("ffn_up_exps.weight"), {E, c_.n_ff_exp, c_.n_expert});
      w.expect_shape(n("ffn_down_exps.weight"), {c_.n_ff_exp, E, c_.n_expert});
    }
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
    const int64_t q_w = HD * c_.n_head, kv_w = HD * c_.n_head_kv;
    std::vector<float> x(size_t(n) * size_t(E)), h(size_t(n) * size_t(E)), q(size_t(n) * size_t(q_w)),
        k(size_t(n) * size_t(kv_w)), v(size_t(n) * size_t(kv_w)), att(size_t(n) * size_t(q_w)),
        o(size_t(n) * size_t(E)), rl(size_t(n) * size_t(c_.n_expert)), rw(size_t(n) * size_t(c_.n_used));
    std::vector<int32_t> sel(size_t(n) * size_t(c_.n_used));
    embed(slices, rows, E, x.data());

    GqaAttention gqa(pool_, {c_.n_head, c_.n_head_kv, int(HD), int(HD), 1.0f / std::sqrt(float(HD)), 0.0f},
                     c_.rope);
    RouterConfig rc;
    rc.gating = Gating::Softmax;
    rc.n_expert = c_.n_expert;
    rc.n_used = c_.n_used;
    rc.norm_weights = true;
    for (int il = 0; il < c_.n_layer; ++il) {
      DF_TRY(enter_layer(il));
      const Layer& L = layers_[size_t(il)];
      rms_norm_rows(x.data(), L.attn_norm.data(), E, n, c_.eps, h.data());
      dump("attn_norm", il, rows, h.data(), E);
      linear(pool_, L.wq, h.data(), n, q.data());
      linear(pool_, L.wk, h.data(), n, k.data());
      linear(pool_, L.wv, h.data(), n, v.data());
      rms_norm_rows(q.data(), L.q_norm.data(), HD, int64_t(n) * c_.n_head, c_.eps, q.data());
      rms_norm_rows(k.data(), L.k_norm.data(), HD, int64_t(n) * c_.n_head_kv, c_.eps, k.data());
      dump("Qcur_normed", il, rows, q.data(), q_w);
      dump("Kcur_normed", il, rows, k.data(), kv_w);
      dump("Vcur", il, rows, v.data(), kv_w);
      gqa.forward(slices, rows, il, q.data(), k.data(), v.data(), att.data());
      dump("kqv_out", il, rows, att.data(), q_w);
      linear(pool_, L.wo, att.data(), n, o.data());
      dump("attn_out", il, rows, o.data(), E);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      dump("ffn_inp", il, rows, x.data(), E);

      rms_norm_rows(x.data(), L.ffn_norm.data(), E, n, c_.eps, h.data());
      dump("ffn_norm", il, rows, h.data(), E);
      linear(pool_, L.gate_inp, h.data(), n, rl.data());
      dump("ffn_moe_logits", il, rows, rl.data(), c_.n_expert);
      route(rc, rl.data(), n, sel.data(), rw.data());
      DF_TRY(moe_ffn(pool_, *experts_, il, h.data(), n, E, E, c_.n_used, sel.data(), rw.data(), {}, o.data(),
                     fo.resident_experts_only));
      dump("ffn_moe_out", il, rows, o.data(), E);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      dump("l_out", il, rows, x.data(), E);
      if (il + 1 < c_.n_layer && !fo.resident_experts_only) {
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
  Config c_;
  std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> load_qwen3moe(ModelFile& file, LoadOptions& opts) {
  return load_arch<Qwen3Moe>(file, opts);
}

}  // namespace deltafin
