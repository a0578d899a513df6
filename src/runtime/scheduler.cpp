#include "runtime/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/log.h"
#include "runtime/memory_budget.h"
#include "runtime/scheduler_internal.h"
#include "store/streaming_store.h"

namespace deltafin {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
constexpr double kRecentWindowS = 5.0;
}  // namespace

GenUpdate GenHandle::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !text_.empty() || !logprobs_.empty() || !prompt_logprobs_.empty() || done_; });
  GenUpdate u;
  u.text = std::move(text_);
  text_.clear();
  u.logprobs = std::move(logprobs_);
  logprobs_.clear();
  u.prompt_logprobs = std::move(prompt_logprobs_);
  prompt_logprobs_.clear();
  u.done = done_;
  taken_done_ = done_;
  u.finish_reason = reason_;
  u.error = error_;
  u.stop_string = stop_string_;
  u.n_prompt = n_prompt_;
  u.n_generated = n_generated_;
  u.n_cached = n_cached_;
  return u;
}

void GenHandle::wait_any(const std::vector<std::shared_ptr<GenHandle>>& hs, std::chrono::milliseconds timeout) {
  auto untaken = [](const GenHandle& h) {  // h.mu_ held
    return !h.text_.empty() || !h.logprobs_.empty() || !h.prompt_logprobs_.empty() || (h.done_ && !h.taken_done_);
  };
  auto news = [&](GenHandle& h) {
    std::lock_guard<std::mutex> lk(h.mu_);
    return untaken(h);
  };
  GenSignal* sig = hs.empty() ? nullptr : hs[0]->signal_.get();
  if (!sig) {
    if (hs.size() == 1) {
      std::unique_lock<std::mutex> lk(hs[0]->mu_);
      hs[0]->cv_.wait_for(lk, timeout, [&] { return untaken(*hs[0]); });
    }
    return;
  }
  std::unique_lock<std::mutex> lk(sig->mu);
  const uint64_t seen = sig->posts;
  lk.unlock();
  for (auto& h : hs)
    if (news(*h)) return;
  lk.lock();
  sig->cv.wait_for(lk, timeout, [&] { return sig->posts != seen; });
}

void GenHandle::post(const std::string& text, bool done, const std::string& reason, const std::string& error,
                     int n_generated, std::vector<TokenLogprob> logprobs, std::vector<TokenLogprob> prompt_logprobs) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    text_ += text;
    for (auto& lp : logprobs) logprobs_.push_back(std::move(lp));
    for (auto& lp : prompt_logprobs) prompt_logprobs_.push_back(std::move(lp));
    n_generated_ = n_generated;
    if (done) {
      done_ = true;
      reason_ = reason;
      error_ = error;
    }
  }
  cv_.notify_all();
  if (signal_) {
    {
      std::lock_guard<std::mutex> lk(signal_->mu);
      ++signal_->posts;
    }
    signal_->cv.notify_all();
  }
}


