// kimi-k3: Kimi-K3, a hybrid of KDA (linear attention, model/kda.h) and gated MLA
// (model/kimi_k3_mla.h) layers, as llama.cpp's src/models/kimi-k3.cpp computes it.
//   x = embed(tokens); R = [] (attention-residual checkpoints, per token)
//   per layer l (kind from head_count_kv[l]: 0 = KDA, 1 = MLA):
//     P = x;  u = res_mix(P, attn_res_score[l]);  if l % B == 0: push P onto R
//     o = KDA or MLA (RMSNorm(u, attn_norm));  P = (banked ? o : P + o)
//     u = res_mix(P, ffn_res_score[l]);  f = RMSNorm(u, ffn_norm)
//     x = P + (l < n_dense ? SiTU FFN(f) : latent MoE(f))
//   logits = output(RMSNorm(res_mix(x, output_res_score), output_norm))
// Latent MoE: the router reads f, the routed experts (SiTU, from the ExpertStore) run
// on routed_down(f) and their weighted sum is RMS-normed and up-projected; shared
// experts read f. No RoPE anywhere. With B = attn_res.block_size = 0 the residuals
// are the ordinary pre-norm ones.
#include <cmath>

#include "model/arch.h"
#include "model/kda.h"
#include "model/kimi_k3_mla.h"

namespace deltafin {
namespace {

// KDA rollback depth: truncate() can drop up to this many of the latest tokens
// (speculative decoding). Costs per KDA layer (7 * d_inner + H) floats per token
// plus one state snapshot.
constexpr int kRollbackWindow = 16;

struct Config {
  int n_layer = 0, n_ctx_train = 0;
  int64_t n_embd = 0, n_vocab = 0;
  float eps = 0;
  KdaShape kda;
  K3MlaShape mla;
  int n_dense = 0;
  int64_t n_ff = 0, n_ff_exp = 0, n_ff_shexp = 0, latent = 0;  // latent 0: experts at n_embd
  int n_shared = 0;
  int n_expert = 0, n_used = 0;
  RouterConfig router;
  FfnActParams act;
  int res_block = 0;  // B: attention-residual block size (0: off)
  // F32 products (router, MLA's k_b/v_b) sum in ggml's batch order too: set on a file
  // whose projections are F16/BF16, where llama.cpp rounds what follows them.
  bool f32_gemm = false;
};

struct Layer {
  bool mla = false;
  std::vector<float> attn_norm, ffn_norm, attn_res, ffn_res;
  KdaWeights kda;
  K3MlaWeights att;
  Tensor ffn_gate, ffn_up, ffn_down;  // leading dense layers
  Tensor gate_inp;                    // MoE layers
  std::vector<float> exp_probs_b, routed_norm;
  Tensor routed_down, routed_up;
  Tensor gate_sh, up_sh, down_sh;
};

// kv (KvState): the MLA layers' K-only latent caches; kda: the KDA layers' states.
class State final : public KvState {
 public:
  std::vector<KdaState> kda;
  std::vector<int> kda_layers;
  // MLA caches roll back for free; KDA states only within their window or to where
  // they were pinned, so every KDA layer is checked before any is changed.
  Status truncate(int n) override {
    if (n >= n_past) return {};
    if (n < 0) return make_error("cannot truncate to a negative position ({})", n);
    for (int il : kda_layers)
      if (n < kda[size_t(il)].min_pos() && n != kda[size_t(il)].pinned_pos())
        return make_error("cannot roll back to position {}: the KDA recurrent state keeps only the last {} "
                          "positions ({}..{})", n, kRollbackWindow, kda[size_t(il)].min_pos(), n_past);
    for (int il : kda_layers) DF_TRY(kda[size_t(il)].truncate(n));
    n_past = n;
    return {};
  }
  std::unique_ptr<SeqState> clone() const override { return std::make_unique<State>(*this); }
  int reachable(int n) const override {
    n = std::clamp(n, 0, n_past);
    if (kda_layers.empty()) return n;
    const KdaState& k = kda[size_t(kda_layers[0])];  // every KDA layer holds the same positions
    if (n >= k.min_pos()) return n;
    return k.pinned_pos() >= 0 && k.pinned_pos() <= n ? k.pinned_pos() : 0;
  }
  void pin() override {
    for (int il : kda_layers) kda[size_t(il)].pin();
  }
  uint64_t memory_bytes() const override {
    uint64_t b = KvState::memory_bytes();
    for (int il : kda_layers) b += kda[size_t(il)].memory_bytes();
    return b;
  }

