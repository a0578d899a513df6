// deepseek2: DeepSeek-V2/V3/R1 and Kimi K2, as llama.cpp's src/models/deepseek2.cpp.
//   x = embed(tokens)
//   per layer: x = x + MLA(rms(x))                      (model/mla.h: absorbed or legacy form)
//              h = rms(x)
//              l < n_dense:  x = x + down(silu(gate h) * up h)
//              otherwise:    x = x + MoE(h) + shared(h)
//                MoE: sigmoid (or softmax) router; selection on probs + exp_probs_b,
//                limited to the best expert groups (sum of each group's top 2);
//                weights = unbiased probs, optionally normalised, times routed_scale
//   logits = output(rms(x))   (output falls back to the token embedding)
// YaRN: llama.cpp cancels the magnitude factor inside RoPE and puts mscale^2 into
// the KQ scale instead (ARCHITECTURES.md 7.d.1); see kq_scale below.
// MTP (nextn, a drafter only): block N after the N trunk layers, as llama.cpp's
// graph_mtp: x = eh_proj([enorm(embed(t+1)) | hnorm(h_t)]), one MoE layer with its own
// latent cache, then shared_head_norm (else output_norm) and the output head; h_t is
// the trunk's final stream after output_norm, and a chained guess feeds the block's
// own normed output back as h.
#include <fmt/format.h>

#include <cmath>

#include "model/arch.h"
#include "model/mla.h"

namespace deltafin {
namespace {

struct Config {
  int n_layer = 0, n_ctx_train = 0;
  int64_t n_embd = 0, n_vocab = 0;
  MlaShape mla;
  int n_dense = 0;          // leading dense layers
  int64_t n_ff = 0;         // dense FFN width
  int64_t n_ff_exp = 0;     // routed expert width; shared experts are n_ff_exp * n_shared wide
  int n_shared = 0;
  float eps = 1e-6f;
  RouterConfig router;
};

struct Layer {
  std::vector<float> attn_norm, ffn_norm;
  MlaWeights att;
  Tensor ffn_gate, ffn_up, ffn_down;   // dense layers
  Tensor gate_inp;                     // MoE layers
  std::vector<float> exp_probs_b;      // selection bias (may be empty)
  Tensor gate_sh, up_sh, down_sh;      // shared experts
};

// The MTP block's own tensors (its layer is a Layer).
struct Nextn {
  Tensor eh_proj;                            // [2 n_embd] -> n_embd
  std::vector<float> enorm, hnorm, head_norm;  // head_norm: shared_head_norm, else output_norm
  Tensor embed, head;                        // nextn.embed_tokens / shared_head_head, else the trunk's
};

// A sequence's caches: the trunk's layers, then the MTP block's latent cache, and
// the trunk's final hidden rows the MTP block has not consumed yet.
class Ds2State final : public KvState {
 public:
  int64_t n_embd = 0;
  std::vector<float> h;  // rows of positions [h_pos0, h_pos0 + rows()), after output_norm
  int h_pos0 = 0;
  int mtp_len = 0;       // MTP cache entries 0 .. mtp_len - 1 built from the true stream and tokens
  int rows() const { return int(h.size() / size_t(n_embd)); }
  Status truncate(int n) override {
    n_past = std::min(n_past, n);
    mtp_len = std::min(mtp_len, n);
    h.resize(size_t(std::clamp(n - h_pos0, 0, rows())) * size_t(n_embd));
    return {};
  }
  std::unique_ptr<SeqState> clone() const override { return std::make_unique<Ds2State>(*this); }
  uint64_t memory_bytes() const override { return KvState::memory_bytes() + h.capacity() * sizeof(float); }

