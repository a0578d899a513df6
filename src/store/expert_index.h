// The model index for streaming: every routed expert as three byte ranges of the
// model file (its gate, up and down slices of the stacked expert tensors; each
// slice is contiguous), mapped once at load, plus the size of what is not an
// expert (the resident core). Pure bookkeeping over the tensor directory: no I/O.
#pragma once
#include <cstdint>
#include <vector>

#include "core/result.h"
#include "format/model_file.h"
#include "core/tensor.h"
#include "store/expert_store.h"

namespace deltafin {

enum ExpertPart { kGate = 0, kUp = 1, kDown = 2, kExpertParts = 3 };

// One part of one expert: where its bytes are and how to view them.
struct ExpertSlice {
  int shard = 0;
  uint64_t offset = 0;  // absolute file offset of the slice
  uint64_t bytes = 0;   // 0: the part is absent (no gate)
  Tensor view;          // 2-D shape and type; data == nullptr (filled in by the store)
};

struct ExpertSlices {
  ExpertSlice part[kExpertParts];
  uint64_t bytes() const { return part[0].bytes + part[1].bytes + part[2].bytes; }
};

class ExpertIndex {
 public:
  static Result<ExpertIndex> build(const ModelFile& file, const std::vector<ExpertLayerInfo>& layers);

  // Dense number of a model layer among the MoE layers, or -1.
  int moe_index(int layer) const {
    return layer >= 0 && layer < int(layer_to_moe_.size()) ? layer_to_moe_[size_t(layer)] : -1;
  }
  int n_moe_layers() const { return int(layers_.size()); }
  int n_expert(int moe) const { return layers_[size_t(moe)].n_expert; }
  int model_layer(int moe) const { return layers_[size_t(moe)].layer; }
  // Dense key of (moe layer index, expert): 0 .. n_keys()-1.
  int key(int moe, int expert) const { return first_key_[size_t(moe)] + expert; }
  int n_keys() const { return n_keys_; }
  const ExpertSlices& slices(int key) const { return slices_[size_t(key)]; }
  int key_moe(int key) const;  // inverse of key(): the moe layer index

  uint64_t expert_bytes() const { return expert_bytes_; }  // all experts, on disk
  // Bytes of every tensor that is not a routed expert: what stays resident.
  uint64_t core_bytes() const { return core_bytes_; }

 private:
  std::vector<ExpertLayerInfo> layers_;
  std::vector<int> layer_to_moe_, first_key_;
  std::vector<ExpertSlices> slices_;
  int n_keys_ = 0;
  uint64_t expert_bytes_ = 0, core_bytes_ = 0;
};

}  // namespace deltafin
