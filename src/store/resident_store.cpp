#include <map>

#include "core/aligned.h"
#include "format/model_file.h"
#include "store/expert_store.h"

namespace deltafin {
namespace {

struct StackedTensor {
  Tensor view;  // 3-D [cols, rows, n_expert]
  AlignedBuffer bytes;
};

class ResidentExpertStore final : public ExpertStore {
 public:
  Status load(ModelFile& file, const std::vector<ExpertLayerInfo>& layers, const ExpertLayout& layout) {
    for (const auto& l : layers) {
      Layer& dst = layers_[l.layer];
      if (!l.gate_name.empty()) DF_TRY(read(file, l.gate_name, layout, &dst.gate));
      DF_TRY(read(file, l.up_name, layout, &dst.up));
      DF_TRY(read(file, l.down_name, layout, &dst.down));
    }
    return {};
  }

  Result<ExpertWeights> acquire(int layer, int expert) override {
    auto it = layers_.find(layer);
    if (it == layers_.end()) return make_error("layer {} has no experts", layer);
    const Layer& l = it->second;
    ExpertWeights w;
    if (l.gate.view.valid()) w.gate = l.gate.view.slice(expert);
    w.up = l.up.view.slice(expert);
    w.down = l.down.view.slice(expert);
    return w;
  }
  void release(int, int) override {}

 private:
  struct Layer {
    StackedTensor gate, up, down;
  };
  static Status read(ModelFile& file, const std::string& name, const ExpertLayout& layout, StackedTensor* out) {
    const TensorRef* ref = file.tensor(name);
    if (!ref) return make_error("{}: missing tensor '{}'", file.path(), name);
    out->bytes = AlignedBuffer(ref->info->bytes);
    DF_TRY(file.read_tensor(*ref, out->bytes.data()));
    out->view.type = ref->info->type;
    for (int d = 0; d < 4; ++d) out->view.ne[d] = ref->info->ne[d];
    out->view.data = out->bytes.data();
    if (layout.converts(out->view)) {
      const Tensor& v = out->view;
      const uint64_t per = v.row_bytes() * uint64_t(v.rows());
      auto* base = static_cast<uint8_t*>(out->bytes.data());
      for (int64_t e = 0; e < v.ne[2]; ++e) layout.convert(v.type, base + e * per, v.rows(), v.cols());
      out->view.panels = true;
    }
    return {};
  }
  std::map<int, Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<ExpertStore>> make_resident_expert_store(
    ModelFile& file, const std::vector<ExpertLayerInfo>& layers, const ExpertLayout& layout) {
  auto s = std::make_unique<ResidentExpertStore>();
  DF_TRY(s->load(file, layers, layout));
  return std::unique_ptr<ExpertStore>(std::move(s));
}

}  // namespace deltafin
