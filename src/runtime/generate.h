// The generation loop of run and chat: prefill the prompt (in chunks), then a loop
// over one Decoder (runtime/decoder.h: sampling, the JSON constraint, stop strings,
// speculation), evaluating its pending token and guesses each pass, streaming text
// out through a callback. The server batches several Decoders (runtime/scheduler.h).
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model.h"
#include "json/json_grammar.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "store/streaming_store.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

struct GenerateParams {
  int n_predict = 128;          // < 0: until end of generation or the context is full
  // Prompt tokens per forward pass; <= 0: auto, kAutoBatch, or with `store` as many as
  // the expert cache can lend the memory for, up to the whole prompt (a streamed
  // prompt reads its batch's union of experts once per batch: for a long prompt
  // that is nearly every expert, per batch).
  int n_batch = 0;
  static constexpr int kAutoBatch = 512;
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (not emitted)
  bool ignore_eos = false;
  // Control tokens whose text the output shows (normally hidden): the markers of a
  // reply format (Kimi K3's <|open|> ...).
  std::vector<int32_t> shown_tokens;
  // Structured output: the reply is constrained to a document of this grammar (tokens
  // that cannot continue it are masked before sampling; end of generation comes when
  // it is complete, ignore_eos notwithstanding). Null: free text.
  std::shared_ptr<const JsonGrammar> json;
  // Pins the state at the prompt's end (SeqState::pin), so a later prompt that shares
  // it can roll back there however long the answer (a chat's next turn).
  bool pin_prompt = false;
  // Polled between prompt chunks and before each token; true stops generation with
  // stop_reason "cancelled" (e.g. set from a SIGINT handler). Null: never.
  const std::atomic<bool>* cancel = nullptr;
  Speculator* speculator = nullptr;     // not owned; null: one token per pass
  StreamingExpertStore* store = nullptr;  // for bytes_read in the stats and auto n_batch; may be null
};

struct GenerateStats {
  int n_prompt = 0, n_generated = 0;
  double prefill_s = 0, decode_s = 0, ttft_s = 0;
  std::vector<int32_t> tokens;  // generated ids
  std::string stop_reason;      // "eos", "length", "stop", "cancelled", "context", or "error"
                                // (a constrained document no token can continue)
  int passes = 0;               // decode forward passes
  int drafted = 0, accepted = 0;  // speculation: guesses verified / kept
  int literal_drafted = 0, literal_accepted = 0;  // of them, a JSON document's certain literal text
  uint64_t decode_bytes_read = 0;  // expert bytes read while decoding (with params.store)
  uint64_t prefill_bytes_read = 0;  // expert bytes read for the prompt (with params.store)
  int prefill_batches = 0;         // forward passes over the prompt
  int prefill_batch = 0;           // prompt tokens per pass (the last may have fewer)
  uint64_t prefill_lent_bytes = 0;  // expert cache memory the prompt's batches borrowed
  double decode_cpu_s = 0;  // the process's CPU time (user + sys, all threads) while decoding
};

// on_text gets each new piece of text (valid UTF-8); returning false cancels.
// When it returns, `state` holds the prompt and every sampled token but the last
// one sampled (with or without speculation).
Status generate(Model& model, SeqState& state, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                const GenerateParams& params, const std::function<bool(const std::string&)>& on_text,
                GenerateStats* stats);

}  // namespace deltafin
