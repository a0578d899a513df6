// Binds named GGUF tensors to the model's weight views with shape checks, reading
// them into owned aligned memory. Problems (missing tensors, wrong shapes, types
// without kernels, one line per type) are collected so that one error lists all of them.
// A checking loader (read = false) reads nothing: every tensor it returns is
// invalid (no data) and to_f32() of one is empty. Architectures bind their weights
// twice, checking first (ArchModel::bind_checked), so that no tensor is read before
// every name, shape and type is known to be right.
#pragma once
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "core/result.h"
#include "format/model_file.h"
#include "core/tensor.h"

namespace deltafin {

class WeightLoader {
 public:
  explicit WeightLoader(ModelFile& file, bool read = true) : file_(file), read_(read) {}
  bool reads() const { return read_; }
  // Required tensor with the given shape (trailing 1s may be omitted).
  Tensor require(const std::string& name, std::initializer_list<int64_t> shape);
  // Optional: an invalid Tensor if absent; still shape-checked if present.
  Tensor optional(const std::string& name, std::initializer_list<int64_t> shape);
  // Checks a stacked expert tensor's shape without reading it.
  void expect_shape(const std::string& name, std::initializer_list<int64_t> shape);
  // Size of dimension d of a tensor, 0 if the tensor is absent.
  int64_t dim(const std::string& name, int d) const {
    const TensorRef* r = file_.tensor(name);
    return r ? r->info->ne[d] : 0;
  }
  bool has(const std::string& name) const { return file_.tensor(name) != nullptr; }
  // An error listing every problem seen, or ok.
  Status finish() const;
  uint64_t bytes_loaded() const { return bytes_; }
  std::vector<AlignedBuffer> take_buffers() { return std::move(buffers_); }

 private:
  Tensor load(const std::string& name, std::initializer_list<int64_t> shape, bool required, bool read);
  ModelFile& file_;
  bool read_ = true;
  std::vector<std::string> missing_, problems_;
  struct Uncomputed {
    int count = 0;
    std::string example;  // the first tensor seen of the type
  };
  std::map<std::string, Uncomputed> uncomputed_;  // by type name: tensors deltafin has no kernels for
  std::vector<AlignedBuffer> buffers_;
  uint64_t bytes_ = 0;
};

std::string layer_name(int layer, const char* suffix);  // "blk.N.suffix"

}  // namespace deltafin
