// What scheduler.cpp and scheduler_cache.cpp share: a request's sequence in the
// scheduler and the prompt of n choices. Internal to the scheduler.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/decoder.h"
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

// One request in the scheduler: its sequence state and its Decoder (sampling,
// constraint, text, speculation: runtime/decoder.h).
struct Scheduler::Seq {
  std::shared_ptr<GenHandle> handle;
  GenRequest req;
  std::unique_ptr<SeqState> state;
  std::unique_ptr<Speculator> spec;  // null: speculation off
  std::unique_ptr<Decoder> dec;      // made when the request enters the batch
  std::vector<float> logits;
  std::vector<int32_t> pass;         // this step's rows while decoding: the pending token, then guesses
  std::vector<int32_t> held;         // the tokens the state holds, position by position
  int n_prompt_done = 0;  // prompt tokens evaluated
  bool decoding = false;
  bool done = false;
  // One of n choices: the first publishes its prompt's state here (publisher), the
  // others wait for it.
  std::shared_ptr<SharedPrompt> shared;
  bool publisher = false;
  std::vector<TokenLogprob> prompt_lps;  // req.prompt_logprobs: those of the prompt evaluated so far
};

}  // namespace deltafin
