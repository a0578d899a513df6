// Continuous batching: many generation requests share one model. A scheduler thread
// runs steps; each step evaluates, in one Model::forward_batch pass, the next token
// of every decoding sequence plus a bounded chunk of pending prompts (chunked
// prefill, so a long prompt never stalls the others for its whole length), then
// samples each sequence that finished its prompt or decoded. With a batching
// architecture, every MoE layer of a step asks the expert store for the union of
// all sequences' experts once. Requests join between steps and leave when done or
// cancelled.
//
// Each sequence decodes through its own Decoder (runtime/decoder.h), as generate()
// does, so its output is what generate() gives for the same prompt and sampling
// alone (the model's batched pass computes each row as the single pass does).
//
// Thread safety: submit/stats/shutdown from any thread; a GenHandle is shared
// between its owner (any thread) and the scheduler.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "json/json_constraint.h"
#include "runtime/decoder.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

class StreamingExpertStore;
class PromptDiskCache;

struct SchedulerOptions {
  int n_parallel = 4;       // sequences in the batch at most; more wait in the queue
  int n_ctx = 4096;         // context per sequence (prompt + generated)
  int prefill_chunk = 256;  // prompt tokens per step, all sequences together
  int max_queue = 64;       // requests waiting for a batch place at most
  // Prompt cache: a finished request's state is kept (with the tokens it holds)
  // while its batch place is free, and a new request whose prompt starts with those
  // tokens takes it and evaluates only the rest (a chat's next turn resends the whole
  // conversation); a request sharing a long prefix with a running one (a common
  // system prompt) starts from a copy of its state. Active plus kept states never
  // exceed n_parallel, so the memory bound is that of n_parallel running requests.
  bool prompt_cache = true;
  // Beyond the batch places: kept states that would be dropped are shrunk to the
  // positions they hold (SeqState::fit) and parked in RAM, up to this many bytes
  // (the oldest dropped first); one taken back is fitted to n_ctx again. 0: none.
  uint64_t prompt_cache_bytes = 0;
  // Below the parked states, on disk: a state the RAM tier drops, and at shutdown every
  // kept and parked one, is written here; a request takes the longest usable prefix
  // among kept, parked and disk states (so a restarted server resumes its
  // conversations). Not owned; null: none.
  PromptDiskCache* disk = nullptr;
  // With streamed experts: while no sequence decodes (nobody waits on a step), the
  // prompts in the batch go in larger steps, as many tokens as the expert cache lends
  // memory for (borrow_for_prompt, runtime/memory_budget.h), since every step reads the experts
  // its tokens use once; the memory goes back when a sequence decodes or the prompts
  // are in. Null: prefill_chunk tokens a step always.
  StreamingExpertStore* store = nullptr;
  // Speculation per sequence (0: off): a decoding sequence adds up to this many
  // guessed tokens (its drafters', or a forced call's certain text) to its rows of
  // the step, verified in the same pass (each sequence's Speculator sizes its drafts
  // from its measured acceptance; runtime/decoder.h).
  int spec_max = 16;
  bool spec_adaptive = true;  // false: draft spec_max guesses whenever there are any (tests)
  // The drafters of each request's Speculator (default: prompt lookup).
  std::function<std::vector<std::unique_ptr<Drafter>>()> make_drafters;
};

constexpr int kPromptLogprobRows = 32;  // prompt tokens a step evaluates for prompt_logprobs

struct GenRequest {
  std::vector<int32_t> prompt;
  int max_tokens = -1;  // < 0: until end of generation or the context is full; 0: the prompt only
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  // >= 0: report each generated token's TokenLogprob (the log-softmax of the model's
  // logits at its position, before the sampler's penalties, bias and temperature:
  // what the model predicts, whatever was drawn; speculation changes nothing) with
  // this many alternatives (at most kMaxTopLogprobs). The end-of-generation token and
  // the tokens of a stop string (and after it) are not reported, as their text is not.
  int logprobs = -1;
  // With logprobs >= 0: also every prompt token's, predicted from the tokens before it
  // (the first's logprob is NaN: nothing predicts it), in GenUpdate::prompt_logprobs
  // once the prompt is in. The whole prompt is then evaluated (the prompt cache is not
  // used) in steps of at most kPromptLogprobRows tokens, and it takes one choice.
  bool prompt_logprobs = false;
  // Control tokens whose text the reply shows (normally hidden): the markers a chat
  // format's reply parser reads, such as <|tool_call_begin|> or Kimi K3's <|open|>.
  std::vector<int32_t> shown_tokens;
  // Structured output (response_format): the generated text is a document of this
  // grammar. Before the sampler sees a row, tokens that cannot continue the document
  // get -inf (logprobs still report the row as the model gave it); end of generation
  // is allowed only once the document is whole and is then the only choice, and it
  // ends the request even with ignore_eos. Speculation stays on: each guess is
  // verified against the masked row of its position. Control tokens (shown_tokens
  // too) are never allowed: they are no part of JSON. Null: free text.
  std::shared_ptr<const JsonGrammar> json;
};

