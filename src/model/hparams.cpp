#include "model/hparams.h"

#include <fmt/format.h>

#include <cmath>

namespace deltafin {

int64_t HParams::req_int(const std::string& name) {
  auto r = meta_.get_int(key(name));
  if (!r.ok()) {
    missing_.push_back(r.error().message);
    return 0;
  }
  return r.value();
}
int64_t HParams::req_int(const std::string& name, int64_t lo, int64_t hi) {
  auto r = meta_.get_int(key(name));
  if (!r.ok()) {
    missing_.push_back(r.error().message);
    return lo;
  }
  if (r.value() < lo || r.value() > hi) {
    fail(fmt::format("'{}' is {}; it must be in {}..{}", key(name), r.value(), lo, hi));
    return lo;
  }
  return r.value();
}
double HParams::req_float(const std::string& name) {
  auto r = meta_.get_float(key(name));
  if (!r.ok()) {
    missing_.push_back(r.error().message);
    return 0;
  }
  if (!std::isfinite(r.value())) {
    fail(fmt::format("'{}' is {}; it must be a finite number", key(name), r.value()));
    return 0;
  }
  return r.value();
}
double HParams::req_positive(const std::string& name) {
  const bool present = has(name);
  const double v = req_float(name);
  if (present && std::isfinite(v) && !(v > 0)) fail(fmt::format("'{}' is {}; it must be above 0", key(name), v));
  return v;
}
int64_t HParams::int_or(const std::string& name, int64_t def) const { return meta_.int_or(key(name), def); }
double HParams::float_or(const std::string& name, double def) {
  const double v = meta_.float_or(key(name), def);
  if (!std::isnan(v)) return v;  // infinities may mean "no bound" (kda.gate_lower_bound)
  fail(fmt::format("'{}' is nan; it must be a number", key(name)));
  return def;
}
bool HParams::bool_or(const std::string& name, bool def) const { return meta_.bool_or(key(name), def); }
std::string HParams::string_or(const std::string& name, const std::string& def) const {
  return meta_.string_or(key(name), def);
}

std::vector<int64_t> HParams::per_layer_int(const std::string& name, int n_layer, int64_t def) {
  std::vector<int64_t> out(size_t(std::max(n_layer, 0)), def);
  const GGUFValue* v = meta_.find(key(name));
  if (!v) return out;
  if (v->is_array()) {
    if (v->ints.size() != out.size()) {
      fail(fmt::format("'{}' has {} values for {} layers", key(name), v->ints.size(), n_layer));
      return out;
    }
    return v->ints;
  }
  std::fill(out.begin(), out.end(), v->i);
  return out;
}

Status HParams::finish() const {
  if (missing_.empty() && problems_.empty()) return {};
  std::string msg = fmt::format("{}: invalid or incomplete '{}' metadata:", path_, arch_);
  for (auto& m : missing_) msg += "\n  " + m;
  for (auto& p : problems_) msg += "\n  " + p;
  return Error{msg};
}

RopeParams HParams::rope(int n_rot, bool neox, int n_ctx_train, float yarn_log_mul) {
  RopeParams p;
  p.n_rot = n_rot;
  p.neox = neox;
  p.freq_base = float(float_or("rope.freq_base", 10000.0));
  if (!(p.freq_base > 0.0f) || !std::isfinite(p.freq_base))
    fail(fmt::format("'{}' is {}; it must be a finite number above 0", key("rope.freq_base"), p.freq_base));
  const double n_ctx_orig = double(int_or("rope.scaling.original_context_length", n_ctx_train));
  if (n_ctx_orig < 0 || n_ctx_orig > double(kMaxContext))
    fail(fmt::format("'{}' is {}; it must be in 0..{}", key("rope.scaling.original_context_length"), n_ctx_orig,
                     kMaxContext));
  std::string scaling = string_or("rope.scaling.type", "linear");
  double factor = float_or("rope.scaling.factor", float_or("rope.scale_linear", 0.0));
  if (factor < 0 || !std::isfinite(factor)) {
    fail(fmt::format("'{}' is {}; it must be finite and not negative", key("rope.scaling.factor"), factor));
    factor = 0.0;
  }
  p.freq_scale = factor == 0.0 ? 1.0f : float(1.0 / factor);
  p.n_ctx_orig = int(int_or("rope.scaling.original_context_length", n_ctx_train));
  const float rope_attn_factor = float(float_or("rope.scaling.attn_factor", 1.0));
  p.attn_factor = 1.0f;
  p.ext_factor = 0.0f;
  if (scaling == "none") p.freq_scale = 1.0f;
  if (scaling == "yarn") {
    // As llama.cpp (llama_context): the YaRN magnitude correction, with ggml's own
    // 1 + 0.1*ln(factor) inside rope cancelled out.
    p.ext_factor = 1.0f;
    auto get_mscale = [](float scale, float mscale) {
      return scale <= 1.0f ? 1.0f : (0.1f * mscale * std::log(scale) + 1.0f);
    };
    const float factor = 1.0f / p.freq_scale;
    const float log_mul = yarn_log_mul;
    if (log_mul != 0.0f) {
      float mscale = 1.0f;
      if (arch_ == "deepseek2" && log_mul != 1.0f) mscale = log_mul;
      p.attn_factor = get_mscale(factor, mscale) / get_mscale(factor, log_mul);
    } else {
      p.attn_factor = get_mscale(factor, 1.0f);
    }
    p.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  } else if (scaling != "linear" && scaling != "none") {
    fail(fmt::format("rope scaling type '{}' is not supported", scaling));
  }
  p.attn_factor *= rope_attn_factor;
  return p;
}

}  // namespace deltafin
