// Speculative decoding. A drafter guesses the next few tokens cheaply; the target
// model evaluates the pending token and the guesses in one forward pass (an MoE
// layer loads the union of their experts once) and keeps the longest prefix its own
// sampler agrees with (runtime/sampler.h Sampler::verify), plus one token of its own.
// The state is truncated past the first rejected guess. When the expert reads of a
// pass dominate its cost, k guesses cost little more than one token, so every
// accepted guess is a token nearly for free.
//
// Drafters (one interface):
//   ngram  the continuation of the latest earlier occurrence of the last few tokens
//          in the prompt and output (prompt lookup): free, good on repetitive text;
//   self   the target itself restricted to the experts already in RAM (the store's
//          resident-only mode: missing experts skipped, routing weights renormalised),
//          drafting in place on the target's own state and truncating back: no I/O,
//          no second KV cache, the exact context;
//   draft  a separate small GGUF with the same vocabulary and its own state.
//
// The Speculator picks a drafter and a draft length per pass from what it measures:
// each drafter's acceptance by depth (p_i: guess i right when guesses 0..i-1 were)
// and drafting time per token, and the verify pass's cost as a + b * (tokens - 1).
// It drafts k tokens where expected tokens per second,
// (1 + p_0 + p_0 p_1 + ... + p_0 ... p_(k-1)) / (a + (b + c) k), beats a plain pass
// by a margin.
// Otherwise its guesses are only shadows, compared with what the target emits and
// never verified (no verify rows, no expert reads): speculation switches itself off
// when it does not pay, and back on when the shadows show that it would.
//
// Thread safety: none; one Speculator per sequence, used by its decode loop.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/environment.h"
#include "core/result.h"
#include "model/model.h"

namespace deltafin {

class Engine;
class Tokenizer;

enum class SpecMode { Off, Auto, Ngram, Self, Draft, Mtp };

struct SpecOptions {
  SpecMode mode = SpecMode::Auto;
  std::string draft_path;  // SpecMode::Draft: the draft model GGUF
  Environment env;         // SpecMode::Draft: opens the draft model (EngineOptions::env)
  int max_draft = 16;      // most drafted tokens per pass (<= kMaxDraft); the adaptive choice is usually shorter
  bool adaptive = true;    // false: always draft max_draft tokens (tests, measurements)
  bool auto_self = true;   // Auto: self-speculation too when the experts stream (the server: off)
  static constexpr int kMaxDraft = 16;  // kimi-k3's KDA state rolls back 16 tokens
};

// "auto" | "off" | "ngram" | "self" | "mtp" | "draft:PATH".
Status parse_spec_mode(const std::string& s, SpecOptions* out);
const char* spec_mode_name(SpecMode m);

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;
  // Proposes up to max_n (>= 1) tokens to follow `seq` (the prompt and the emitted
  // tokens; its last token is the pending one, not yet in `target`, which holds the
  // rest: target.n_past == seq.size() - 1, with room for max_n more). Appends them to
  // *out; fewer or none when it has no guess. Leaves `target` as it found it.
  virtual Status propose(const std::vector<int32_t>& seq, SeqState& target, int max_n,
                         std::vector<int32_t>* out) = 0;
};

// Prompt lookup: the longest suffix of seq of min_match..max_match tokens that
// occurred before; proposes what followed its latest occurrence.
std::unique_ptr<Drafter> make_ngram_drafter(int min_match = 2, int max_match = 4);
// The target restricted to the experts in RAM (ForwardOptions::resident_experts_only);
// when every expert is resident the draft is the full model.
std::unique_ptr<Drafter> make_self_drafter(Model& target);
// The target's own multi-token-prediction block (Model::mtp_draft; DeepSeek-style
// nextn): greedy chained guesses, its own small cache, no second model.
std::unique_ptr<Drafter> make_mtp_drafter(Model& target);
// A separate draft model (its own state); its vocabulary must equal the target's
// token for token. model_drafters checks that once and makes any number of drafters
// sharing the draft's engine (one per sequence, all used from one thread).
Result<std::unique_ptr<Drafter>> make_model_drafter(std::shared_ptr<Engine> draft, const Tokenizer& target_vocab,
                                                    int n_ctx);
Result<std::function<std::unique_ptr<Drafter>()>> model_drafters(std::shared_ptr<Engine> draft,
                                                                 const Tokenizer& target_vocab, int n_ctx);

struct SpecStats {
  int passes = 0;           // verify passes (forward calls while decoding)
  int spec_passes = 0;      // of them, passes that carried drafted tokens
  int drafted = 0, accepted = 0;
  double draft_s = 0;       // time spent drafting
  std::vector<std::string> per_drafter;  // one line each: name, drafted, accepted, alpha, cost
};

class Speculator {
 public:
  // Drafters in order of preference: each pass takes the first one's guesses.
  Speculator(std::vector<std::unique_ptr<Drafter>> drafters, int max_draft, bool adaptive = true);
  ~Speculator();
  // The drafted tokens for the next pass (possibly none: a plain pass), at most
  // `limit`. Same contract as Drafter::propose for seq and target.
  Status draft(const std::vector<int32_t>& seq, SeqState& target, int limit, std::vector<int32_t>* out);
  // What the pass that followed draft() did: how many of the drafted tokens were
  // accepted, and the verify forward's wall time.
  void feedback(int n_drafted, int n_accepted, double pass_s);
  SpecStats stats() const;
  int max_draft() const { return max_draft_; }  // the most guesses per pass

 private:
  struct Lane;
  int choose_k(const Lane& l, int limit) const;
  int best_k(const Lane& l, double hopeful, int limit) const;
  bool could_pay(const Lane& l) const;
  void start(Lane& l);
  void count(Lane& l, int from, int to, bool wrong);
  void resolve_shadows(Lane& l, const std::vector<int32_t>& seq);
  Status maybe_shadow(Lane& l, const std::vector<int32_t>& seq, SeqState& target, int limit);
  Status timed_propose(Lane& l, const std::vector<int32_t>& seq, SeqState& target, int k,
                       std::vector<int32_t>* out);
  std::vector<std::unique_ptr<Lane>> lanes_;
  int max_draft_;
  bool adaptive_;
  int last_lane_ = -1;
  void fit_pass_cost(int k, double t);
  double a_ = 0, b_ = 0;  // verify pass time: a + b * (tokens - 1)
  bool have_a_ = false;
  int n_plain_ = 0, n_spec_ = 0;  // passes measured without and with drafts
  SpecStats st_;
};

// Each sequence's drafters for `opts` on `target`, one new set per call (a draft
// model is opened once, here, and shared; null for SpecMode::Off). Auto: n-gram, the
// model's MTP block where it has one, and self-speculation when the experts stream
// (and opts.auto_self). threads: for a draft model's engine.
using DrafterFactory = std::function<std::vector<std::unique_ptr<Drafter>>()>;
Result<DrafterFactory> make_drafter_factory(const SpecOptions& opts, Engine& target, const Tokenizer& tok,
                                            int n_ctx, int threads);
// The speculator of one sequence for `opts` (null for SpecMode::Off).
Result<std::unique_ptr<Speculator>> make_speculator(const SpecOptions& opts, Engine& target,
                                                    const Tokenizer& tok, int n_ctx, int threads);

}  // namespace deltafin
