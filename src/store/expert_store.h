// The expert path. An MoE layer asks the store for the experts its tokens were
// routed to; the store hands back pinned views of their gate/up/down weights and
// the caller releases them when done. Where the bytes come from (resident RAM, a
// RAM cache over SSD, a disk cache over an HTTP origin) is the store's business.
//
// Thread safety: acquire/release may be called from any thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"

namespace deltafin {

class ModelFile;

// One expert's weights: 2-D views (gate/up: [n_embd, n_ff], down: [n_ff, n_embd]).
// `gate` is invalid for architectures without a gate.
struct ExpertWeights {
  Tensor gate, up, down;
};

// Where a layer's stacked expert tensors live in the model file.
struct ExpertLayerInfo {
  int layer = -1;
  int n_expert = 0;
  std::string gate_name, up_name, down_name;  // gate_name empty if none
};

class ExpertStore {
 public:
  virtual ~ExpertStore() = default;
  // Returns the weights of (layer, expert), pinned until release(). Blocks until the
  // bytes are in memory.
  virtual Result<ExpertWeights> acquire(int layer, int expert) = 0;
  virtual void release(int layer, int expert) = 0;

  // Announces that the caller is about to acquire each of `experts` of `layer` once
  // (an MoE block's union), so that all their reads start now at demand priority.
  // Every requested expert must then be taken exactly once with acquire_any (a
  // plain acquire() makes a claim of its own). Stores that hold everything in RAM
  // ignore it.
  virtual void request(int layer, const int32_t* experts, int n) {}
  // Waits until any of `experts` (n >= 1) is in memory, pins it and returns it;
  // *which is its index in `experts`. Lets a caller compute experts in the order
  // their bytes land. If it fails, the caller's request for the rest of `experts`
  // is dropped as well. Default: the first one.
  virtual Result<ExpertWeights> acquire_any(int layer, const int32_t* experts, int n, int* which) {
    *which = 0;
    return acquire(layer, experts[0]);
  }
  // Hints that `experts` of `layer` will probably be needed soon: reads them at
  // prefetch priority into free cache room, never evicting. No pin, no obligation.
  virtual void prefetch(int layer, const int32_t* experts, int n) {}

  // Next-layer prediction. An MoE block that has just finished layer L may apply
  // layer `layer`'s router to the hidden state and tell the store which experts its
  // tokens will probably route to (predict). The store records the prediction to
  // measure its accuracy against the layer's request() and, where prefetching pays,
  // reads the predicted experts at prefetch priority. wants_prediction() is false
  // when the store has no use for one (everything resident, prefetch off), so that
  // callers skip computing it. Default: no prediction.
  virtual bool wants_prediction(int layer) const { return false; }
  virtual void predict(int layer, const int32_t* experts, int n) {}

  // Pins (layer, expert) and returns true if its bytes are in RAM now; false, at no
  // cost and without counting as a use, if not. Never starts a read (moe_ffn's
  // resident_only, for self-speculation drafts). Default (every expert resident):
  // acquire().
  virtual bool try_acquire_resident(int layer, int expert, ExpertWeights* out) {
    auto r = acquire(layer, expert);
    if (!r.ok()) return false;
    *out = *r;
    return true;
  }
};

// How the resident store lays out an expert's matrices in memory once read: `wanted`
// says whether a part (its type and 2-D shape) is converted, `convert` rewrites a
// part's bytes in place (same size) and the part's view then has Tensor::panels set.
// The model layer passes the kernels' row panels (model/linear.h expert_layout); the
// default keeps the file's bytes. The streaming store reads the file's bytes into its
// slots and converts only the experts that prove hot there (store/ram_cache.h): the
// panel kernels give the same bits over either (kernels/panels.h), so results never
// depend on where an expert's bytes came from.
struct ExpertLayout {
  bool (*wanted)(DType type, int64_t rows, int64_t cols) = nullptr;
  void (*convert)(DType type, void* data, int64_t rows, int64_t cols) = nullptr;
  bool converts(const Tensor& view) const {
    return wanted != nullptr && convert != nullptr && wanted(view.type, view.rows(), view.cols());
  }
};

// Everything resident: reads each layer's stacked expert tensors into RAM at load.
Result<std::unique_ptr<ExpertStore>> make_resident_expert_store(
    ModelFile& file, const std::vector<ExpertLayerInfo>& layers, const ExpertLayout& layout = {});

}  // namespace deltafin