 protected:
  void save_to(StateWriter& w) const override {
    KvState::save_to(w);
    w.pod(n_embd);
    w.pod(int32_t(h_pos0));
    w.pod(int32_t(mtp_len));
    w.vec(h);
  }
  bool load_from(StateReader& r) override {
    int64_t e = 0;
    int32_t pos0 = 0, len = 0;
    if (!KvState::load_from(r) || !r.pod(&e) || e != n_embd || !r.pod(&pos0) || !r.pod(&len) ||
        !r.vec(&h, size_t(n_ctx) * size_t(n_embd)) || h.size() % size_t(n_embd) != 0)
      return false;
    h_pos0 = pos0;
    mtp_len = len;
    return pos0 >= 0 && len >= 0 && len <= n_past && pos0 + rows() <= n_past;
  }
};

class DeepSeek2 final : public ArchModel {
 public:
  Status load(ModelFile& file, LoadOptions& opts) {
    pool_ = opts.pool;
    pager_ = opts.pager;
    DF_TRY(load_config(file));
    DF_TRY(bind_checked(file, opts, [&](WeightLoader& w) { return bind(w, file); }));
    if (opts.check_only) return {};
    DF_TRY(attach_experts(file, opts, &experts_, &info_));
    describe("deepseek2", c_.n_vocab, c_.n_embd, c_.n_layer, c_.n_ctx_train, c_.router.n_expert, c_.router.n_used);
    return {};
  }

  std::unique_ptr<SeqState> new_state(int n_ctx) const override {
    if (!has_mtp()) return new_kv_state(n_ctx, c_.n_layer, c_.mla.k_row(), c_.mla.v_row());
    auto s = std::make_unique<Ds2State>();
    s->n_ctx = n_ctx;
    s->n_embd = c_.n_embd;
    s->kv.resize(size_t(c_.n_layer) + 1);
    for (auto& kv : s->kv) kv.init(n_ctx, c_.mla.k_row(), c_.mla.v_row());
    return s;
  }

  bool has_mtp() const override { return has_mtp_; }
  void enable_mtp() override { record_ = has_mtp(); }

  Status mtp_draft(SeqState& state, const std::vector<int32_t>& seq, int max_n, std::vector<int32_t>* out) override {
    if (!has_mtp()) return Model::mtp_draft(state, seq, max_n, out);
    auto& st = static_cast<Ds2State&>(state);
    const int P = st.n_past;
    const int64_t E = c_.n_embd;
    if (int(seq.size()) != P + 1 || max_n < 1 || P < 1) return {};
    max_n = std::min(max_n, st.n_ctx - P);  // chained entries stay inside the cache
    if (max_n < 1) return {};
    // Catch up: one entry per trunk position not yet in the MTP cache, each from the
    // trunk's hidden row there and the token that followed. Rows recorded from a
    // later start (recording switched on mid-sequence) leave older entries unset.
    if (st.mtp_len < st.h_pos0) st.mtp_len = st.h_pos0;
    const int m = P - st.mtp_len;
    if (m < 1 || st.h_pos0 + st.rows() != P) return {};
    std::vector<float> logits(static_cast<size_t>(c_.n_vocab)), h_last(static_cast<size_t>(E));
    DF_TRY(mtp_block(st, st.mtp_len, m, &st.h[size_t(st.mtp_len - st.h_pos0) * size_t(E)], &seq[size_t(st.mtp_len) + 1],
                     logits.data(), h_last.data()));
    st.mtp_len = P;
    st.h.clear();
    st.h_pos0 = P;
    // Chain: each guess and the block's own output make the next entry (positions P..,
    // overwritten by the true ones on the next call).
    for (int i = 0;; ++i) {
      const int32_t d = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out->push_back(d);
      if (i + 1 >= max_n) break;
      std::vector<float> h_in = h_last;
      DF_TRY(mtp_block(st, P + i, 1, h_in.data(), &d, logits.data(), h_last.data()));
    }
    return {};
  }