// What arrived for a request since the last wait().
struct GenUpdate {
  std::string text;
  // With GenRequest::logprobs: the tokens whose text starts in `text` (a token whose
  // bytes are only part of a character comes with the text that completes it).
  std::vector<TokenLogprob> logprobs;
  std::vector<TokenLogprob> prompt_logprobs;  // GenRequest::prompt_logprobs: all of them, in one update
  bool done = false;
  // When done: "stop" (end of generation or a stop string), "length" (max_tokens
  // or the context), "cancelled", "error".
  std::string finish_reason;
  std::string error;  // finish_reason == "error"
  std::string stop_string;  // finish_reason "stop" by a stop string: that string ("" at end of generation)
  int n_prompt = 0, n_generated = 0;
  int n_cached = 0;  // prompt tokens taken from the prompt cache, not evaluated
};

// What the handles of one request's choices share: wakes wait_any.
struct GenSignal {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t posts = 0;
};

class GenHandle {
 public:
  // Waits up to `timeout` for new text or the end and takes what arrived.
  GenUpdate wait(std::chrono::milliseconds timeout);
  // Waits up to `timeout` until one of `hs` (the handles submit_choices returned) has
  // new text or its end not taken yet; takes nothing (wait(0) on each then does).
  static void wait_any(const std::vector<std::shared_ptr<GenHandle>>& hs, std::chrono::milliseconds timeout);
  // Asks the scheduler to drop the request at the next step (idempotent).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // Asks the scheduler to end the request at the next step as a finished one ("stop":
  // its state is kept for the prompt cache); text generated before then still comes.
  void stop() { stop_ = true; }

 private:
  friend class Scheduler;
  void post(const std::string& text, bool done, const std::string& reason, const std::string& error,
            int n_generated, std::vector<TokenLogprob> logprobs = {}, std::vector<TokenLogprob> prompt_logprobs = {});
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  std::vector<TokenLogprob> logprobs_, prompt_logprobs_;
  bool done_ = false, taken_done_ = false;
  std::string reason_, error_, stop_string_;
  int n_prompt_ = 0, n_generated_ = 0, n_cached_ = 0;
  std::shared_ptr<GenSignal> signal_;  // set when it is one of several choices
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> stop_{false};
};

struct SchedulerStats {
  uint64_t prompt_tokens = 0, generated_tokens = 0, steps = 0;
  uint64_t cached_prompt_tokens = 0;  // prompt tokens the prompt cache spared (not in prompt_tokens)
  uint64_t prompt_cache_hits = 0;     // requests that took a kept state
  int parked = 0;                     // prompt cache states parked in RAM beyond the batch places
  uint64_t parked_bytes = 0;          // and their memory
  uint64_t prompt_cache_disk_hits = 0;  // requests that took a state from the disk tier
  int disk_states = 0;                  // states in the disk tier
  uint64_t disk_bytes = 0;              // and their bytes
  uint64_t batch_rows = 0;  // rows evaluated over all steps
  double prefill_s = 0, decode_s = 0;  // step time split by each step's share of rows
  double recent_tokens_per_s = 0;      // generated tokens/s over the last few seconds
  int active = 0, queued = 0;
  uint64_t finished = 0, cancelled = 0, failed = 0;
  uint64_t drafted = 0, accepted = 0;  // speculation: guessed tokens verified / kept
  uint64_t literal_drafted = 0, literal_accepted = 0;  // of them, a document's certain literal text
  uint64_t prefill_lent_bytes = 0;     // expert cache memory lent to the prompts' steps now
  int max_prefill_rows = 0;            // the most prompt tokens one step evaluated
};

