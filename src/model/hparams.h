// Reading an architecture's hyperparameters from GGUF metadata: keys are
// "<arch>.<name>". Required keys that are missing are collected so one error can
// list them all (and name the file).
#pragma once
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/ops.h"

namespace deltafin {

// Bounds of the integer hyperparameters that size the model: a file's values past
// them are reported, never allocated for. Far above any model there is.
constexpr int64_t kMaxLayers = 4096;                // block_count
constexpr int64_t kMaxDim = int64_t(1) << 24;       // widths, head counts and sizes, expert counts
constexpr int64_t kMaxContext = int64_t(1) << 30;   // context_length

class HParams {
 public:
  HParams(const GGUFFile& meta, std::string arch, std::string path)
      : meta_(meta), arch_(std::move(arch)), path_(std::move(path)) {}
  int64_t req_int(const std::string& name);
  // A required integer in lo..hi. A value outside is reported and lo returned, so
  // that nothing is sized from it before finish().
  int64_t req_int(const std::string& name, int64_t lo, int64_t hi);
  // A required float that must be finite (else reported, and 0 returned).
  double req_float(const std::string& name);
  // A required float that must be finite and above 0 (epsilons).
  double req_positive(const std::string& name);
  int64_t int_or(const std::string& name, int64_t def) const;
  // An optional float; a NaN is reported and `def` returned.
  double float_or(const std::string& name, double def);
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
  // The base must be above 0 and the scaling factor not negative.
  RopeParams rope(int n_rot, bool neox, int n_ctx_train, float yarn_log_mul = 0.0f);

 private:
  const GGUFFile& meta_;
  std::string arch_, path_;
  std::vector<std::string> missing_, problems_;
};

}  // namespace deltafin
