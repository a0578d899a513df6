// Reading an architecture's hyperparameters from GGUF metadata: keys are
// "<arch>.<name>". Required keys that are missing are collected so one error can
// list them all (and name the file).
#pragma once
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/ops.h"

namespace deltafin {

class HParams {
 public:
  HParams(const GGUFFile& meta, std::string arch, std::string path)
      : meta_(meta), arch_(std::move(arch)), path_(std::move(path)) {}
  int64_t req_int(const std::string& name);
  double req_float(const std::string& name);
  int64_t int_or(const std::string& name, int64_t def) const;
  double float_or(const std::string& name, double def) const;
  bool bool_or(const std::string& name, bool def) const;
  std::string string_or(const std::string& name, const std::string& def) const;
  bool has(const std::string& name) const { return meta_.find(key(name)) != nullptr; }
  // Per-layer value: an array key or one scalar for every layer.
  std::vector<int64_t> per_layer_int(const std::string& name, int n_layer, int64_t def);
  // A problem to report with the missing keys.
  void fail(std::string problem) { problems_.push_back(std::move(problem)); }
  Status finish() const;
  std::string key(const std::string& name) const { return arch_ + "." + name; }
  const GGUFFile& meta() const { return meta_; }

  // Rope parameters common to every architecture (base, scaling type/factor, YaRN),
  // as llama_context computes them. YaRN's beta_fast/beta_slow are llama.cpp's fixed
  // 32/1 (the GGUF's yarn_beta_* keys are not read for any architecture here).
  // yarn_log_mul is llama.cpp's hparams.rope_yarn_log_mul: 0 except for
  // architectures that read it (deepseek2: rope.scaling.yarn_log_multiplier / 0.1f).
  RopeParams rope(int n_rot, bool neox, int n_ctx_train, float yarn_log_mul = 0.0f);

 private:
  const GGUFFile& meta_;
  std::string arch_, path_;
  std::vector<std::string> missing_, problems_;
};

}  // namespace deltafin