enum class SubmitError { None, Invalid, Busy, ShuttingDown };

class Scheduler {
 public:
  Scheduler(Model& model, const Tokenizer& tok, const SchedulerOptions& opts);
  ~Scheduler();  // shutdown(false)

  // Queues a request. Invalid: empty prompt or longer than the context (the message
  // names both numbers); Busy: the queue is full; ShuttingDown: after shutdown().
  std::shared_ptr<GenHandle> submit(GenRequest req, SubmitError* err, std::string* message);

  // n completions of one prompt (OpenAI's `n`), queued together, each with its own
  // handle and sampler (a seeded request's choice i uses seed + i). The prompt is
  // evaluated once: the first choice's sequence evaluates it and the others start
  // from a copy of its state and last logits. Also Invalid when n > n_parallel.
  std::vector<std::shared_ptr<GenHandle>> submit_choices(GenRequest req, int n, SubmitError* err,
                                                         std::string* message);

  // Stops taking requests. drain: finish what is queued and running, waiting at most
  // `timeout`, then cancel the rest; else cancel everything now. Joins the thread.
  void shutdown(bool drain, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Cancels everything queued and running at the next step (also ends a drain).
  void cancel_all();

  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return opts_; }

 private:
  struct Seq;
  struct SharedPrompt;
  // A choice that waits for its first choice's prompt: takes a copy of the state and
  // samples its first token once the prompt is in; evaluates the prompt itself if
  // the first choice ended before that. False while it still waits.
  bool adopt_prompt(Seq& s);
  void loop();
  bool step(std::vector<std::unique_ptr<Seq>>& active);
  // Posts what a Decoder step gave; ends the request when the step ended decoding.
  // Adds the tokens it emitted to *generated. False when `s` finished.
  bool deliver(Seq& s, const DecodeStep& step, int* generated);
  // Queues the prompt logprobs of a step that evaluated n prompt tokens of `s` (its
  // logits hold every row).
  void note_prompt_logprobs(Seq& s, int n);
  void finish(Seq& s, const std::string& reason, const std::string& error = {});
  // Gives `s` a state: the kept or parked one sharing the longest prefix with its
  // prompt, or a copy of a running sequence's if that shares more (rolled back to
  // the prefix), else a new one. The oldest kept states are parked when active plus
  // kept states would exceed n_parallel.
  void assign_state(Seq& s, const std::vector<std::unique_ptr<Seq>>& active);
  // Prompt tokens this step may evaluate: prefill_chunk, or more with memory the
  // expert cache lends while no sequence decodes (returned otherwise).
  int prefill_budget(const std::vector<std::unique_ptr<Seq>>& active);
  void return_lent();

  struct Kept {
    std::unique_ptr<SeqState> state;
    std::vector<int32_t> tokens;  // what the state holds, position by position
    uint64_t bytes = 0;           // parked: its memory (fitted to its positions)
  };
  // Fits a kept state to its positions and parks it (dropping the oldest parked
  // ones to stay within prompt_cache_bytes), or drops it.
  void park(Kept k);
  void note_parked();  // the parked states' count and bytes into stats_
  void to_disk(const Kept& k);  // writes a state being dropped to the disk tier, if any
  void note_disk();  // the disk tier's count and bytes into stats_

  Model& model_;
  const Tokenizer& tok_;
  SchedulerOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Seq>> queue_;
  bool stopping_ = false, draining_ = false;
  std::atomic<int> n_active_{0};
  SchedulerStats stats_;  // counters, under mu_
  std::deque<std::pair<double, int>> recent_;  // (time, tokens) of recent steps, under mu_
  std::deque<Kept> kept_;  // prompt cache, oldest first (scheduler thread only)
  std::deque<Kept> parked_;  // beyond the batch places, oldest first (scheduler thread only)
  uint64_t parked_bytes_ = 0;
  uint64_t lent_ = 0;      // bytes the expert cache lent for prompt steps (scheduler thread only)
  // The vocabulary as bytes for structured requests, built for the first one
  // (scheduler thread only; shared by their constraints).
  std::shared_ptr<const JsonTokenTable> json_table_;
  std::thread thread_;
};

}  // namespace deltafin
