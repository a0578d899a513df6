#include "model/arch.h"

namespace deltafin {

void KvState::save_to(StateWriter& w) const {
  w.pod(int32_t(n_past));
  w.pod(uint32_t(kv.size()));
  for (const KVLayer& l : kv) {
    w.pod(l.k_row);
    w.pod(l.v_row);
    w.span(l.k.data(), size_t(n_past) * size_t(l.k_row));
    w.span(l.v.data(), size_t(n_past) * size_t(l.v_row));
  }
}

bool KvState::load_from(StateReader& r) {
  int32_t np = 0;
  uint32_t nl = 0;
  if (!r.pod(&np) || !r.pod(&nl) || np < 0 || np > n_ctx || nl != kv.size()) return false;
  for (KVLayer& l : kv) {
    int64_t k_row = 0, v_row = 0;
    if (!r.pod(&k_row) || !r.pod(&v_row) || k_row != l.k_row || v_row != l.v_row) return false;
    if (l.k_row > 0 && l.capacity() < np) return false;
    if (!r.span(l.k.data(), size_t(np) * size_t(k_row)) || !r.span(l.v.data(), size_t(np) * size_t(v_row)))
      return false;
  }
  n_past = np;
  return true;
}

std::unique_ptr<SeqState> new_kv_state(int n_ctx, int n_layer, int64_t k_row, int64_t v_row) {
  auto s = std::make_unique<KvState>();
  s->n_ctx = n_ctx;
  s->kv.resize(size_t(n_layer));
  for (auto& kv : s->kv) kv.init(n_ctx, k_row, v_row);
  return s;
}

void kv_seqs(std::span<const BatchSlice> slices, const BatchRows& rows, int il, std::vector<AttnSeq>& seqs) {
  for (size_t i = 0; i < slices.size(); ++i) {
    KvState& st = static_cast<KvState&>(*slices[i].state);
    seqs[i] = AttnSeq{&st.kv[size_t(il)], rows.row0[i], st.n_past, slices[i].n};
  }
}

int64_t ArchModel::bind_head(WeightLoader& w, int64_t n_embd, bool may_tie) {
  const int64_t n_vocab = w.dim("token_embd.weight", 1);
  tok_embd_ = w.require("token_embd.weight", {n_embd, n_vocab});
  output_norm_ = to_f32(w.require("output_norm.weight", {n_embd}));
  if (may_tie) {
    output_ = w.optional("output.weight", {n_embd, n_vocab});
    if (!output_.valid()) output_ = tok_embd_;
  } else {
    output_ = w.require("output.weight", {n_embd, n_vocab});
  }
  return n_vocab;
}

void ArchModel::keep_weights(WeightLoader& w) {
  info_.core_bytes = w.bytes_loaded();
  buffers_ = w.take_buffers();
}

void ArchModel::describe(const char* arch, int64_t n_vocab, int64_t n_embd, int n_layer, int n_ctx_train,
                         int n_expert, int n_used) {
  info_.arch = arch;
  info_.n_vocab = n_vocab;
  info_.n_embd = n_embd;
  info_.n_layer = n_layer;
  info_.n_ctx_train = n_ctx_train;
  info_.n_expert = n_expert;
  info_.n_expert_used = n_used;
}

void ArchModel::embed(std::span<const BatchSlice> slices, const BatchRows& rows, int64_t n_embd, float* x) const {
  for (size_t i = 0; i < slices.size(); ++i)
    for (int t = 0; t < slices[i].n; ++t)
      get_row(tok_embd_, slices[i].tokens[t], &x[size_t(rows.row0[i] + t) * size_t(n_embd)]);
}

void ArchModel::finish_batch(std::span<const BatchSlice> slices, const BatchRows& rows, const float* x,
                             int64_t n_embd, float eps, int64_t n_vocab) {
  for (const BatchSlice& s : slices) s.state->n_past += s.n;
  output_logits_batch(pool_, x, slices, rows, n_embd, output_norm_.data(), eps, output_, n_vocab);
}

}  // namespace deltafin