  // All slices' rows go through the row-wise ops (projections, norms, router, the
  // routed experts' union, shared experts, output head) together; RoPE positions,
  // the latent cache and attention are per slice (mla_forward_batch).
  Status forward_batch(std::span<const BatchSlice> slices, const ForwardOptions& fo) override {
    DF_TRY(check_batch(slices, c_.n_vocab));
    const BatchRows rows(slices);
    const int n = rows.n;
    const int64_t E = c_.n_embd;
    const int K = c_.router.n_used;
    std::vector<float> x(size_t(n) * size_t(E)), h(size_t(n) * size_t(E)), o(size_t(n) * size_t(E)),
        sh(size_t(n) * size_t(E)), rl(size_t(n) * size_t(c_.router.n_expert)), rw(size_t(n) * size_t(K));
    std::vector<int32_t> sel(size_t(n) * size_t(K));
    embed(slices, rows, E, x.data());
    std::vector<AttnSeq> seqs(slices.size());

    for (int il = 0; il < c_.n_layer; ++il) {
      DF_TRY(enter_layer(il));
      const Layer& L = layers_[size_t(il)];
      kv_seqs(slices, rows, il, seqs);
      rms_norm_rows(x.data(), L.attn_norm.data(), E, n, c_.eps, h.data());
      dump("attn_norm", il, rows, h.data(), E);
      mla_forward_batch(pool_, c_.mla, L.att, seqs, h.data(), n, o.data());
      dump("attn_out", il, rows, o.data(), E);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      dump("ffn_inp", il, rows, x.data(), E);

      rms_norm_rows(x.data(), L.ffn_norm.data(), E, n, c_.eps, h.data());
      dump("ffn_norm", il, rows, h.data(), E);
      if (il < c_.n_dense) {
        dense_ffn(pool_, L.ffn_gate, L.ffn_up, L.ffn_down, h.data(), n, {}, o.data());
      } else {
        linear(pool_, L.gate_inp, h.data(), n, rl.data());
        dump("ffn_moe_logits", il, rows, rl.data(), c_.router.n_expert);
        RouterConfig rc = c_.router;
        rc.score_bias = L.exp_probs_b.empty() ? nullptr : L.exp_probs_b.data();
        route(rc, rl.data(), n, sel.data(), rw.data());
        DF_TRY(moe_ffn(pool_, *experts_, il, h.data(), n, E, E, K, sel.data(), rw.data(), {}, o.data(),
                       fo.resident_experts_only));
        dump("ffn_moe_out", il, rows, o.data(), E);
        dense_ffn(pool_, L.gate_sh, L.up_sh, L.down_sh, h.data(), n, {}, sh.data());
        dump("ffn_shexp", il, rows, sh.data(), E);
        for (size_t i = 0; i < o.size(); ++i) o[i] += sh[i];  // moe_out + ffn_shexp, then + residual
      }
      dump("ffn_out", il, rows, o.data(), E);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      dump("l_out", il, rows, x.data(), E);
      if (il + 1 < c_.n_layer && il + 1 >= c_.n_dense) {
        DF_TRY(peek_layer(il + 1));
        const Layer& next = layers_[size_t(il + 1)];
        RouterConfig rc = c_.router;
        rc.score_bias = next.exp_probs_b.empty() ? nullptr : next.exp_probs_b.data();
        predict_next_experts(pool_, *experts_, {il + 1, &next.gate_inp, next.ffn_norm.data(), c_.eps, rc}, x.data(),
                             n, E);
      }
    }
    if (record_) record_hidden(slices, rows, x.data());
    finish_batch(slices, rows, x.data(), E, c_.eps, c_.n_vocab);
    return {};
  }

 private:
  // Appends each slice's final hidden rows (after output_norm, as llama.cpp hands
  // them to its MTP graph) to its state, for the MTP block to consume.
  void record_hidden(std::span<const BatchSlice> slices, const BatchRows& rows, const float* x) const {
    const int64_t E = c_.n_embd;
    for (size_t i = 0; i < slices.size(); ++i) {
      auto& st = static_cast<Ds2State&>(*slices[i].state);
      if (st.h_pos0 + st.rows() != st.n_past) {  // not contiguous (cannot happen through truncate): restart
        st.h.clear();
        st.h_pos0 = st.n_past;
      }
      if (st.rows() == 0) st.h_pos0 = st.n_past;
      const size_t at = st.h.size();
      st.h.resize(at + size_t(slices[i].n) * size_t(E));
      rms_norm_rows(&x[size_t(rows.row0[i]) * size_t(E)], output_norm_.data(), E, slices[i].n, c_.eps, &st.h[at]);
    }
  }

