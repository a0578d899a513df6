#include "runtime/generate.h"

#include <chrono>

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

  StreamDecoder dec(tok);
  std::string held;  // text not yet emitted because it may be the start of a stop string
  size_t max_stop = 0;
  for (auto& s : params.stop) max_stop = std::max(max_stop, s.size());
  st.stop_reason = "length";
  bool first = true;
  for (int n = 0; params.n_predict < 0 || n < params.n_predict; ++n) {
    if (cancelled()) {
      st.stop_reason = "cancelled";
      held.clear();
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
    held += dec.push(id);
    bool stopped = false;
    for (auto& s : params.stop) {
      size_t at = held.find(s);
      if (!s.empty() && at != std::string::npos) {
        held.resize(at);
        stopped = true;
      }
    }
    // Emit everything that cannot be the beginning of a stop string.
    size_t keep = stopped ? 0 : std::min(held.size(), max_stop > 0 ? max_stop - 1 : 0);
    // Do not split a UTF-8 sequence when holding back.
    while (keep > 0 && keep < held.size() && (uint8_t(held[held.size() - keep]) & 0xC0) == 0x80) ++keep;
    if (held.size() > keep) {
      if (!on_text(held.substr(0, held.size() - keep))) {
        st.stop_reason = "cancelled";
        held.clear();
        break;
      }
      held.erase(0, held.size() - keep);
    }
    if (stopped) {
      st.stop_reason = "stop";
      held.clear();
      break;
    }
    if (state.n_past >= state.n_ctx) {
      st.stop_reason = "context";
      break;
    }
    if (params.n_predict >= 0 && n + 1 >= params.n_predict) break;
    DF_TRY(model.forward(state, &id, 1, logits.data(), false));
  }
  held += dec.flush();
  if (!held.empty() && st.stop_reason != "cancelled") on_text(held);
  st.decode_s = now_s() - t1;
  if (stats) *stats = std::move(st);
  return {};
}

}  // namespace deltafin