Scheduler::Scheduler(Model& model, const Tokenizer& tok, const SchedulerOptions& opts)
    : model_(model), tok_(tok), opts_(opts) {
  opts_.n_parallel = std::max(1, opts_.n_parallel);
  opts_.prefill_chunk = std::max(1, opts_.prefill_chunk);
  note_disk();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { shutdown(false); }

std::shared_ptr<GenHandle> Scheduler::submit(GenRequest req, SubmitError* err, std::string* message) {
  auto hs = submit_choices(std::move(req), 1, err, message);
  return hs.empty() ? nullptr : hs[0];
}

std::vector<std::shared_ptr<GenHandle>> Scheduler::submit_choices(GenRequest req, int n, SubmitError* err,
                                                                  std::string* message) {
  *err = SubmitError::None;
  if (n < 1 || n > opts_.n_parallel) {
    *err = SubmitError::Invalid;
    *message = fmt::format("n = {} choices: this server decodes at most {} sequences together (--parallel)", n,
                           opts_.n_parallel);
    return {};
  }
  if (req.prompt.empty()) {
    *err = SubmitError::Invalid;
    *message = "the prompt is empty";
    return {};
  }
  if (req.prompt_logprobs && (n > 1 || req.logprobs < 0)) {
    *err = SubmitError::Invalid;
    *message = n > 1 ? "the prompt's logprobs come with one choice only" : "prompt logprobs need logprobs >= 0";
    return {};
  }
  if (int64_t(req.prompt.size()) > opts_.n_ctx) {
    *err = SubmitError::Invalid;
    *message = fmt::format("the prompt has {} tokens but the context holds {} tokens", req.prompt.size(),
                           opts_.n_ctx);
    return {};
  }
  std::vector<std::unique_ptr<Seq>> seqs;
  std::vector<std::shared_ptr<GenHandle>> hs;
  auto shared = n > 1 ? std::make_shared<SharedPrompt>() : nullptr;
  auto signal = n > 1 ? std::make_shared<GenSignal>() : nullptr;
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<Seq>();
    s->handle = std::make_shared<GenHandle>();
    s->handle->signal_ = signal;
    s->handle->n_prompt_ = int(req.prompt.size());
    s->req = req;
    if (i > 0 && req.sampling.seed != SamplingParams::kRandomSeed) {
      s->req.sampling.seed = req.sampling.seed + uint64_t(i);
      if (s->req.sampling.seed == SamplingParams::kRandomSeed) s->req.sampling.seed += uint64_t(n);
    }
    s->shared = shared;
    s->publisher = i == 0 && shared;
    hs.push_back(s->handle);
    seqs.push_back(std::move(s));
  }
  if (shared) shared->waiting = n - 1;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) {
      *err = SubmitError::ShuttingDown;
      *message = "the server is shutting down";
      return {};
    }
    const int free_places = std::max(0, opts_.n_parallel - n_active_.load());
    if (int(queue_.size()) + n > opts_.max_queue + free_places) {
      *err = SubmitError::Busy;
      *message = fmt::format("the server is busy: {} requests are running and {} waiting (the most it queues)",
                             n_active_.load(), queue_.size());
      return {};
    }
    for (auto& s : seqs) queue_.push_back(std::move(s));
    stats_.queued = int(queue_.size());
  }
  cv_.notify_all();
  return hs;
}

void Scheduler::shutdown(bool drain, std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    draining_ = drain;
  }
  cv_.notify_all();
  if (drain) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (queue_.empty() && n_active_ == 0) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    draining_ = false;  // whatever is left is cancelled
  }
  cv_.notify_all();
  thread_.join();
}

void Scheduler::cancel_all() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
    draining_ = false;
  }
  cv_.notify_all();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  SchedulerStats s = stats_;
  if (!recent_.empty()) {
    const double span = std::max(now_s() - recent_.front().first, 1.0);
    double toks = 0;
    for (auto& r : recent_) toks += r.second;
    s.recent_tokens_per_s = now_s() - recent_.back().first > kRecentWindowS ? 0.0 : toks / span;
  }
  return s;
}

void Scheduler::finish(Seq& s, const std::string& reason, const std::string& error) {
  std::string rest;
  std::vector<TokenLogprob> lps;
  if (reason != "cancelled" && reason != "error" && s.dec) {
    DecodeStep end = s.dec->finish();
    rest = std::move(end.text);
    lps = std::move(end.logprobs);
  }
  {  // counted before the client hears of the end (a test or /metrics reading then sees it)
    std::lock_guard<std::mutex> lk(mu_);
    if (reason == "cancelled") ++stats_.cancelled;
    else if (reason == "error") ++stats_.failed;
    else ++stats_.finished;
  }
  if (reason == "stop" && s.dec && s.dec->output().stopped()) {
    std::lock_guard<std::mutex> lk(s.handle->mu_);
    s.handle->stop_string_ = s.dec->output().stop_found();
  }
  s.handle->post(rest, true, reason, error, s.dec ? s.dec->n_generated() : 0, std::move(lps));
  s.done = true;
  if (s.publisher && !s.shared->ready) s.shared->failed = true;  // the other choices evaluate the prompt
  // A state a failed pass may have left half-written is not kept.
  if (opts_.prompt_cache && reason != "error" && s.state && int(s.held.size()) == s.state->n_past &&
      s.state->n_past > 0)
    kept_.push_back({std::move(s.state), std::move(s.held)});
  s.state.reset();
}

