// Token sampling, in llama.cpp's default order: penalties -> logit bias -> top-k ->
// top-p -> min-p -> temperature -> draw. temperature <= 0 is greedy (argmax, lowest
// id on ties). A seeded sampler reproduces its draws.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace deltafin {

struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;          // <= 0: off
  float top_p = 0.95f;     // >= 1: off
  float min_p = 0.05f;     // <= 0: off
  float repeat_penalty = 1.0f;   // 1: off
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int penalty_last_n = 64;
  std::map<int32_t, float> logit_bias;
  static constexpr uint64_t kRandomSeed = 0xFFFFFFFF;
  uint64_t seed = kRandomSeed;  // kRandomSeed: a random one
};

// A sampling parameter outside the values it can take, NaN included: `field` is
// its name in the server's requests (top_p), `flag` the command line's (--top-p),
// `problem` what is wrong ("is 5; it must be above 0 and at most 1").
struct SamplingProblem {
  const char* field;
  const char* flag;
  std::string problem;
};
// The first such parameter of p, if any. The server and the command line check
// with it (on top of the server's own API ranges).
std::optional<SamplingProblem> check_sampling(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // Picks the next token from logits[n_vocab] (modified in place).
  int32_t sample(float* logits, int64_t n_vocab);
  // Speculative decoding: the token to emit at a position for which `draft` was
  // proposed, with the distribution of sample() (so speculation changes nothing
  // but speed). The draft is a proposal with all its mass on one token (drafters
  // propose greedily): it is kept with probability p(draft), else the token is drawn
  // from p without it, renormalised — P(x) = p(d)[x=d] + (1-p(d)) p(x)/(1-p(d)) [x!=d]
  // = p(x). Greedy: the argmax, kept iff it equals the draft. *accepted: the result
  // is the draft.
  int32_t verify(float* logits, int64_t n_vocab, int32_t draft, bool* accepted);
  // Records an emitted (or prompt) token for the penalties.
  void accept(int32_t id);
  void reset();
  // The candidate set after the filters of the last sample() call (for tests):
  // pairs of (id, probability) that could have been drawn.
  const std::vector<std::pair<int32_t, float>>& last_candidates() const { return cands_; }

 private:
  // Fills cands_ with what sample() would draw from (greedy: the argmax alone).
  void candidates(float* logits, int64_t n_vocab);

  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<int32_t> history_;
  std::vector<std::pair<int32_t, float>> cands_;
};

int32_t argmax(const float* logits, int64_t n);

// A token's log-probability under logits (their log-softmax), and the most likely
// tokens'.
struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob), most likely first (lower id on ties)
  size_t offset = 0;  // for the caller: where the token's text starts in its output (bytes)
};
constexpr int kMaxTopLogprobs = 20;
// `id`'s entry with the top_n (0..kMaxTopLogprobs) most likely tokens.
TokenLogprob token_logprob(const float* logits, int64_t n_vocab, int32_t id, int top_n);

}  // namespace deltafin
