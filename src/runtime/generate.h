// The generation loop: prefill the prompt (in chunks), then sample and evaluate one
// token at a time, streaming text out through a callback. Used by run, chat and the
// server.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

struct GenerateParams {
  int n_predict = 128;          // < 0: until end of generation or the context is full
  int n_batch = 512;            // prompt tokens per forward pass
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (not emitted)
  bool ignore_eos = false;
  // Polled between prompt chunks and before each token; true stops generation with
  // stop_reason "cancelled" (e.g. set from a SIGINT handler). Null: never.
  const std::atomic<bool>* cancel = nullptr;
};

struct GenerateStats {
  int n_prompt = 0, n_generated = 0;
  double prefill_s = 0, decode_s = 0, ttft_s = 0;
  std::vector<int32_t> tokens;  // generated ids
  std::string stop_reason;      // "eos", "length", "stop", "cancelled", "context"
};

// on_text gets each new piece of text (valid UTF-8); returning false cancels.
Status generate(Model& model, SeqState& state, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                const GenerateParams& params, const std::function<bool(const std::string&)>& on_text,
                GenerateStats* stats);

}  // namespace deltafin
