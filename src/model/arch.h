// What the architecture files share: their includes, the loaders they register
// and helpers for the steps every forward pass has (token checks, the output head,
// attaching the expert store).
#pragma once
#include <algorithm>
#include <vector>

#include "core/aligned.h"
#include "model/attention.h"
#include "model/core_pager.h"
#include "model/hparams.h"
#include "model/linear.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/ops.h"
#include "model/weights.h"

namespace deltafin {

// One loader per architecture file.
Result<std::unique_ptr<Model>> load_qwen3moe(ModelFile& file, LoadOptions& opts);
Result<std::unique_ptr<Model>> load_deepseek2(ModelFile& file, LoadOptions& opts);
Result<std::unique_ptr<Model>> load_kimi_k3(ModelFile& file, LoadOptions& opts);
Result<std::unique_ptr<Model>> load_llama(ModelFile& file, LoadOptions& opts);

// Token ids in range and room left in the context.
Status check_tokens(const int32_t* tokens, int n, int64_t n_vocab, const SeqState& st);

// Every slice's tokens (as check_tokens) and no state twice.
Status check_batch(std::span<const BatchSlice> slices, int64_t n_vocab);

// The rows of a batched pass: every slice's tokens back to back.
struct BatchRows {
  int n = 0;                // rows in all
  std::vector<int> row0;    // per slice: its first row
  std::vector<int> pos;     // per row: its position in its own sequence
  explicit BatchRows(std::span<const BatchSlice> slices);
};

// Final norm + output head of a batched pass: each slice's last row (or all its rows)
// through one matmul, scattered into the slices' logits. x: [rows.n, n_embd].
void output_logits_batch(ThreadPool* pool, const float* x, std::span<const BatchSlice> slices,
                         const BatchRows& rows, int64_t n_embd, const float* norm_w, float eps,
                         const Tensor& output, int64_t n_vocab);

// Final norm + output head for the last token or every token. x: [n, n_embd].
void output_logits(ThreadPool* pool, const float* x, int n, int64_t n_embd, const float* norm_w,
                   float eps, const Tensor& output, bool all_logits, float* logits);

// Uses opts.experts if given, else loads every expert resident; fills the expert
// fields of `info`.
Status attach_experts(ModelFile& file, LoadOptions& opts, std::unique_ptr<ExpertStore>* out,
                      ModelInfo* info);

// The state of an architecture whose layers cache K/V rows (or a latent) per position:
// one KVLayer per layer. Rolling back is free: rows past n_past are simply overwritten.
class KvState : public SeqState {
 public:
  std::vector<KVLayer> kv;
  Status truncate(int n) override {
    n_past = std::min(n_past, n);
    return {};
  }
  std::unique_ptr<SeqState> clone() const override { return std::make_unique<KvState>(*this); }
  uint64_t memory_bytes() const override {
    uint64_t b = 0;
    for (const KVLayer& l : kv) b += (l.k.capacity() + l.v.capacity()) * sizeof(uint16_t);
    return b;
  }
  void fit(int rows) override {
    for (KVLayer& l : kv) l.fit(std::clamp(rows, n_past, n_ctx));
  }
  int fitted_rows() const override {
    for (const KVLayer& l : kv)
      if (l.k_row > 0) return l.capacity();
    return n_ctx;
  }

 protected:
  // n_past, then each layer's row widths and its first n_past rows.
  void save_to(StateWriter& w) const override;
  bool load_from(StateReader& r) override;
};

// A KvState with n_layer caches of n_ctx rows, each k_row / v_row values wide.
std::unique_ptr<SeqState> new_kv_state(int n_ctx, int n_layer, int64_t k_row, int64_t v_row);

// Layer il's cache and rows of every slice (states are KvStates), for the batched
// attention blocks (model/mla.h, model/kimi_k3_mla.h). seqs: one per slice.
void kv_seqs(std::span<const BatchSlice> slices, const BatchRows& rows, int il, std::vector<AttnSeq>& seqs);

// What every architecture's model holds besides its layers (token embedding, output
// head, resident buffers, expert store) and the steps of a batched pass that do not
// depend on the layers.
class ArchModel : public BatchedModel {
 public:
  const ModelInfo& info() const override { return info_; }
  void set_tensor_hook(TensorHook hook) override { hook_ = std::move(hook); }

 protected:
  // Binds token_embd [n_embd, n_vocab], output_norm [n_embd] and output [n_embd,
  // n_vocab], which falls back to the token embedding when absent and may_tie.
  // Returns n_vocab (0 when token_embd is missing; w reports it).
  int64_t bind_head(WeightLoader& w, int64_t n_embd, bool may_tie);
  // Takes the loader's buffers as the resident core.
  void keep_weights(WeightLoader& w);
  // Runs bind(WeightLoader&) -> Status twice: over a checking loader that reads
  // nothing, then, when every tensor's presence, shape and type hold and
  // !opts.check_only, over a reading one whose buffers become the resident core.
  // bind must not look at tensor data (a checking loader's tensors have none) and
  // must leave the model as if new when run again.
  template <class F>
  Status bind_checked(ModelFile& file, const LoadOptions& opts, F&& bind) {
    {
      WeightLoader check(file, /*read=*/false);
      const Status s = bind(check);
      DF_TRY(check.finish());  // the loader's problems first: missing tensors explain most others
      DF_TRY(s);
    }
    if (opts.check_only) return {};
    WeightLoader w(file);
    const Status s = bind(w);
    DF_TRY(w.finish());
    DF_TRY(s);
    keep_weights(w);
    return {};
  }
  // The shape fields of info_.
  void describe(const char* arch, int64_t n_vocab, int64_t n_embd, int n_layer, int n_ctx_train, int n_expert,
                int n_used);
  // x[row] = embedding of each slice's tokens. x: [rows.n, n_embd].
  void embed(std::span<const BatchSlice> slices, const BatchRows& rows, int64_t n_embd, float* x) const;
  // Ends a batched pass: every slice's tokens count as cached and its logits come
  // from the final stream x [rows.n, n_embd] through output_norm and output.
  void finish_batch(std::span<const BatchSlice> slices, const BatchRows& rows, const float* x, int64_t n_embd,
                    float eps, int64_t n_vocab);

  // Each row of t [rows.n, width], layer il's tensor `name`, to the tensor hook if
  // one is set (Model::set_tensor_hook). One call per named point of a forward pass.
  void dump(const char* name, int il, const BatchRows& rows, const float* t, int64_t width) const {
    if (!hook_) return;
    for (int r = 0; r < rows.n; ++r) hook_(name, il, rows.pos[size_t(r)], t + size_t(r) * size_t(width), width);
  }

  ModelInfo info_;
  // Layer `layer` starts: when the core streams, the pager waits until the layer's
  // core is in memory and reads the next layers' (model/core_pager.h). Every use of
  // a layer's tensors comes after its enter_layer, or after a peek_layer while
  // the layer before it runs.
  Status enter_layer(int layer) { return pager_ ? pager_->enter(layer) : Status{}; }
  Status peek_layer(int layer) { return pager_ ? pager_->peek(layer) : Status{}; }

  TensorHook hook_;
  ThreadPool* pool_ = nullptr;
  CorePager* pager_ = nullptr;  // not owned; null: the core is resident
  Tensor tok_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<AlignedBuffer> buffers_;
  std::unique_ptr<ExpertStore> experts_;
};

// The loader of an architecture: M{}.load(file, opts).
template <class M>
Result<std::unique_ptr<Model>> load_arch(ModelFile& file, LoadOptions& opts) {
  auto m = std::make_unique<M>();
  DF_TRY(m->load(file, opts));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace deltafin
