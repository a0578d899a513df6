#include "model/weights.h"

#include <fmt/format.h>

#include "kernels/types.h"

namespace deltafin {

std::string layer_name(int layer, const char* suffix) { return fmt::format("blk.{}.{}", layer, suffix); }

Tensor WeightLoader::load(const std::string& name, std::initializer_list<int64_t> shape, bool required,
                          bool read) {
  Tensor t;
  const TensorRef* ref = file_.tensor(name);
  if (!ref) {
    if (required) missing_.push_back(name);
    return t;
  }
  const GGUFTensorInfo& info = *ref->info;
  int d = 0;
  bool ok = true;
  for (int64_t n : shape) ok &= info.ne[d++] == n;
  for (; d < kMaxDims; ++d) ok &= info.ne[d] == 1;
  if (!ok) {
    std::string want, got;
    for (int64_t n : shape) want += fmt::format("{}{}", want.empty() ? "" : ", ", n);
    for (uint32_t k = 0; k < info.n_dims; ++k) got += fmt::format("{}{}", k ? ", " : "", info.ne[k]);
    problems_.push_back(fmt::format("tensor '{}' has shape [{}], expected [{}]", name, got, want));
    return t;
  }
  if (!type_traits(info.type)) {
    Uncomputed& u = uncomputed_[std::string(dtype_name(info.type))];
    if (u.count++ == 0) u.example = name;
    return t;
  }
  t.type = info.type;
  for (int k = 0; k < kMaxDims; ++k) t.ne[k] = info.ne[k];
  if (!read || !read_) return t;
  if (TensorMapper* mapper = file_.tensor_mapper()) {
    Result<const void*> mapped = mapper->map(name, *ref);
    if (!mapped.ok()) {
      problems_.push_back(mapped.error().message);
      return Tensor{};
    }
    if (*mapped) {
      t.data = *mapped;
      return t;
    }
  }
  AlignedBuffer buf(info.bytes);
  Status s = file_.read_tensor(*ref, buf.data());
  if (!s.ok()) {
    problems_.push_back(s.error().message);
    return Tensor{};
  }
  t.data = buf.data();
  bytes_ += info.bytes;
  buffers_.push_back(std::move(buf));
  return t;
}

Tensor WeightLoader::require(const std::string& name, std::initializer_list<int64_t> shape) {
  return load(name, shape, true, true);
}
Tensor WeightLoader::optional(const std::string& name, std::initializer_list<int64_t> shape) {
  return load(name, shape, false, true);
}
void WeightLoader::expect_shape(const std::string& name, std::initializer_list<int64_t> shape) {
  load(name, shape, true, false);
}

Status WeightLoader::finish() const {
  if (missing_.empty() && problems_.empty() && uncomputed_.empty()) return {};
  std::string msg;
  // Types without kernels: one line per type (a model of one such type has hundreds).
  if (!uncomputed_.empty()) {
    msg = fmt::format("{}: deltafin cannot compute with {} of this model's tensor types yet:", file_.path(),
                      uncomputed_.size() == 1 ? "one" : std::to_string(uncomputed_.size()));
    for (const auto& [type, u] : uncomputed_)
      msg += fmt::format("\n  {}: {} tensor{} (e.g. {})", type, u.count, u.count == 1 ? "" : "s", u.example);
    msg += fmt::format("\n  deltafin computes: {}. Requantize the model to one of these (from its F16/BF16 "
                       "weights: `deltafin quantize` or llama-quantize), or run it with llama.cpp.",
                       computed_type_names());
    if (missing_.empty() && problems_.empty()) return Error{msg};
    msg += "\n";
  }
  msg += fmt::format("{}: the model's tensors do not match its architecture:", file_.path());
  if (!missing_.empty()) {
    msg += fmt::format("\n  missing {} tensor(s):", missing_.size());
    for (size_t i = 0; i < missing_.size() && i < 20; ++i) msg += "\n    " + missing_[i];
    if (missing_.size() > 20) msg += fmt::format("\n    ... and {} more", missing_.size() - 20);
  }
  for (const auto& p : problems_) msg += "\n  " + p;
  return Error{msg};
}

}  // namespace deltafin