  // The MTP block over m rows at positions pos0..: h_in [m, n_embd] (normed trunk or
  // block output), toks the tokens that follow each position. Writes the last row's
  // logits [n_vocab] and its normed output [n_embd] (the next chained h).
  Status mtp_block(Ds2State& st, int pos0, int m, const float* h_in, const int32_t* toks, float* logits,
                   float* h_last) {
    const int64_t E = c_.n_embd;
    const int K = c_.router.n_used;
    DF_TRY(enter_layer(c_.n_layer));  // the MTP block's tensors are layer n_layer's
    const Layer& L = mtp_layer_;
    std::vector<float> cat(size_t(m) * size_t(2 * E)), e(static_cast<size_t>(E)), x(size_t(m) * size_t(E)), h(x.size()),
        o(x.size()), sh(x.size()), rl(size_t(m) * size_t(c_.router.n_expert)), rw(size_t(m) * size_t(K));
    std::vector<int32_t> sel(size_t(m) * size_t(K));
    const Tensor& emb = nextn_.embed.valid() ? nextn_.embed : tok_embd_;
    for (int r = 0; r < m; ++r) {
      float* c = &cat[size_t(r) * size_t(2 * E)];
      get_row(emb, toks[r], e.data());
      rms_norm(e.data(), nextn_.enorm.data(), E, c_.eps, c);
      rms_norm(&h_in[size_t(r) * size_t(E)], nextn_.hnorm.data(), E, c_.eps, c + E);
    }
    linear(pool_, nextn_.eh_proj, cat.data(), m, x.data());
    rms_norm_rows(x.data(), L.attn_norm.data(), E, m, c_.eps, h.data());
    const AttnSeq seq{&st.kv[size_t(c_.n_layer)], 0, pos0, m};
    mla_forward_batch(pool_, c_.mla, L.att, {&seq, 1}, h.data(), m, o.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    rms_norm_rows(x.data(), L.ffn_norm.data(), E, m, c_.eps, h.data());
    linear(pool_, L.gate_inp, h.data(), m, rl.data());
    RouterConfig rc = c_.router;
    rc.score_bias = L.exp_probs_b.empty() ? nullptr : L.exp_probs_b.data();
    route(rc, rl.data(), m, sel.data(), rw.data());
    DF_TRY(moe_ffn(pool_, *experts_, c_.n_layer, h.data(), m, E, E, K, sel.data(), rw.data(), {}, o.data(),
                   /*resident_only=*/false));
    dense_ffn(pool_, L.gate_sh, L.up_sh, L.down_sh, h.data(), m, {}, sh.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i] + sh[i];
    const float* last = &x[size_t(m - 1) * size_t(E)];
    rms_norm(last, nextn_.head_norm.data(), E, c_.eps, h_last);
    output_logits(pool_, last, 1, E, nextn_.head_norm.data(), c_.eps, nextn_.head.valid() ? nextn_.head : output_,
                  false, logits);
    return {};
  }

  Status load_config(ModelFile& file) {
    const GGUFFile& m = file.meta();
    HParams hp(m, "deepseek2", file.path());
    const int n_layer_all = int(hp.req_int("block_count", 1, kMaxLayers));
    c_.n_ctx_train = int(hp.req_int("context_length", 0, kMaxContext));
    c_.n_embd = hp.req_int("embedding_length", 1, kMaxDim);
    const int n_head = int(hp.req_int("attention.head_count", 1, kMaxDim));
    c_.eps = float(hp.req_positive("attention.layer_norm_rms_epsilon"));
    const int r_kv = int(hp.req_int("attention.kv_lora_rank", 1, kMaxDim));
    const int n_expert = int(hp.req_int("expert_count", 1, kMaxDim));
    const int n_used = int(hp.req_int("expert_used_count", 1, kMaxDim));
    c_.n_shared = int(hp.req_int("expert_shared_count", 1, kMaxDim));
    if (!hp.has("expert_feed_forward_length")) hp.req_int("expert_feed_forward_length");  // reports it
    DF_TRY(hp.finish());

    // MTP ("nextn") blocks are appended after the trunk and are not part of this pass.
    n_nextn_ = int(hp.int_or("nextn_predict_layers", 0));
    c_.n_layer = n_layer_all - n_nextn_;
    if (n_nextn_ < 0 || c_.n_layer <= 0) {
      hp.fail("nextn_predict_layers must be at least 0 and smaller than block_count");
      return hp.finish();
    }
    // The vocabulary size only feeds llama.cpp's model-family heuristics below.
    int64_t vocab = hp.int_or("vocab_size", 0);
    if (vocab == 0)
      if (const GGUFValue* toks = m.find("tokenizer.ggml.tokens")) vocab = int64_t(toks->array_size());

    // "Lite" models (DeepSeek-V2-Lite and relatives) have no q-LoRA; llama.cpp then
    // does not even read q_lora_rank.
    const bool lite = c_.n_layer == 26 || c_.n_layer == 27 || (c_.n_layer == 48 && vocab == 128256);
    MlaShape& s = c_.mla;
    s.n_head = n_head;
    s.r_kv = r_kv;
    s.eps = c_.eps;
    if (!lite) s.r_q = int(hp.req_int("attention.q_lora_rank"));

    // The form of attention follows the metadata: both *_mla lengths present means
    // the absorbed form (wk_b/wv_b, latent cache, MQA with key_length = r_kv + d_rope).
    const int64_t head_k = hp.int_or("attention.key_length", c_.n_embd / std::max(1, n_head));
    const int64_t head_v = hp.int_or("attention.value_length", c_.n_embd / std::max(1, n_head));
    const int64_t k_mla = hp.int_or("attention.key_length_mla", 0);
    const int64_t v_mla = hp.int_or("attention.value_length_mla", 0);
    const int n_head_kv = int(hp.int_or("attention.head_count_kv", n_head));
    if ((k_mla == 0) != (v_mla == 0))
      hp.fail("attention.key_length_mla and attention.value_length_mla must be given together");
    s.absorbed = k_mla != 0 && v_mla != 0;
    const int64_t d_qk = s.absorbed ? k_mla : head_k;
    s.d_v = int(s.absorbed ? v_mla : head_v);
    s.d_rope = int(hp.int_or("rope.dimension_count", head_k));
    s.d_nope = int(d_qk) - s.d_rope;
    if (s.d_nope < 1 || s.d_rope < 2 || s.d_rope % 2 != 0)
      hp.fail(fmt::format("rope.dimension_count {} must be even and smaller than the q/k head size {}", s.d_rope,
                          d_qk));
    if (s.absorbed) {
      if (n_head_kv != 1)
        hp.fail(fmt::format("attention.head_count_kv is {}; the absorbed MLA form (key_length_mla set) needs 1",
                            n_head_kv));
      if (head_k != int64_t(r_kv) + s.d_rope || head_v != r_kv)
        hp.fail(fmt::format("attention.key_length/value_length are {}/{}; the absorbed MLA form needs "
                            "kv_lora_rank + rope.dimension_count = {} and kv_lora_rank = {}",
                            head_k, head_v, int64_t(r_kv) + s.d_rope, r_kv));
    } else if (n_head_kv != n_head) {
      hp.fail(fmt::format("attention.head_count_kv is {}; the legacy MLA form (attn_kv_b) needs head_count = {}",
                          n_head_kv, n_head));
    }
    if (n_head <= 0 || r_kv <= 0 || s.d_v <= 0) hp.fail("head_count, kv_lora_rank and the value length must be > 0");

    c_.n_ff_exp = hp.per_layer_int("expert_feed_forward_length", n_layer_all, 0).at(0);
    c_.n_dense = int(hp.int_or("leading_dense_block_count", 0));
    if (c_.n_dense > 0) {
      if (!hp.has("feed_forward_length")) hp.fail("leading dense layers need feed_forward_length");
      c_.n_ff = hp.per_layer_int("feed_forward_length", n_layer_all, 0).at(0);
    }
    if (c_.n_dense > c_.n_layer) hp.fail("leading_dense_block_count exceeds the layer count");

    // Routing.
    RouterConfig& rc = c_.router;
    rc.n_expert = n_expert;
    rc.n_used = n_used;
    rc.norm_weights = hp.bool_or("expert_weights_norm", false);
    rc.weights_scale = float(hp.float_or("expert_weights_scale", 0.0));
    int gating = int(hp.int_or("expert_gating_func", 0));
    if (gating == 0)  // absent: DeepSeek-V2 files (softmax), GLM-4.7-lite (sigmoid)
      gating = ((c_.n_layer == 47 || c_.n_layer == 48) && vocab == 154880) ? 2 : 1;
    if (gating == 1) rc.gating = Gating::Softmax;
    else if (gating == 2) rc.gating = Gating::Sigmoid;
    else hp.fail(fmt::format("expert_gating_func {} is not supported (1 softmax, 2 sigmoid)", gating));
    const int n_group = int(hp.int_or("expert_group_count", 0));
    rc.n_group = std::max(1, n_group);
    rc.n_group_used = int(hp.int_or("expert_group_used_count", 0));
    if (n_expert <= 0 || n_used <= 0 || n_used > n_expert)
      hp.fail("expert_count and expert_used_count must satisfy 0 < used <= count");
    if (n_group >= n_expert && n_expert > 0) hp.fail("expert_group_count must be smaller than expert_count");
    if (n_group > 1) {
      if (n_expert % n_group != 0) hp.fail("expert_count must be a multiple of expert_group_count");
      if (n_expert / n_group < 2) hp.fail("expert groups need at least 2 experts each (groups are scored by their top 2)");
      if (rc.n_group_used <= 0 || rc.n_group_used >= n_group)
        hp.fail("expert_group_used_count must satisfy 0 < used < expert_group_count");
    }
    if (c_.n_shared <= 0) hp.fail("expert_shared_count must be > 0 (MoE layers have shared experts)");

    // RoPE and the KQ scale. llama.cpp's yarn_log_multiplier for deepseek2 is stored
    // x0.1 by the converter and divided back on load.
    const float log_mul = float(hp.float_or("rope.scaling.yarn_log_multiplier", 0.0)) / 0.1f;
    s.rope = hp.rope(s.d_rope, /*neox=*/false, c_.n_ctx_train, log_mul);
    // First undo the cancellation of ggml's YaRN magnitude that the context applied
    // to attn_factor, then scale KQ by mscale^2 (ARCHITECTURES.md 7.c). float math as there.
    const float attn_factor_org = s.rope.attn_factor * (1.0f + 0.1f * std::log(1.0f / s.rope.freq_scale));
    const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * std::log(1.0f / s.rope.freq_scale));
    s.kq_scale = 1.0f * mscale * mscale / std::sqrt(float(d_qk));

    s.temp_scale = float(hp.float_or("attention.temperature_scale", 0.0));
    s.temp_length = int(hp.int_or("attention.temperature_length", 0));
    if (s.temp_scale != 0.0f && s.temp_length <= 0)
      hp.fail("attention.temperature_scale needs attention.temperature_length > 0");
    return hp.finish();
  }