 protected:
  void save_to(StateWriter& w) const override {
    KvState::save_to(w);
    w.pod(uint32_t(kda_layers.size()));
    for (int il : kda_layers) kda[size_t(il)].save(w);
  }
  bool load_from(StateReader& r) override {
    uint32_t n = 0;
    if (!KvState::load_from(r) || !r.pod(&n) || n != kda_layers.size()) return false;
    for (int il : kda_layers)
      if (!kda[size_t(il)].load(r) || kda[size_t(il)].pos() != n_past) return false;  // every layer at n_past
    return true;
  }
};

// RMSNorm(x) . w (no norm weight), summed in double as ggml_sum_rows does.
float res_score(const float* x, const float* w, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(float(sum / double(n)) + eps);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double((x[i] * scale) * w[i]);
  return float(s);
}

// Block attention-residual mix (kimi-k3.cpp:res_mix): softmax over the scores of the
// checkpoints R and the current stream `cur`, then the weighted sum of the RAW
// vectors (checkpoints summed in order, current stream added last). R non-empty.
void res_mix(const std::vector<std::vector<float>>& R, const float* cur, const float* w, int n, int64_t E,
             float eps, float* out) {
  const size_t nr = R.size();
  std::vector<float> p(nr + 1);
  for (int t = 0; t < n; ++t) {
    const int64_t off = int64_t(t) * E;
    for (size_t i = 0; i < nr; ++i) p[i] = res_score(&R[i][size_t(off)], w, E, eps);
    p[nr] = res_score(cur + off, w, E, eps);
    softmax_inplace(p.data(), int64_t(nr + 1));
    // ggml_dsv4_hc_pre's `sum += x * w` is one fused multiply-add per checkpoint in
    // llama.cpp's CPU build; the current stream is a separate mul and add.
    std::fill_n(out + off, E, 0.0f);
    for (size_t i = 0; i < nr; ++i) mad_f32(E, out + off, &R[i][size_t(off)], p[i]);
    for (int64_t e = 0; e < E; ++e) {
      const float c = cur[off + e] * p[nr];
      out[off + e] += c;
    }
  }
}

class KimiK3 final : public ArchModel {
 public:
  Status load(ModelFile& file, LoadOptions& opts) {
    pool_ = opts.pool;
    pager_ = opts.pager;
    HParams hp(file.meta(), "kimi-k3", file.path());
    c_.n_layer = int(hp.req_int("block_count", 1, kMaxLayers));
    c_.n_ctx_train = int(hp.req_int("context_length", 0, kMaxContext));
    c_.n_embd = hp.req_int("embedding_length", 1, kMaxDim);
    const int n_head = int(hp.req_int("attention.head_count", 1, kMaxDim));
    c_.eps = float(hp.req_positive("attention.layer_norm_rms_epsilon"));
    const int d_qk = int(hp.req_int("attention.key_length_mla"));
    c_.mla.d_v = int(hp.req_int("attention.value_length_mla"));
    c_.mla.kv_lora = int(hp.req_int("attention.kv_lora_rank"));
    const int key_length = int(hp.req_int("attention.key_length"));
    c_.mla.d_rope = int(hp.req_int("rope.dimension_count"));
    c_.kda.d_conv = int(hp.req_int("ssm.conv_kernel"));
    c_.kda.head_dim = int(hp.req_int("kda.head_dim"));
    c_.kda.gate_lower_bound = float(hp.float_or("kda.gate_lower_bound", -INFINITY));
    c_.n_shared = int(hp.req_int("expert_shared_count"));
    c_.n_expert = int(hp.req_int("expert_count", 1, kMaxDim));
    c_.n_used = int(hp.req_int("expert_used_count", 1, kMaxDim));
    const int gating = int(hp.req_int("expert_gating_func"));
    c_.res_block = int(hp.req_int("attn_res.block_size"));
    c_.act.act = FfnAct::SiTU;
    c_.act.situ_beta = float(hp.req_float("activation.situ_beta"));
    c_.act.situ_linear_beta = float(hp.req_float("activation.situ_linear_beta"));
    // Scalar-or-array keys: reported as missing here, read per layer below.
    for (const char* k : {"expert_feed_forward_length", "attention.head_count_kv"})
      if (!hp.has(k)) hp.req_int(k);
    DF_TRY(hp.finish());

    // Layer kinds: head_count_kv 0 = KDA (recurrent), 1 = MLA.
    const std::vector<int64_t> kinds = hp.per_layer_int("attention.head_count_kv", c_.n_layer, -1);
    c_.n_ff_exp = hp.per_layer_int("expert_feed_forward_length", c_.n_layer, 0).at(0);
    c_.n_dense = int(hp.int_or("leading_dense_block_count", 0));
    if (c_.n_dense > 0) {
      if (!hp.has("feed_forward_length")) hp.fail("feed_forward_length is required with leading dense layers");
      c_.n_ff = hp.per_layer_int("feed_forward_length", c_.n_layer, 0).at(0);
    }
    c_.latent = hp.int_or("expert_latent_length", 0);
    c_.n_ff_shexp = c_.n_ff_exp * std::max(c_.n_shared, 1);
    c_.router.gating = gating == 2 ? Gating::Sigmoid : Gating::Softmax;
    c_.router.n_expert = c_.n_expert;
    c_.router.n_used = c_.n_used;
    c_.router.norm_weights = hp.bool_or("expert_weights_norm", false);
    c_.router.weights_scale = float(hp.float_or("expert_weights_scale", 0.0));
    c_.router.n_group = std::max(1, int(hp.int_or("expert_group_count", 0)));
    c_.router.n_group_used = int(hp.int_or("expert_group_used_count", 0));

    c_.kda.n_head = n_head;
    c_.kda.eps = c_.eps;
    c_.mla.n_head = n_head;
    c_.mla.eps = c_.eps;
    c_.mla.d_nope = d_qk - c_.mla.d_rope;
    if (gating != 1 && gating != 2)
      hp.fail(fmt::format("expert_gating_func {} is not supported (1 softmax, 2 sigmoid)", gating));
    for (int il = 0; il < c_.n_layer; ++il)
      if (kinds[size_t(il)] != 0 && kinds[size_t(il)] != 1)
        hp.fail(fmt::format("attention.head_count_kv[{}] = {}: must be 0 (KDA) or 1 (MLA)", il, kinds[size_t(il)]));
    if (n_head <= 0 || c_.kda.head_dim <= 0 || c_.kda.d_conv < 1)
      hp.fail("attention.head_count, kda.head_dim and ssm.conv_kernel must be positive");
    if (c_.mla.d_nope < 0 || c_.mla.d_v <= 0 || c_.mla.kv_lora <= 0)
      hp.fail("key_length_mla, value_length_mla, kv_lora_rank and rope.dimension_count are inconsistent");
    if (key_length != c_.mla.kv_lora + c_.mla.d_rope)
      hp.fail(fmt::format("attention.key_length is {}, but the MLA cache row is kv_lora_rank + "
                          "rope.dimension_count = {}", key_length, c_.mla.kv_lora + c_.mla.d_rope));
    if (c_.n_expert <= 0 || c_.n_used <= 0 || c_.n_used > c_.n_expert)
      hp.fail("expert_count and expert_used_count must satisfy 0 < used <= count");
    if (c_.router.n_group > 1 && (c_.n_expert % c_.router.n_group != 0 || c_.router.n_group_used <= 0 ||
                                  c_.router.n_group_used >= c_.router.n_group))
      hp.fail("expert_group_count / expert_group_used_count are inconsistent with expert_count");
    if (c_.n_ff_exp <= 0) hp.fail("expert_feed_forward_length must be positive");
    if (c_.act.situ_beta == 0.0f) hp.fail("activation.situ_beta must not be 0");
    DF_TRY(hp.finish());

    const int64_t E = c_.n_embd, H = n_head, S = c_.kda.head_dim, D = c_.kda.d_inner(), K = c_.kda.d_conv;
    const int64_t L = c_.latent > 0 ? c_.latent : E;
    const int64_t r_kv = c_.mla.kv_lora, dr = c_.mla.d_rope, dn = c_.mla.d_nope, dv = c_.mla.d_v;
    const int64_t r_q = hp.int_or("attention.q_lora_rank", 0);
    // Every tensor's name and shape (bind_checked).
    auto bind = [&](WeightLoader& w) -> Status {
      c_.n_vocab = bind_head(w, E, /*may_tie=*/false);  // never tied for kimi-k3
      if (c_.res_block > 0) output_res_ = to_f32(w.require("output_res_score.weight", {E}));
      std::string bad;  // problems the loader's shape checks do not cover
      layers_.assign(size_t(c_.n_layer), Layer{});
      for (int il = 0; il < c_.n_layer; ++il) {
        Layer& Ly = layers_[size_t(il)];
        auto n = [&](const char* s) { return layer_name(il, s); };
        Ly.mla = kinds[size_t(il)] == 1;
        Ly.attn_norm = to_f32(w.require(n("attn_norm.weight"), {E}));
        Ly.ffn_norm = to_f32(w.require(n("ffn_norm.weight"), {E}));
        if (c_.res_block > 0) {
          Ly.attn_res = to_f32(w.require(n("attn_res_score.weight"), {E}));
          Ly.ffn_res = to_f32(w.require(n("ffn_res_score.weight"), {E}));
        }
        if (!Ly.mla) {
          // Separate q/k/v are required: llama.cpp's K3 graph cannot run a fused attn_qkv,
          // and it loads but never applies attn_{q,k,v}.bias (so neither do we).
          KdaWeights& k = Ly.kda;
          k.conv_q = to_f32(w.require(n("ssm_conv1d_q.weight"), {K, 1, D}));
          k.conv_k = to_f32(w.require(n("ssm_conv1d_k.weight"), {K, 1, D}));
          k.conv_v = to_f32(w.require(n("ssm_conv1d_v.weight"), {K, 1, D}));
          k.wq = w.require(n("attn_q.weight"), {E, D});
          k.wk = w.require(n("attn_k.weight"), {E, D});
          k.wv = w.require(n("attn_v.weight"), {E, D});
          k.f_a = w.require(n("ssm_f_a.weight"), {E, S});
          k.f_b = w.require(n("ssm_f_b.weight"), {S, D});
          k.beta = w.require(n("ssm_beta.weight"), {E, H});
          k.a = to_f32(w.require(n("ssm_a"), {H}));
          k.dt_bias = to_f32(w.require(n("ssm_dt.bias"), {D}));
          k.g = w.require(n("ssm_g.weight"), {E, D});
          k.o_norm = to_f32(w.require(n("ssm_norm.weight"), {S}));
          k.wo = w.require(n("attn_output.weight"), {D, E});
        } else {
          K3MlaWeights& m = Ly.att;
          if (w.has(n("attn_kv_b.weight")))
            bad += fmt::format("\n  {}: the legacy MLA form, which llama.cpp's kimi-k3 graph cannot run "
                               "(needs attn_k_b + attn_v_b)", n("attn_kv_b.weight"));
          if (w.has(n("attn_q_a_norm.weight"))) {
            m.q_a_norm = to_f32(w.require(n("attn_q_a_norm.weight"), {r_q}));
            m.wq_a = w.require(n("attn_q_a.weight"), {E, r_q});
            m.wq_b = w.require(n("attn_q_b.weight"), {r_q, H * (dn + dr)});
          } else {
            m.wq = w.require(n("attn_q.weight"), {E, H * (dn + dr)});
          }
          m.wkv_a = w.require(n("attn_kv_a_mqa.weight"), {E, r_kv + dr});
          m.kv_a_norm = to_f32(w.require(n("attn_kv_a_norm.weight"), {r_kv}));
          m.k_b = w.require(n("attn_k_b.weight"), {dn, r_kv, H});
          m.v_b = w.require(n("attn_v_b.weight"), {r_kv, dv, H});
          m.gate = w.optional(n("attn_gate.weight"), {E, H * dv});
          m.wo = w.require(n("attn_output.weight"), {H * dv, E});
        }
        if (il < c_.n_dense) {
          Ly.ffn_gate = w.require(n("ffn_gate.weight"), {E, c_.n_ff});
          Ly.ffn_up = w.require(n("ffn_up.weight"), {E, c_.n_ff});
          Ly.ffn_down = w.require(n("ffn_down.weight"), {c_.n_ff, E});
        } else {
          Ly.gate_inp = w.require(n("ffn_gate_inp.weight"), {E, c_.n_expert});
          Ly.exp_probs_b = to_f32(w.require(n("exp_probs_b.bias"), {c_.n_expert}));
          w.expect_shape(n("ffn_gate_exps.weight"), {L, c_.n_ff_exp, c_.n_expert});
          w.expect_shape(n("ffn_up_exps.weight"), {L, c_.n_ff_exp, c_.n_expert});
          w.expect_shape(n("ffn_down_exps.weight"), {c_.n_ff_exp, L, c_.n_expert});
          if (c_.latent > 0) {
            Ly.routed_down = w.require(n("ffn_routed_down.weight"), {E, L});
            Ly.routed_up = w.require(n("ffn_routed_up.weight"), {L, E});
            Tensor rn = w.optional(n("ffn_routed_norm.weight"), {L});
            if (rn.valid()) Ly.routed_norm = to_f32(rn);
          }
          Ly.gate_sh = w.optional(n("ffn_gate_shexp.weight"), {E, c_.n_ff_shexp});
          Ly.up_sh = w.optional(n("ffn_up_shexp.weight"), {E, c_.n_ff_shexp});
          Ly.down_sh = w.optional(n("ffn_down_shexp.weight"), {c_.n_ff_shexp, E});
          const bool g = w.has(n("ffn_gate_shexp.weight"));
          if (g != w.has(n("ffn_up_shexp.weight")) || g != w.has(n("ffn_down_shexp.weight")))
            bad += fmt::format("\n  blk.{}: ffn_{{gate,up,down}}_shexp must be all present or all absent", il);
        }
      }
      if (!bad.empty()) return make_error("{}: unsupported kimi-k3 tensors:{}", file.path(), bad);
      return {};
    };
    DF_TRY(bind_checked(file, opts, bind));
    if (opts.check_only) return {};
    {
      const Layer& L0 = layers_[0];
      const DType t = L0.mla ? L0.att.wo.type : L0.kda.wo.type;
      c_.f32_gemm = c_.mla.f32_gemm = t == DType::F16 || t == DType::BF16;
    }
    DF_TRY(attach_experts(file, opts, &experts_, &info_));
    describe("kimi-k3", c_.n_vocab, c_.n_embd, c_.n_layer, c_.n_ctx_train, c_.n_expert, c_.n_used);
    return {};
  }

