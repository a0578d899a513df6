#include <fmt/format.h>

#include <cmath>
#include <regex>

#include "model/arch.h"
#include "model/linear.h"
#include "model/registry.h"

namespace deltafin {

std::string SeqState::save() const {
  std::string out;
  StateWriter w(&out);
  save_to(w);
  return out;
}

Status SeqState::load(std::string_view bytes) {
  StateReader r(bytes);
  if (!load_from(r) || !r.done())
    return make_error("a saved sequence state ({} bytes) does not fit this model's states: another model, "
                      "another deltafin version, or damaged", bytes.size());
  return {};
}

Result<std::unique_ptr<Model>> load_model(ModelFile& file, LoadOptions opts) {
  DF_ASSIGN(std::string arch, file.meta().get_string("general.architecture"));
  if (file.tensors().empty())
    return make_error("{}: the file holds no tensors: it is a vocabulary-only GGUF (tokenizer metadata only), "
                      "which `deltafin tokenize` can use; run and chat need a model file with weights",
                      file.path());
  if (const Architecture* a = find_architecture(arch)) return a->load(file, opts);
  std::string list;
  for (const Architecture& a : architectures()) list += fmt::format("{}{}", list.empty() ? "" : ", ", a.name);
  return make_error("{}: architecture '{}' is not supported by deltafin (supported: {}); models of other "
                    "architectures run in llama.cpp", file.path(), arch, list);
}

Status check_model(ModelFile& file) {
  LoadOptions opts;
  opts.check_only = true;
  DF_TRY(load_model(file, std::move(opts)));
  return {};
}

uint64_t Model::state_bytes(int n_ctx) const {
  if (n_ctx <= 2) return new_state(std::max(n_ctx, 0))->memory_bytes();
  const uint64_t one = new_state(1)->memory_bytes(), two = new_state(2)->memory_bytes();
  const uint64_t per = two > one ? two - one : 0;
  const uint64_t more = uint64_t(n_ctx - 1);
  if (per != 0 && more > (UINT64_MAX - one) / per) return UINT64_MAX;
  return one + per * more;
}

Status check_logits(const float* logits, int64_t n_vocab) {
  for (int64_t i = 0; i < n_vocab; ++i)
    if (!std::isfinite(logits[i]))
      return make_error("the model computed a non-finite logit ({} for token {}): its weights or "
                        "hyperparameters are broken (NaN, infinite or out-of-range values in the file)",
                        logits[i], i);
  return {};
}

std::vector<ExpertLayerInfo> find_expert_layers(const ModelFile& file) {
  static const std::regex re(R"(blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight)");
  std::map<int, ExpertLayerInfo> layers;
  for (const auto& [name, ref] : file.tensors()) {
    std::smatch m;
    if (!std::regex_match(name, m, re)) continue;
    int il = std::stoi(m[1].str());
    ExpertLayerInfo& l = layers[il];
    l.layer = il;
    l.n_expert = int(ref.info->ne[2]);
    const std::string kind = m[2].str();
    (kind == "gate" ? l.gate_name : kind == "up" ? l.up_name : l.down_name) = name;
  }
  std::vector<ExpertLayerInfo> out;
  for (auto& [il, l] : layers) out.push_back(l);
  return out;
}

Status check_tokens(const int32_t* tokens, int n, int64_t n_vocab, const SeqState& st) {
  if (n <= 0) return make_error("no tokens to evaluate");
  if (st.n_past + n > st.n_ctx)
    return make_error("context is full: {} cached + {} new tokens exceed the context size {} "
                      "(raise -c/--ctx-size or shorten the prompt)", st.n_past, n, st.n_ctx);
  if (st.n_past + n > st.fitted_rows())
    return make_error("the state has room for {} positions now, not {} (fit it to its context first)",
                      st.fitted_rows(), st.n_past + n);
  for (int i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      return make_error("token id {} at position {} is out of range (vocabulary has {} tokens)", tokens[i],
                        i, n_vocab);
  return {};
}

Status Model::mtp_draft(SeqState&, const std::vector<int32_t>&, int, std::vector<int32_t>*) {
  return make_error("the {} model has no multi-token-prediction (nextn) block", info().arch);
}

Status Model::forward_batch(std::span<const BatchSlice> slices, const ForwardOptions& fo) {
  DF_TRY(check_batch(slices, info().n_vocab));
  for (const BatchSlice& s : slices) DF_TRY(forward(*s.state, s.tokens, s.n, s.logits, s.all_logits, fo));
  return {};
}

Status check_batch(std::span<const BatchSlice> slices, int64_t n_vocab) {
  if (slices.empty()) return make_error("forward_batch: no sequences to evaluate");
  for (size_t i = 0; i < slices.size(); ++i) {
    const BatchSlice& s = slices[i];
    if (s.state == nullptr || s.logits == nullptr) return make_error("batch slice {}: no state or logits buffer", i);
    for (size_t j = 0; j < i; ++j)
      if (slices[j].state == s.state) return make_error("batch slices {} and {} share one sequence state", j, i);
    Status st = check_tokens(s.tokens, s.n, n_vocab, *s.state);
    if (!st.ok()) return make_error("batch slice {}: {}", i, st.error().message);
  }
  return {};
}

BatchRows::BatchRows(std::span<const BatchSlice> slices) {
  for (const BatchSlice& s : slices) {
    row0.push_back(n);
    for (int t = 0; t < s.n; ++t) pos.push_back(s.state->n_past + t);
    n += s.n;
  }
}

void output_logits_batch(ThreadPool* pool, const float* x, std::span<const BatchSlice> slices,
                         const BatchRows& rows, int64_t n_embd, const float* norm_w, float eps,
                         const Tensor& output, int64_t n_vocab) {
  // The rows that need logits, in slice order.
  std::vector<int> want;
  for (size_t i = 0; i < slices.size(); ++i) {
    const int first = slices[i].all_logits ? 0 : slices[i].n - 1;
    for (int t = first; t < slices[i].n; ++t) want.push_back(rows.row0[i] + t);
  }
  const int m = int(want.size());
  std::vector<float> h(size_t(m) * size_t(n_embd)), y(size_t(m) * size_t(n_vocab));
  for (int r = 0; r < m; ++r) rms_norm(x + int64_t(want[size_t(r)]) * n_embd, norm_w, n_embd, eps, &h[size_t(r) * size_t(n_embd)]);
  linear(pool, output, h.data(), m, y.data());
  size_t r = 0;
  for (const BatchSlice& s : slices) {
    const int cnt = s.all_logits ? s.n : 1;
    std::copy_n(&y[r * size_t(n_vocab)], size_t(cnt) * size_t(n_vocab), s.logits);
    r += size_t(cnt);
  }
}

void output_logits(ThreadPool* pool, const float* x, int n, int64_t n_embd, const float* norm_w,
                   float eps, const Tensor& output, bool all_logits, float* logits) {
  const int first = all_logits ? 0 : n - 1;
  const int rows = n - first;
  std::vector<float> h(size_t(rows) * size_t(n_embd));
  rms_norm_rows(x + int64_t(first) * n_embd, norm_w, n_embd, rows, eps, h.data());
  linear(pool, output, h.data(), rows, logits);
}

Status attach_experts(ModelFile& file, LoadOptions& opts, std::unique_ptr<ExpertStore>* out,
                      ModelInfo* info) {
  std::vector<ExpertLayerInfo> layers = find_expert_layers(file);
  info->n_moe_layers = int(layers.size());
  info->expert_bytes = 0;
  info->bytes_per_expert = 0;
  for (const auto& l : layers) {
    uint64_t per = 0;
    for (const std::string* nm : {&l.gate_name, &l.up_name, &l.down_name}) {
      if (nm->empty()) continue;
      const TensorRef* r = file.tensor(*nm);
      info->expert_bytes += r->info->bytes;
      per += r->info->bytes / uint64_t(r->info->ne[2]);
    }
    info->bytes_per_expert = std::max(info->bytes_per_expert, per);
  }
  if (opts.experts) {
    *out = std::move(opts.experts);
    return {};
  }
  DF_ASSIGN(*out, make_resident_expert_store(file, layers, expert_layout()));
  return {};
}

}  // namespace deltafin