void Scheduler::loop() {
  std::vector<std::unique_ptr<Seq>> active;
  for (;;) {
    bool cancel_all = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || !active.empty(); });
      while (!queue_.empty() && int(active.size()) < opts_.n_parallel) {
        active.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (active.empty() && queue_.empty() && stopping_) break;
      cancel_all = stopping_ && !draining_;
      n_active_ = int(active.size());
      stats_.active = int(active.size());
      stats_.queued = int(queue_.size());
    }
    for (auto& s : active) {
      if (cancel_all || s->handle->cancelled()) {
        finish(*s, "cancelled");
        continue;
      }
      if (s->handle->stop_) {
        finish(*s, "stop");
        continue;
      }
      if (!s->dec) {
        s->logits.resize(size_t(model_.info().n_vocab));
        DecoderOptions o;
        o.max_tokens = s->req.max_tokens;
        o.n_ctx = opts_.n_ctx;
        o.sampling = s->req.sampling;
        o.stop = s->req.stop;
        o.ignore_eos = s->req.ignore_eos;
        o.shown_tokens = s->req.shown_tokens;
        o.json = s->req.json;
        o.logprobs = s->req.logprobs;
        if (s->req.json) {
          if (!json_table_) json_table_ = std::make_shared<JsonTokenTable>(tok_);
          o.json_table = json_table_;
        }
        if (opts_.spec_max > 0) {
          std::vector<std::unique_ptr<Drafter>> d;
          if (opts_.make_drafters) d = opts_.make_drafters();
          else d.push_back(make_ngram_drafter());
          s->spec = std::make_unique<Speculator>(std::move(d), std::min(opts_.spec_max, SpecOptions::kMaxDraft),
                                                 opts_.spec_adaptive);
          o.speculator = s->spec.get();
        }
        s->dec = std::make_unique<Decoder>(tok_, s->req.prompt, std::move(o));
      }
      if (!s->state) {
        if (s->shared && !s->publisher && !adopt_prompt(*s)) continue;  // waits
        if (!s->state && !s->done) assign_state(*s, active);
      }
    }
    std::erase_if(active, [](const std::unique_ptr<Seq>& s) { return s->done; });
    if (!active.empty()) step(active);
    std::erase_if(active, [](const std::unique_ptr<Seq>& s) { return s->done; });
    if (active.empty()) return_lent();
    n_active_ = int(active.size());
    std::lock_guard<std::mutex> lk(mu_);
    stats_.active = n_active_;  // (the gauge reads 0 once the last request is done)
  }
  n_active_ = 0;
  return_lent();
  // What the prompt cache holds outlives the process on disk.
  for (const Kept& k : kept_) to_disk(k);
  for (const Kept& k : parked_) to_disk(k);
  std::lock_guard<std::mutex> lk(mu_);
  stats_.active = 0;
  stats_.queued = 0;
}

bool Scheduler::adopt_prompt(Seq& s) {
  SharedPrompt& sp = *s.shared;
  if (sp.failed) return true;  // evaluates the prompt itself
  if (!sp.ready) return false;
  s.state = --sp.waiting > 0 ? sp.state->clone() : std::move(sp.state);
  if (!s.state) return true;
  s.held = sp.held;
  s.n_prompt_done = int(s.req.prompt.size());
  std::copy(sp.logits.begin(), sp.logits.end(), s.logits.begin());
  {
    std::lock_guard<std::mutex> lk(s.handle->mu_);
    s.handle->n_cached_ = s.n_prompt_done;
  }
  int generated = 0;
  deliver(s, s.dec->start(s.logits.data(), int64_t(s.logits.size()), s.state->n_past), &generated);
  std::lock_guard<std::mutex> lk(mu_);
  stats_.generated_tokens += uint64_t(generated);
  return true;
}