  std::unique_ptr<SeqState> new_state(int n_ctx) const override {
    auto s = std::make_unique<State>();
    s->n_ctx = n_ctx;
    s->kv.resize(size_t(c_.n_layer));
    s->kda.resize(size_t(c_.n_layer));
    for (int il = 0; il < c_.n_layer; ++il) {
      if (layers_[size_t(il)].mla) {
        s->kv[size_t(il)].init(n_ctx, c_.mla.k_row(), 0);
      } else {
        s->kda[size_t(il)].init(c_.kda, kRollbackWindow);
        s->kda_layers.push_back(il);
      }
    }
    return s;
  }

  // All slices' rows go through the row-wise ops (residual mixes, norms,
  // projections, router, the routed experts' union, output head) together; MLA
  // caches, KDA convolution and recurrent states are per slice.
  Status forward_batch(std::span<const BatchSlice> slices, const ForwardOptions& fo) override {
    DF_TRY(check_batch(slices, c_.n_vocab));
    const BatchRows rows(slices);
    const int n = rows.n;
    const int64_t E = c_.n_embd, ne = int64_t(n) * E;
    const bool use_res = c_.res_block > 0;
    // x: the stream (P in the header comment, updated in place); u: its mix;
    // a: normed layer input; o: block output.
    std::vector<float> x(static_cast<size_t>(ne)), u(x.size()), a(x.size()), o(x.size());
    std::vector<std::vector<float>> R;  // attention-residual checkpoints, each [n, E]
    embed(slices, rows, E, x.data());
    std::vector<AttnSeq> mla_seqs(slices.size());
    std::vector<KdaSeq> kda_seqs(slices.size());

    for (int il = 0; il < c_.n_layer; ++il) {
      DF_TRY(enter_layer(il));
      const Layer& Ly = layers_[size_t(il)];
      const float* in = x.data();
      if (use_res && !R.empty()) {
        res_mix(R, x.data(), Ly.attn_res.data(), n, E, c_.eps, u.data());
        in = u.data();
      }
      const bool banked = use_res && il % c_.res_block == 0;
      if (banked) R.push_back(x);  // the raw stream, not its mix
      rms_norm_rows(in, Ly.attn_norm.data(), E, n, c_.eps, a.data());
      dump("attn_norm", il, rows, a.data(), E);
      // The attention block's intermediates, when a tensor hook is set.
      std::function<void(const char*, const float*, int64_t)> part_dump;
      if (hook_) part_dump = [&](const char* name, const float* t, int64_t width) { dump(name, il, rows, t, width); };
      if (Ly.mla) {
        kv_seqs(slices, rows, il, mla_seqs);
        k3_mla_forward_batch(pool_, c_.mla, Ly.att, mla_seqs, a.data(), n, o.data(), part_dump);
      } else {
        for (size_t i = 0; i < slices.size(); ++i)
          kda_seqs[i] = KdaSeq{&static_cast<State&>(*slices[i].state).kda[size_t(il)], rows.row0[i], slices[i].n};
        kda_forward_batch(pool_, c_.kda, Ly.kda, kda_seqs, a.data(), n, o.data(), part_dump);
      }
      dump("attn_out", il, rows, o.data(), E);
      if (banked) {
        x = o;  // a banked layer restarts the partial stream
      } else {
        for (int64_t i = 0; i < ne; ++i) x[size_t(i)] += o[size_t(i)];
      }
      dump("ffn_inp", il, rows, x.data(), E);

      in = x.data();
      if (use_res) {
        res_mix(R, x.data(), Ly.ffn_res.data(), n, E, c_.eps, u.data());
        in = u.data();
      }
      rms_norm_rows(in, Ly.ffn_norm.data(), E, n, c_.eps, a.data());
      dump("ffn_norm", il, rows, a.data(), E);
      if (il < c_.n_dense) {
        dense_ffn(pool_, Ly.ffn_gate, Ly.ffn_up, Ly.ffn_down, a.data(), n, c_.act, o.data());
      } else {
        DF_TRY(latent_moe(il, Ly, rows, a.data(), o.data(), fo.resident_experts_only));
      }
      dump("ffn_out", il, rows, o.data(), E);
      for (int64_t i = 0; i < ne; ++i) x[size_t(i)] += o[size_t(i)];
      dump("l_out", il, rows, x.data(), E);
      if (il + 1 < c_.n_layer && il + 1 >= c_.n_dense && !fo.resident_experts_only) {
        // The next router reads its layer's ffn mix of the stream; the raw stream
        // stands in for it here (a prediction only).
        DF_TRY(peek_layer(il + 1));
        const Layer& next = layers_[size_t(il + 1)];
        RouterConfig rc = c_.router;
        rc.score_bias = next.exp_probs_b.data();
        predict_next_experts(pool_, *experts_, {il + 1, &next.gate_inp, next.ffn_norm.data(), c_.eps, rc}, x.data(),
                             n, E);
      }
    }
    const float* fin = x.data();
    if (use_res) {
      res_mix(R, x.data(), output_res_.data(), n, E, c_.eps, u.data());
      fin = u.data();
    }
    finish_batch(slices, rows, fin, E, c_.eps, c_.n_vocab);
    return {};
  }

