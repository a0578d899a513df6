// A loaded model: the resident core weights of one architecture plus an
// ExpertStore for the routed experts, and its forward pass. One implementation per
// architecture (src/model/<arch>.cpp), created through load_model().
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "model/state_io.h"
#include "format/model_file.h"
#include "store/expert_store.h"

namespace deltafin {

class CorePager;  // model/core_pager.h

struct ModelInfo {
  std::string arch;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int n_layer = 0;
  int n_ctx_train = 0;
  int n_expert = 0;
  int n_expert_used = 0;
  uint64_t core_bytes = 0;     // resident non-expert weights
  uint64_t expert_bytes = 0;   // all routed experts
  uint64_t bytes_per_expert = 0;  // gate+up+down of one expert (largest layer)
  int n_moe_layers = 0;
};

// Memory one prompt token takes in a batched forward pass, about: its hidden state,
// norms, attention and FFN temporaries and one output row per routed expert
// ((n_expert_used + 12) x n_embd floats). What a batch of n tokens adds on top of
// the weights and the KV cache is about n times this.
inline uint64_t batch_bytes_per_token(const ModelInfo& mi) {
  return uint64_t(mi.n_expert_used + 12) * uint64_t(mi.n_embd) * sizeof(float);
}

// Per-sequence state: KV caches and recurrent states. n_past tokens are cached.
class SeqState {
 public:
  virtual ~SeqState() = default;
  int n_past = 0;
  int n_ctx = 0;
  // Drops cached positions >= n (rollback after rejected speculation).
  virtual Status truncate(int n) = 0;
  // An independent copy: evaluating tokens into either leaves the other as it was
  // (several sequences continuing one evaluated prompt).
  virtual std::unique_ptr<SeqState> clone() const = 0;
  // The most positions, at most n, that truncate() can keep (0: none; a new state
  // then). KV caches return to any position; a recurrent state only within its
  // rollback window or to where it was pinned.
  virtual int reachable(int n) const { return std::clamp(n, 0, n_past); }
  // Marks the position now as one truncate() can return to (a prompt's end).
  virtual void pin() {}
  // Memory the state takes at most as it fills its context: caches for n_ctx
  // positions, recurrent states with their rollback and pinned copies.
  virtual uint64_t memory_bytes() const = 0;
  // Resizes the position caches to `rows` (n_past <= rows <= n_ctx), keeping what
  // they hold: fit(n_past) shrinks a finished state for a prompt cache in RAM, and
  // fit(n_ctx) makes it whole again before it evaluates more tokens.
  virtual void fit(int rows) = 0;
  // Positions the caches have room for now (n_ctx unless fitted smaller).
  virtual int fitted_rows() const { return n_ctx; }
  // What the state holds as bytes (the positions < n_past and any recurrent state),
  // and back: load() fills a state new_state() made for the same model (any n_ctx that
  // holds n_past), an error naming the mismatch when the bytes do not fit it.
  std::string save() const;
  Status load(std::string_view bytes);