bool Scheduler::deliver(Seq& s, const DecodeStep& step, int* generated) {
  *generated += step.n_emitted;
  if (!step.text.empty() || !step.logprobs.empty())
    s.handle->post(step.text, false, {}, {}, s.dec->n_generated(), step.logprobs);
  switch (step.end) {
    case DecodeEnd::None:
      s.decoding = true;
      return true;
    case DecodeEnd::Eos:
    case DecodeEnd::Stop:
      finish(s, "stop");
      return false;
    case DecodeEnd::Length:
    case DecodeEnd::Context:
      finish(s, "length");
      return false;
    case DecodeEnd::Error:
      finish(s, "error", step.error);
      return false;
  }
  return false;
}

void Scheduler::note_prompt_logprobs(Seq& s, int n) {
  const std::vector<int32_t>& p = s.req.prompt;
  const int64_t V = model_.info().n_vocab;
  if (s.n_prompt_done == 0) {
    TokenLogprob first;
    first.id = p[0];
    first.logprob = std::numeric_limits<float>::quiet_NaN();
    s.prompt_lps.push_back(first);
  }
  // Row r of the step predicts the token after it.
  for (int r = 0; r < n; ++r) {
    const size_t next = size_t(s.n_prompt_done + r + 1);
    if (next < p.size())
      s.prompt_lps.push_back(token_logprob(&s.logits[size_t(r) * size_t(V)], V, p[next], s.req.logprobs));
  }
}

void Scheduler::return_lent() {
  if (!lent_) return;
  opts_.store->return_memory();
  lent_ = 0;
  std::lock_guard<std::mutex> lk(mu_);
  stats_.prefill_lent_bytes = 0;
}

int Scheduler::prefill_budget(const std::vector<std::unique_ptr<Seq>>& active) {
  const int chunk = opts_.prefill_chunk;
  int64_t pending = 0;
  bool decoding = false;
  for (auto& s : active) {
    if (s->decoding) decoding = true;
    else if (s->state) pending += int64_t(s->req.prompt.size()) - s->n_prompt_done;
  }
  if (!opts_.store || decoding || pending <= chunk) {
    return_lent();
    return chunk;
  }
  if (!lent_) {
    lent_ = borrow_for_prompt(*opts_.store, model_.info(), pending, chunk);
    std::lock_guard<std::mutex> lk(mu_);
    stats_.prefill_lent_bytes = lent_;
  }
  // Equal steps over what is pending (as `run` splits a prompt).
  return int(prompt_step_tokens(model_.info(), pending, chunk, lent_));
}

