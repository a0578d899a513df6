// What scheduler.cpp and scheduler_cache.cpp share: a request's sequence in the
// scheduler and the prompt of n choices. Internal to the scheduler.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/output_text.h"
#include "runtime/scheduler.h"

namespace deltafin {

// The prompt of a request's n choices, evaluated by the first: its state and last
// logits once the prompt is in, for the others to copy.
struct Scheduler::SharedPrompt {
  bool ready = false, failed = false;
  int waiting = 0;  // choices that have not taken their copy yet
  std::unique_ptr<SeqState> state;
  std::vector<float> logits;
  std::vector<int32_t> held;
};

// One request in the scheduler: its sequence state, sampler and text output.
struct Scheduler::Seq {
  std::shared_ptr<GenHandle> handle;
  GenRequest req;
  std::unique_ptr<SeqState> state;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<OutputText> out;
  std::vector<float> logits;
  std::unique_ptr<Speculator> spec;  // null: speculation off
  bool literal_draft = false;        // this pass's guesses are the document's literal text, not spec's
  int literal_drafted = 0, literal_kept = 0;  // those guesses so far (kept: the model spelled them so)
  std::unique_ptr<JsonConstraint> json;  // req.json's document so far; null: free text
  std::vector<int32_t> hist;         // prompt and sampled tokens (the last one pending while decoding)
  std::vector<int32_t> pass;         // this step's rows while decoding: the pending token, then guesses
  std::vector<int32_t> held;         // the tokens the state holds, position by position
  int n_prompt_done = 0;  // prompt tokens evaluated
  int n_generated = 0;
  int32_t next = -1;      // the sampled token to evaluate next (decoding)
  bool decoding = false;
  bool done = false;
  // One of n choices: the first publishes its prompt's state here (publisher), the
  // others wait for it.
  std::shared_ptr<SharedPrompt> shared;
  bool publisher = false;
  // Logprobs (req.logprobs >= 0): a row's logits before the sampler changed them, the
  // last picked token's entry, and the entries emitted whose text is not all out yet
  // (with the end of their text, in bytes of the generated text).
  std::vector<float> raw;
  TokenLogprob lp_next;
  std::deque<std::pair<TokenLogprob, size_t>> lp;
  std::vector<TokenLogprob> prompt_lps;  // req.prompt_logprobs: those of the prompt evaluated so far
};

}  // namespace deltafin
