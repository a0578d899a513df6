// One sequence's decoding, the same for `generate` (run, chat: a loop over one
// Decoder) and the server's Scheduler (several Decoders' passes batched into one
// forward): the sampler, the JSON constraint (json/json_constraint.h), the shown
// text with its stop strings and partial UTF-8 (runtime/output_text.h), logprobs,
// and speculation (runtime/speculative.h: every drafter, and a constrained
// document's certain literal text as the guess where there is one).
//
// A pass:  tokens = plan(state)       the pending token, then the guesses
//          forward(state, tokens)     the caller's; every row's logits
//          step = accept(rows)        verifies the guesses, emits tokens and text
//          state.truncate(base + step.n_keep)
// The first token comes from start() with the prompt's last row; done() says when
// to stop, end() why, and finish() gives the held-back text. Speculation never
// changes what is emitted: guess j stands only where the sampler keeps it
// (Sampler::verify), so the output is that of one token per pass, greedy or seeded.
//
// Thread safety: none; one Decoder per sequence, used by one thread at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "json/json_constraint.h"
#include "model/model.h"
#include "runtime/output_text.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

struct DecoderOptions {
  int max_tokens = -1;  // generated tokens at most; < 0: until the end or the context is full; 0: none
  int n_ctx = 0;        // the state's context: a token with no place left in it ends decoding
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (not shown)
  bool ignore_eos = false;
  std::vector<int32_t> shown_tokens;  // control tokens whose text is shown (StreamDecoder)
  // Structured output: tokens that cannot continue the document are masked before
  // sampling; end of generation comes once it is whole (ignore_eos notwithstanding).
  std::shared_ptr<const JsonGrammar> json;
  std::shared_ptr<const JsonTokenTable> json_table;  // the vocabulary's bytes; null: built for json
  int logprobs = -1;  // >= 0: each emitted token's TokenLogprob with this many alternatives
  // Guesses per pass (not owned; null: one token per pass, no literal guesses either).
  Speculator* speculator = nullptr;
};

// Why decoding ended. Eos: end of generation (or a whole document); Stop: a stop
// string; Length: max_tokens; Context: no place left; Error: a document no token
// can continue.
enum class DecodeEnd { None, Eos, Stop, Length, Context, Error };

// What one start() or accept() did.
struct DecodeStep {
  std::string text;  // text that can be shown now (maybe empty)
  // With DecoderOptions::logprobs: the tokens whose text starts in `text` (a token
  // whose bytes are only part of a character comes with the text that completes it).
  std::vector<TokenLogprob> logprobs;
  int n_emitted = 0;  // tokens generated (the end-of-generation token is not one)
  int n_keep = 0;     // accept(): rows the state keeps: the pending token and the kept guesses
  int n_drafted = 0, n_accepted = 0;  // accept(): guesses verified / kept (a kept one that ends decoding too)
  bool literal = false;               // the guesses were the document's literal text
  DecodeEnd end = DecodeEnd::None;    // not None: decoding ended in this step
  std::string error;                  // end == Error
};

class Decoder {
 public:
  // tok must outlive the decoder; prompt: the tokens before the first generated one.
  Decoder(const Tokenizer& tok, const std::vector<int32_t>& prompt, DecoderOptions opts);
  // The first token, from the prompt's last row (n_vocab logits, masked in place);
  // n_past: the positions the state holds (the token's place).
  DecodeStep start(float* row, int64_t n_vocab, int n_past);
  // This pass's tokens into *tokens: the pending token, then the guesses. Drafters
  // may run the model on `state` (target.n_past is the pending token's place) and
  // leave it as they found it; one that fails costs only its guesses. An error only
  // when the state was left changed.
  Status plan(SeqState& state, std::vector<int32_t>* tokens);
  // The logits of plan()'s tokens, row j the one after token j ([n, n_vocab], masked
  // in place); pass_s: the forward's wall time (for the speculator's cost model).
  DecodeStep accept(float* rows, int64_t n_vocab, double pass_s);
  // The text held back for a stop string and partial UTF-8, and its logprobs; call
  // once at the end (not when cancelled or failed: that text is dropped).
  DecodeStep finish();

  bool done() const { return end_ != DecodeEnd::None; }
  DecodeEnd end() const { return end_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // generated ids
  int n_generated() const { return int(tokens_.size()); }
  const OutputText& output() const { return out_; }

 private:
  // Samples `row` (verifying `draft` there when >= 0; *kept: it stands); -1 when no
  // token can continue the document.
  int32_t pick(float* row, int64_t n_vocab, int32_t draft, bool* kept);
  // Takes a picked token at position `pos`; false when decoding ends with it.
  bool take(int32_t id, int pos, DecodeStep* step);
  void take_logprobs(bool all, DecodeStep* step);

  const Tokenizer& tok_;
  DecoderOptions o_;
  Sampler sampler_;
  OutputText out_;
  std::optional<JsonConstraint> json_;
  std::vector<int32_t> seq_;      // with a speculator: the prompt and the tokens taken, the last one pending
  std::vector<int32_t> pass_;     // plan()'s tokens
  int base_ = 0;                  // the state's positions at plan()
  bool literal_ = false;          // pass_'s guesses are literal text
  int literal_drafted_ = 0, literal_kept_ = 0;
  std::vector<int32_t> tokens_;
  int32_t pending_ = -1;
  DecodeEnd end_ = DecodeEnd::None;
  // Logprobs: the row before the mask and sampler changed it, the last picked token's
  // entry, and entries whose text is not all out yet (with the end of their text).
  std::vector<float> raw_;
  TokenLogprob lp_next_;
  std::vector<std::pair<TokenLogprob, size_t>> lp_;
};

const char* decode_end_name(DecodeEnd e);  // "eos", "stop", "length", "context", "error" ("" for None)

}  // namespace deltafin