bool Scheduler::step(std::vector<std::unique_ptr<Seq>>& active) {
  const int64_t V = model_.info().n_vocab;
  std::vector<BatchSlice> slices;
  std::vector<Seq*> who;
  std::vector<bool> samples;  // the slice ends a prompt or is a decode step
  std::vector<int> base;      // tokens in the state before the step
  int budget = prefill_budget(active), prefill_rows = 0, decode_rows = 0;
  for (auto& sp : active) {
    Seq& s = *sp;
    if (!s.state) continue;  // a choice waiting for its first choice's prompt
    if (s.decoding) {
      // The pending token, then the guesses (the document's literal text or the drafters').
      if (Status ps = s.dec->plan(*s.state, &s.pass); !ps.ok()) {
        finish(s, "error", ps.error().message);
        continue;
      }
      const int n = int(s.pass.size());
      if (s.logits.size() < size_t(n) * size_t(V)) s.logits.resize(size_t(n) * size_t(V));
      slices.push_back({s.state.get(), s.pass.data(), n, s.logits.data(), n > 1});
      samples.push_back(true);
      decode_rows += n;
    } else {
      const int left = int(s.req.prompt.size()) - s.n_prompt_done;
      if (budget <= 0) continue;
      int take = std::min(left, budget);
      if (s.req.prompt_logprobs) {
        take = std::min(take, kPromptLogprobRows);
        if (s.logits.size() < size_t(take) * size_t(V)) s.logits.resize(size_t(take) * size_t(V));
      }
      budget -= take;
      slices.push_back({s.state.get(), &s.req.prompt[size_t(s.n_prompt_done)], take, s.logits.data(),
                        s.req.prompt_logprobs});
      samples.push_back(take == left);
      prefill_rows += take;
    }
    base.push_back(s.state->n_past);
    who.push_back(&s);
  }
  if (slices.empty()) return false;
  const double t0 = now_s();
  Status st = model_.forward_batch(slices);
  const double dt = now_s() - t0;
  if (!st.ok()) {
    DF_LOG_ERROR("batched forward pass failed: {}", st.error().message);
    for (Seq* s : who) finish(*s, "error", st.error().message);
    return false;
  }
  for (size_t i = 0; i < who.size(); ++i) {
    std::vector<int32_t>& held = who[i]->held;
    held.resize(size_t(base[i]));
    held.insert(held.end(), slices[i].tokens, slices[i].tokens + slices[i].n);
  }
  int generated = 0;
  uint64_t drafted = 0, accepted = 0, literal_drafted = 0, literal_accepted = 0;
  for (size_t i = 0; i < who.size(); ++i) {
    Seq& s = *who[i];
    if (!s.decoding) {
      if (s.req.prompt_logprobs) note_prompt_logprobs(s, slices[i].n);
      s.n_prompt_done += slices[i].n;
      if (!samples[i]) continue;
      float* last = s.req.prompt_logprobs ? &s.logits[size_t(slices[i].n - 1) * size_t(V)] : s.logits.data();
      if (Status fin = check_logits(last, V); !fin.ok()) {
        DF_LOG_ERROR("{}", fin.error().message);
        finish(s, "error", fin.error().message);
        continue;
      }
      s.state->pin();  // the prompt's end: where a chat's next turn comes back to
      if (s.publisher) {
        SharedPrompt& sp = *s.shared;
        sp.state = s.state->clone();
        sp.logits.assign(s.logits.begin(), s.logits.begin() + V);
        sp.held = s.held;
        sp.ready = true;
      }
      if (s.req.prompt_logprobs) s.handle->post({}, false, {}, {}, 0, {}, std::move(s.prompt_lps));
      deliver(s, s.dec->start(last, V, s.state->n_past), &generated);
      continue;
    }
    const DecodeStep ds = s.dec->accept(s.logits.data(), V, dt);
    drafted += uint64_t(ds.n_drafted);
    accepted += uint64_t(ds.n_accepted);
    if (ds.literal) literal_drafted += uint64_t(ds.n_drafted), literal_accepted += uint64_t(ds.n_accepted);
    if (!deliver(s, ds, &generated)) continue;
    if (ds.n_keep < slices[i].n) {
      // The state keeps the pending token and the accepted guesses.
      Status ts = s.state->truncate(base[i] + ds.n_keep);
      if (!ts.ok()) {
        finish(s, "error", ts.error().message);
        continue;
      }
      s.held.resize(size_t(s.state->n_past));
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  const int rows = prefill_rows + decode_rows;
  stats_.steps++;
  stats_.batch_rows += uint64_t(rows);
  stats_.prompt_tokens += uint64_t(prefill_rows);
  stats_.max_prefill_rows = std::max(stats_.max_prefill_rows, prefill_rows);
  stats_.generated_tokens += uint64_t(generated);
  stats_.drafted += drafted;
  stats_.accepted += accepted;
  stats_.literal_drafted += literal_drafted;
  stats_.literal_accepted += literal_accepted;
  stats_.prefill_s += dt * prefill_rows / rows;
  stats_.decode_s += dt * decode_rows / rows;
  const double now = now_s();
  recent_.emplace_back(now, generated);
  while (!recent_.empty() && recent_.front().first < now - kRecentWindowS) recent_.pop_front();
  return true;
}

}  // namespace deltafin
