#include "runtime/generate.h"

#include <sys/resource.h>

#include <chrono>
#include <optional>

#include "json/json_constraint.h"
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
  Sampler sampler(params.sampling);
  for (int32_t id : prompt) sampler.accept(id);
  std::optional<JsonConstraint> json;
  if (params.json) json.emplace(params.json, std::make_shared<const JsonTokenTable>(tok));
  // The next token from a row of logits (verifying `draft` when >= 0); -1 when a
  // constrained document cannot go on.
  auto pick = [&](float* row, int32_t draft, bool* accepted) -> int32_t {
    if (json && !json->mask(row, V)) return -1;
    return draft >= 0 ? sampler.verify(row, V, draft, accepted) : sampler.sample(row, V);
  };

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

  StreamDecoder dec(tok, false, params.shown_tokens);
  std::string held;  // text not yet emitted because it may be the start of a stop string
  size_t max_stop = 0;
  for (auto& s : params.stop) max_stop = std::max(max_stop, s.size());
  st.stop_reason = "length";
  int n_sampled = 0;
  // Takes a sampled token: false when generation ends with it (st.stop_reason says why).
  auto take = [&](int32_t id) -> bool {
    if (id < 0 || (json && !tok.is_eog(id) && !json->advance(id))) {
      st.stop_reason = json && json->complete() ? "eos" : "error";
      return false;
    }
    sampler.accept(id);
    if (n_sampled++ == 0) st.ttft_s = now_s() - t0;
    if ((!params.ignore_eos || json) && tok.is_eog(id)) {
      st.stop_reason = "eos";
      return false;
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
        return false;
      }
      held.erase(0, held.size() - keep);
    }
    if (stopped) {
      st.stop_reason = "stop";
      held.clear();
      return false;
    }
    if (params.n_predict >= 0 && n_sampled >= params.n_predict) return false;  // "length"
    return true;
  };

  // seq: the prompt and the sampled tokens; its last token is pending (sampled, not
  // yet in the state). Each pass evaluates it and the drafted guesses; row j of the
  // logits then gives the token after guess j (j = 0: after the pending token).
  std::vector<int32_t> seq(prompt);
  std::vector<int32_t> batch, drafts;
  std::vector<float> rows;
  if (cancelled()) {
    st.stop_reason = "cancelled";
    if (stats) *stats = std::move(st);
    return {};
  }
  int32_t id = pick(logits.data(), -1, nullptr);
  bool go = params.n_predict != 0 && take(id);
  seq.push_back(id);
  while (go) {
    if (cancelled()) {
      st.stop_reason = "cancelled";
      break;
    }
    if (state.n_past >= state.n_ctx) {
      st.stop_reason = "context";
      break;
    }
    drafts.clear();
    if (params.speculator) {
      int limit = state.n_ctx - state.n_past - 1;
      if (params.n_predict >= 0) limit = std::min(limit, params.n_predict - n_sampled - 1);
      if (limit > 0) DF_TRY(params.speculator->draft(seq, state, limit, &drafts));
    }
    const int k = int(drafts.size());
    batch.assign(1, id);
    batch.insert(batch.end(), drafts.begin(), drafts.end());
    rows.resize(size_t(k + 1) * size_t(V));
    const int base = state.n_past;
    const double tp = now_s();
    DF_TRY(model.forward(state, batch.data(), k + 1, rows.data(), k > 0));
    const double pass_s = now_s() - tp;
    ++st.passes;
    int kept = 0;
    for (int j = 0; j <= k; ++j) {
      float* row = &rows[size_t(j) * size_t(V)];
      bool accepted = false;
      id = pick(row, j < k ? drafts[size_t(j)] : -1, &accepted);
      go = take(id);
      seq.push_back(id);
      if (!go || !accepted) break;
      ++kept;
    }
    // The state keeps the pending token and the accepted guesses; the token sampled
    // last is the next pending one.
    DF_TRY(state.truncate(base + 1 + kept));
    st.drafted += k;
    st.accepted += kept;
    if (params.speculator) params.speculator->feedback(k, kept, pass_s);
  }
  held += dec.flush();
  if (!held.empty() && st.stop_reason != "cancelled") on_text(held);
  st.decode_s = now_s() - t1;
  st.decode_cpu_s = process_cpu_s() - cpu0;
  if (params.store) st.decode_bytes_read = params.store->stats().bytes_read - bytes0;
  if (stats) *stats = std::move(st);
  return {};
}

}  // namespace deltafin