 protected:
  virtual void save_to(StateWriter& w) const = 0;
  virtual bool load_from(StateReader& r) = 0;  // false: the bytes do not fit
};

// One sequence's part of a batched forward pass: `n` tokens evaluated at positions
// state->n_past.. of their own sequence. logits: [n, n_vocab] when all_logits, else
// [n_vocab] for the slice's last token.
struct BatchSlice {
  SeqState* state = nullptr;
  const int32_t* tokens = nullptr;
  int n = 0;
  float* logits = nullptr;
  bool all_logits = false;
};

// How one forward pass runs.
struct ForwardOptions {
  // Self-speculation drafts: every MoE block computes with the routed experts that
  // are in RAM now and skips the others (moe_ffn), and no next-layer prediction is
  // made, so the pass reads nothing from disk.
  bool resident_experts_only = false;
};
// A debugging hook (llama.cpp's eval callback): a forward pass hands it each row of
// its named intermediate tensors, so a mismatch against a reference can be traced to
// a layer. name: llama.cpp's graph name where it has one (attn_norm, Qcur_normed,
// Kcur, Vcur, kqv_out, attn_out, ffn_inp, ffn_norm, ffn_moe_logits, ffn_moe_out,
// ffn_out, l_out); layer: 0-based; pos: the row's position in its sequence (rows of
// several slices of a batch come slice by slice); values: n floats, valid during
// the call only. Called on the thread that runs the pass; without a hook a named
// point costs one branch.
using TensorHook = std::function<void(std::string_view name, int layer, int pos, const float* values, int64_t n)>;

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual std::unique_ptr<SeqState> new_state(int n_ctx) const = 0;
  // What one state of n_ctx positions takes at most (SeqState::memory_bytes).
  // Default: from states of 1 and 2 positions, as every architecture's state is its
  // per-position caches plus a fixed part; so that the size of a state too large to
  // allocate can be told (and refused) without allocating it. Saturates at
  // UINT64_MAX.
  virtual uint64_t state_bytes(int n_ctx) const;
  // Evaluates `n` tokens at positions state.n_past.. and appends them to the state.
  // logits: [n, n_vocab] when all_logits, else [n_vocab] for the last token.
  virtual Status forward(SeqState& state, const int32_t* tokens, int n, float* logits,
                         bool all_logits, const ForwardOptions& fo = {}) = 0;
  // Evaluates several sequences in one pass (continuous batching). Each slice's
  // logits are what forward() on that slice alone gives; architectures that batch
  // run every row-wise op (norms, matmuls, router, routed experts) over all slices'
  // rows at once, so each MoE layer asks the expert store for the union of all
  // sequences' experts once; attention and recurrent state stay per slice. The
  // states must be distinct. Every slice is checked before anything is evaluated: on
  // an error no state has changed. Default: forward() per slice (no sharing).
  virtual Status forward_batch(std::span<const BatchSlice> slices, const ForwardOptions& fo = {});
  // True when forward_batch shares one pass among the slices (not the fallback).
  virtual bool batches() const { return false; }

  // Multi-token prediction with the model's own MTP ("nextn") block, where the file
  // has one (DeepSeek-V3-style GGUFs that keep it).
  virtual bool has_mtp() const { return false; }
  // From now on, passes record what the MTP block needs (each evaluated position's
  // final hidden state) in their states. Called once by the MTP drafter.
  virtual void enable_mtp() {}
  // Up to max_n greedy guesses of the tokens that follow seq (its last token is
  // pending: st.n_past == seq.size() - 1). The trunk's state is unchanged; the MTP
  // block's own cache advances over the positions evaluated since the last call.
  virtual Status mtp_draft(SeqState& st, const std::vector<int32_t>& seq, int max_n, std::vector<int32_t>* out);

  // Hands later passes' named tensors to `hook` (TensorHook; empty: none). Models
  // without named points ignore it.
  virtual void set_tensor_hook(TensorHook hook) {}
};

// An architecture whose forward_batch shares one pass among the slices; forward()
// is its one-slice case.
class BatchedModel : public Model {
 public:
  Status forward(SeqState& st, const int32_t* tokens, int n, float* logits, bool all_logits,
                 const ForwardOptions& fo = {}) final {
    const BatchSlice s{&st, tokens, n, logits, all_logits};
    return forward_batch({&s, 1}, fo);
  }
  bool batches() const final { return true; }
};

struct LoadOptions {
  ThreadPool* pool = nullptr;
  // Expert store to use; when null, experts are loaded resident.
  std::unique_ptr<ExpertStore> experts;
  // Pages streamed core layers as the layer loop reaches each MoE block; null: the
  // core is resident. Not owned; must outlive the model.
  CorePager* pager = nullptr;
  // Only check the metadata and every tensor's presence, shape and type: read no
  // tensor, attach no experts (check_model).
  bool check_only = false;
};

// The stacked expert tensors of a model (for building an expert store) — every
// architecture uses the blk.N.ffn_{gate,up,down}_exps.weight names.
std::vector<ExpertLayerInfo> find_expert_layers(const ModelFile& file);

Result<std::unique_ptr<Model>> load_model(ModelFile& file, LoadOptions opts);

// The checks load_model makes before it reads any tensor (architecture, metadata,
// each tensor's presence, shape and type), without reading one: ok when
// load_model would get as far as reading the weights.
Status check_model(ModelFile& file);

// An error when a row of logits holds a NaN or an infinity: what a file with broken
// weights or hyperparameters computes. Callers check the first logits of a run, so
// that such a model stops with this error rather than printing garbage.
Status check_logits(const float* logits, int64_t n_vocab);

// Supported architectures (general.architecture values), in model/registry.cpp's order.
std::vector<std::string> supported_architectures();

}  // namespace deltafin