 private:
  // f: [rows.n, n_embd] ffn-normed input; out: [rows.n, n_embd]. resident_only: moe_ffn's.
  Status latent_moe(int il, const Layer& Ly, const BatchRows& rows, const float* f, float* out, bool resident_only) {
    const int n = rows.n;
    const int64_t E = c_.n_embd, L = c_.latent > 0 ? c_.latent : E;
    std::vector<float> xl, rl(size_t(n) * size_t(c_.n_expert)), rw(size_t(n) * size_t(c_.n_used)),
        m(size_t(n) * size_t(L));
    std::vector<int32_t> sel(size_t(n) * size_t(c_.n_used));
    const float* xin = f;
    if (c_.latent > 0) {
      xl.resize(size_t(n) * size_t(L));
      linear(pool_, Ly.routed_down, f, n, xl.data());
      xin = xl.data();
    }
    linear(pool_, Ly.gate_inp, f, n, rl.data(), c_.f32_gemm);  // the router sees the full-width input
    dump("ffn_moe_logits", il, rows, rl.data(), c_.n_expert);
    RouterConfig rc = c_.router;
    rc.score_bias = Ly.exp_probs_b.data();
    route(rc, rl.data(), n, sel.data(), rw.data());
    DF_TRY(moe_ffn(pool_, *experts_, il, xin, n, L, L, c_.n_used, sel.data(), rw.data(), c_.act, m.data(),
                   resident_only));
    // RMSNorm after the routing weights and scale were applied (llama.cpp order).
    if (!Ly.routed_norm.empty()) rms_norm_rows(m.data(), Ly.routed_norm.data(), L, n, c_.eps, m.data());
    dump("ffn_moe_out", il, rows, m.data(), L);  // in the latent width when there is one
    if (c_.latent > 0) {
      linear(pool_, Ly.routed_up, m.data(), n, out);
    } else {
      std::copy(m.begin(), m.end(), out);
    }
    if (Ly.gate_sh.valid()) {
      std::vector<float> sh(size_t(n) * size_t(E));
      dense_ffn(pool_, Ly.gate_sh, Ly.up_sh, Ly.down_sh, f, n, c_.act, sh.data());
      for (size_t i = 0; i < sh.size(); ++i) out[i] += sh[i];
    }
    return {};
  }

  Config c_;
  std::vector<float> output_res_;
  std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> load_kimi_k3(ModelFile& file, LoadOptions& opts) {
  return load_arch<KimiK3>(file, opts);
}

}  // namespace deltafin