  // Layer il's tensors (a dense FFN when dense, else router, experts' shapes and
  // shared experts).
  Status load_layer(WeightLoader& w, const ModelFile& file, int il, bool dense, Layer* out) {
    const MlaShape& s = c_.mla;
    const int64_t E = c_.n_embd, H = s.n_head, dqk = s.d_qk(), NE = c_.router.n_expert;
    const int64_t F = c_.n_ff_exp, FS = c_.n_ff_exp * c_.n_shared;
    Layer& L = *out;
    MlaWeights& A = L.att;
    auto n = [&](const char* x) { return layer_name(il, x); };
    L.attn_norm = to_f32(w.require(n("attn_norm.weight"), {E}));
    if (s.r_q > 0) {
      A.wq_a = w.require(n("attn_q_a.weight"), {E, s.r_q});
      A.q_a_norm = to_f32(w.require(n("attn_q_a_norm.weight"), {s.r_q}));
      A.wq_b = w.require(n("attn_q_b.weight"), {s.r_q, H * dqk});
    } else {
      A.wq = w.require(n("attn_q.weight"), {E, H * dqk});
    }
    A.wkv_a = w.require(n("attn_kv_a_mqa.weight"), {E, int64_t(s.r_kv) + s.d_rope});
    A.kv_a_norm = to_f32(w.require(n("attn_kv_a_norm.weight"), {s.r_kv}));
    if (s.absorbed) {
      A.wk_b = w.require(n("attn_k_b.weight"), {s.d_nope, s.r_kv, H});
      A.wv_b = w.require(n("attn_v_b.weight"), {s.r_kv, s.d_v, H});
    } else {
      A.wkv_b = w.require(n("attn_kv_b.weight"), {s.r_kv, H * (s.d_nope + s.d_v)});
    }
    A.wo = w.require(n("attn_output.weight"), {H * s.d_v, E});
    L.ffn_norm = to_f32(w.require(n("ffn_norm.weight"), {E}));
    if (dense) {
      L.ffn_gate = w.require(n("ffn_gate.weight"), {E, c_.n_ff});
      L.ffn_up = w.require(n("ffn_up.weight"), {E, c_.n_ff});
      L.ffn_down = w.require(n("ffn_down.weight"), {c_.n_ff, E});
      return {};
    }
    L.gate_inp = w.require(n("ffn_gate_inp.weight"), {E, NE});
    const Tensor bias = w.optional(n("exp_probs_b.bias"), {NE});
    if (bias.valid()) L.exp_probs_b = to_f32(bias);
    if (w.has(n("ffn_gate_up_exps.weight")))
      return make_error("{}: {} (fused gate+up experts) is not supported yet", file.path(),
                        n("ffn_gate_up_exps.weight"));
    w.expect_shape(n("ffn_gate_exps.weight"), {E, F, NE});
    w.expect_shape(n("ffn_up_exps.weight"), {E, F, NE});
    w.expect_shape(n("ffn_down_exps.weight"), {F, E, NE});
    L.gate_sh = w.require(n("ffn_gate_shexp.weight"), {E, FS});
    L.up_sh = w.require(n("ffn_up_shexp.weight"), {E, FS});
    L.down_sh = w.require(n("ffn_down_shexp.weight"), {FS, E});
    return {};
  }

