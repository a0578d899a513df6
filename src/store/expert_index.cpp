#include "store/expert_index.h"

#include <algorithm>
#include <set>

namespace deltafin {

Result<ExpertIndex> ExpertIndex::build(const ModelFile& file, const std::vector<ExpertLayerInfo>& layers) {
  ExpertIndex ix;
  ix.layers_ = layers;
  std::set<std::string> expert_tensors;
  for (const ExpertLayerInfo& l : layers) {
    if (l.layer < 0) return make_error("{}: expert layer with no index", file.path());
    if (size_t(l.layer) >= ix.layer_to_moe_.size()) ix.layer_to_moe_.resize(size_t(l.layer) + 1, -1);
    if (ix.layer_to_moe_[size_t(l.layer)] >= 0) return make_error("{}: layer {} listed twice", file.path(), l.layer);
    ix.layer_to_moe_[size_t(l.layer)] = int(ix.first_key_.size());
    ix.first_key_.push_back(ix.n_keys_);
    ix.n_keys_ += l.n_expert;
    ix.slices_.resize(size_t(ix.n_keys_));
    const std::string* names[kExpertParts] = {&l.gate_name, &l.up_name, &l.down_name};
    for (int p = 0; p < kExpertParts; ++p) {
      if (names[p]->empty()) {
        if (p == kGate) continue;
        return make_error("{}: layer {} has no {} expert tensor", file.path(), l.layer, p == kUp ? "up" : "down");
      }
      const TensorRef* ref = file.tensor(*names[p]);
      if (!ref) return make_error("{}: missing tensor '{}'", file.path(), *names[p]);
      expert_tensors.insert(*names[p]);
      const GGUFTensorInfo& ti = *ref->info;
      if (ti.ne[2] != l.n_expert || ti.ne[3] != 1)
        return make_error("{}: '{}' holds {} experts, expected {}", file.path(), *names[p], ti.ne[2], l.n_expert);
      Tensor t;
      t.type = ti.type;
      for (int d = 0; d < 4; ++d) t.ne[d] = ti.ne[d];
      const uint64_t per = t.row_bytes() * uint64_t(t.ne[1]);
      if (per * uint64_t(l.n_expert) != ti.bytes)
        return make_error("{}: '{}' is {} bytes, not {} experts of {} bytes", file.path(), *names[p], ti.bytes,
                          l.n_expert, per);
      ix.expert_bytes_ += ti.bytes;
      t.ne[2] = 1;
      for (int e = 0; e < l.n_expert; ++e) {
        ExpertSlice& s = ix.slices_[size_t(ix.first_key_.back() + e)].part[p];
        s.shard = ref->shard;
        s.offset = ref->file_offset + uint64_t(e) * per;
        s.bytes = per;
        s.view = t;
      }
    }
  }
  for (const auto& [name, ref] : file.tensors())
    if (!expert_tensors.count(name)) ix.core_bytes_ += ref.info->bytes;
  return ix;
}

int ExpertIndex::key_moe(int key) const {
  auto it = std::upper_bound(first_key_.begin(), first_key_.end(), key);
  return int(it - first_key_.begin()) - 1;
}

}  // namespace deltafin
