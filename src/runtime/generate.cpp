#include "runtime/generate.h"

#include <chrono>

#include "runtime/output_text.h"

namespace deltafin {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Status generate(Model& model, SeqState& state, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                const GenerateParams& params, const std::function<bool(const std::string&)>& on_text,
                GenerateStats* stats) {
  GenerateStats st;
  const int64_t V = model.info().n_vocab;
  if (prompt.empty()) return make_error("the prompt is empty");
  if (state.n_past + int(prompt.size()) > state.n_ctx)
    return make_error("the prompt has {} tokens but the context holds {} (raise -c/--ctx-size or shorten "
                      "the prompt)", prompt.size(), state.n_ctx - state.n_past);
  std::vector<float> logits(static_cast<size_t>(V));
  Sampler sampler(params.sampling);
  for (int32_t id : prompt) sampler.accept(id);

  auto cancelled = [&] { return params.cancel && params.cancel->load(std::memory_order_relaxed); };
  const double t0 = now_s();
  for (size_t i = 0; i < prompt.size(); i += size_t(params.n_batch)) {
    if (cancelled()) {
      st.stop_reason = "cancelled";
      st.prefill_s = now_s() - t0;
      if (stats) *stats = std::move(st);
      return {};
    }
    const int n = int(std::min(prompt.size() - i, size_t(params.n_batch)));
    DF_TRY(model.forward(state, &prompt[i], n, logits.data(), false));
  }
  const double t1 = now_s();
  st.n_prompt = int(prompt.size());
  st.prefill_s = t1 - t0;

  OutputText out(tok, params.stop);
  st.stop_reason = "length";
  bool first = true;
  for (int n = 0; params.n_predict < 0 || n < params.n_predict; ++n) {
    if (cancelled()) {
      st.stop_reason = "cancelled";
      break;
    }
    const int32_t id = sampler.sample(logits.data(), V);
    sampler.accept(id);
    if (first) {
      st.ttft_s = now_s() - t0;
      first = false;
    }
    if (!params.ignore_eos && tok.is_eog(id)) {
      st.stop_reason = "eos";
      break;
    }
    st.tokens.push_back(id);
    ++st.n_generated;
    const std::string text = out.push(id);
    if (!text.empty() && !on_text(text)) {
      st.stop_reason = "cancelled";
      break;
    }
    if (out.stopped()) {
      st.stop_reason = "stop";
      break;
    }
    if (state.n_past >= state.n_ctx) {
      st.stop_reason = "context";
      break;
    }
    if (params.n_predict >= 0 && n + 1 >= params.n_predict) break;
    DF_TRY(model.forward(state, &id, 1, logits.data(), false));
  }
  if (st.stop_reason != "cancelled") {
    const std::string rest = out.finish();
    if (!rest.empty()) on_text(rest);
  }
  st.decode_s = now_s() - t1;
  if (stats) *stats = std::move(st);
  return {};
}

}  // namespace deltafin