  // Every tensor's name and shape (bind_checked).
  Status bind(WeightLoader& w, const ModelFile& file) {
    const int64_t E = c_.n_embd;
    c_.n_vocab = bind_head(w, E, /*may_tie=*/true);
    layers_.assign(size_t(c_.n_layer), Layer{});
    mtp_layer_ = Layer{};
    nextn_ = Nextn{};
    has_mtp_ = false;
    for (int il = 0; il < c_.n_layer; ++il) DF_TRY(load_layer(w, file, il, il < c_.n_dense, &layers_[size_t(il)]));
    // One MTP block (llama.cpp's graph_mtp supports one): loaded when the file has it.
    const int il = c_.n_layer;
    if (n_nextn_ == 1 && w.has(layer_name(il, "nextn.eh_proj.weight"))) {
      DF_TRY(load_layer(w, file, il, false, &mtp_layer_));
      has_mtp_ = true;  // also when the model is only checked (bind_checked: no data)
      auto n = [&](const char* x) { return layer_name(il, x); };
      nextn_.eh_proj = w.require(n("nextn.eh_proj.weight"), {2 * E, E});
      nextn_.enorm = to_f32(w.require(n("nextn.enorm.weight"), {E}));
      nextn_.hnorm = to_f32(w.require(n("nextn.hnorm.weight"), {E}));
      const Tensor hn = w.optional(n("nextn.shared_head_norm.weight"), {E});
      nextn_.head_norm = hn.valid() ? to_f32(hn) : output_norm_;
      nextn_.embed = w.optional(n("nextn.embed_tokens.weight"), {E, c_.n_vocab});
      nextn_.head = w.optional(n("nextn.shared_head_head.weight"), {E, c_.n_vocab});
    }
    return {};
  }

  Config c_;
  std::vector<Layer> layers_;
  int n_nextn_ = 0;   // MTP blocks in the file (nextn_predict_layers)
  Layer mtp_layer_;   // the first one's layer, and its own tensors (when loaded)
  Nextn nextn_;
  bool has_mtp_ = false;  // the MTP block is bound (its tensors may have no data when only checked)
  bool record_ = false;  // enable_mtp(): passes record the final hidden rows
};

}  // namespace

Result<std::unique_ptr<Model>> load_deepseek2(ModelFile& file, LoadOptions& opts) {
  return load_arch<DeepSeek2>(file, opts);
}

}  // namespace deltafin
