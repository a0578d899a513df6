#include "runtime/generate.h"

#include <sys/resource.h>

#include <chrono>
#include <optional>

#include "runtime/decoder.h"
#include "runtime/memory_budget.h"

namespace deltafin {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// User + system CPU seconds of the whole process (every thread: compute and expert reads).
// Steadier than wall time on a shared machine.
double process_cpu_s() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// The prompt's tokens per forward pass (GenerateParams::n_batch). Auto with a
// streaming store: kAutoBatch, grown by what the expert cache lends for the extra
// activations, in equal batches.
int prompt_batch(Model& model, size_t n_prompt, const GenerateParams& params, GenerateStats* st) {
  if (params.n_batch > 0) return st->prefill_batch = params.n_batch;
  size_t batch = GenerateParams::kAutoBatch;
  if (params.store && n_prompt > batch) {
    st->prefill_lent_bytes = borrow_for_prompt(*params.store, model.info(), int64_t(n_prompt), int64_t(batch));
    batch = size_t(prompt_step_tokens(model.info(), int64_t(n_prompt), int64_t(batch), st->prefill_lent_bytes));
  }
  return st->prefill_batch = int(std::min(batch, n_prompt));
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
  auto cancelled = [&] { return params.cancel && params.cancel->load(std::memory_order_relaxed); };
  const double t0 = now_s();
  const uint64_t prefill_bytes0 = params.store ? params.store->stats().bytes_read : 0;
  const int n_batch = prompt_batch(model, prompt.size(), params, &st);
  struct GiveBack {  // the cache gets its memory back however the prefill ends
    StreamingExpertStore* s;
    ~GiveBack() {
      if (s) s->return_memory();
    }
  } give_back{st.prefill_lent_bytes ? params.store : nullptr};
  for (size_t i = 0; i < prompt.size(); i += size_t(n_batch)) {
    if (cancelled()) {
      st.stop_reason = "cancelled";
      st.prefill_s = now_s() - t0;
      if (stats) *stats = std::move(st);
      return {};
    }
    const int n = int(std::min(prompt.size() - i, size_t(n_batch)));
    DF_TRY(model.forward(state, &prompt[i], n, logits.data(), false));
    ++st.prefill_batches;
  }
  if (give_back.s) give_back.s->return_memory();
  give_back.s = nullptr;
  DF_TRY(check_logits(logits.data(), V));
  if (params.pin_prompt) state.pin();
  const double t1 = now_s();
  st.n_prompt = int(prompt.size());
  st.prefill_s = t1 - t0;
  const uint64_t bytes0 = params.store ? params.store->stats().bytes_read : 0;
  st.prefill_bytes_read = bytes0 - prefill_bytes0;
  const double cpu0 = process_cpu_s();

  DecoderOptions o;
  o.max_tokens = params.n_predict;
  o.n_ctx = state.n_ctx;
  o.sampling = params.sampling;
  o.stop = params.stop;
  o.ignore_eos = params.ignore_eos;
  o.shown_tokens = params.shown_tokens;
  o.json = params.json;
  o.speculator = params.speculator;
  Decoder dec(tok, prompt, std::move(o));
  // Shows a step's text: false when the caller cancels.
  auto show = [&](const DecodeStep& s) {
    st.drafted += s.n_drafted;
    st.accepted += s.n_accepted;
    if (s.literal) st.literal_drafted += s.n_drafted, st.literal_accepted += s.n_accepted;
    if (s.text.empty() || on_text(s.text)) return true;
    st.stop_reason = "cancelled";
    return false;
  };

  // Each pass evaluates the pending token and the guesses (Decoder::plan); the state
  // keeps the pending token and the kept guesses, and the token sampled last is the
  // next pending one.
  std::vector<int32_t> batch;
  std::vector<float> rows;
  bool go = !cancelled();
  if (go) {
    go = show(dec.start(logits.data(), V, state.n_past));
    st.ttft_s = now_s() - t0;
  } else {
    st.stop_reason = "cancelled";
  }
  while (go && !dec.done()) {
    if (cancelled()) {
      st.stop_reason = "cancelled";
      go = false;
      break;
    }
    DF_TRY(dec.plan(state, &batch));
    const int n = int(batch.size());
    rows.resize(size_t(n) * size_t(V));
    const int base = state.n_past;
    const double tp = now_s();
    DF_TRY(model.forward(state, batch.data(), n, rows.data(), n > 1));
    const double pass_s = now_s() - tp;
    ++st.passes;
    const DecodeStep s = dec.accept(rows.data(), V, pass_s);
    DF_TRY(state.truncate(base + s.n_keep));
    go = show(s);
  }
  if (go) {
    st.stop_reason = dec.done() ? decode_end_name(dec.end()) : "length";
    const DecodeStep rest = dec.finish();
    if (!rest.text.empty()) on_text(rest.text);
  }
  st.tokens = dec.tokens();
  st.n_generated = dec.n_generated();
  st.decode_s = now_s() - t1;
  st.decode_cpu_s = process_cpu_s() - cpu0;
  if (params.store) st.decode_bytes_read = params.store->stats().bytes_read - bytes0;
  if (stats) *stats = std::move(st);
  return {};
}

}  // namespace deltafin
