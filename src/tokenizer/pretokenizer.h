// Pre-tokenizers for byte-level BPE: split text into the words that BPE merges
// within, by a chain of regexes (each splits the pieces the previous produced;
// text between matches becomes a piece of its own), as llama.cpp does.
//
// llama.cpp runs its regexes on a "collapsed" copy of the text in which every
// non-ASCII codepoint becomes one byte naming its category (letter, number,
// punctuation, mark, symbol, whitespace, other), and rewrites \p{L} and friends
// into classes over those bytes plus their ASCII members. So \p{Lu} means any
// letter, and [^a-z] accepts every non-ASCII letter. We reproduce that exactly
// by running PCRE2 (JIT) on the same collapsed text. Regexes without \p{..} run
// on the codepoints themselves (PCRE2 in UTF mode, ASCII-only \s), with non-ASCII
// whitespace replaced by U+000B, as llama.cpp's std::wregex fallback does
// (codepoints from U+D800 up are shifted past the surrogates, which PCRE2 would
// reject and std::wregex does not).
// llama.cpp's hand-written splitters for the GPT-2, Llama 3, Qwen2 and Qwen3.5
// patterns agree with their regexes; the Kimi-K2 and digit-grouping splitters
// have no regex of their own and are expressed here as equivalent stages.
//
// Thread safety: a PreTokenizer is immutable after creation; split() may be
// called from many threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deltafin {

// Pre-tokenizer kinds, one per distinct llama.cpp regex list.
enum class PreKind {
  kDefault, kLlama3, kJais2, kDbrx, kDeepseekLlm, kDeepseek3Llm, kSpark25, kYoutu,
  kDeepseekCoder, kFalcon, kStarcoder, kGpt2, kQwen2, kQwen35, kPoro, kChatglm4,
  kViking, kTekken, kChameleon, kGpt4o, kGraniteEmbMulti, kTinyAya, kKimiK2,
  kBailingmoe, kSeedCoder, kUfakzeka, kGrok2, kAfmoe, kLaguna, kExaoneMoe, kMinicpm5,
};

class PreTokenizer {
 public:
  // The stages llama.cpp uses for `kind`.
  static Result<PreTokenizer> create(PreKind kind);
  // Stages from llama.cpp-style regexes (tests, experiments).
  static Result<PreTokenizer> from_patterns(const std::vector<std::string>& patterns);

  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Splits `cpts` (one fragment of text, as codepoints) into pieces; appends the
  // length of each piece, in codepoints, to `lengths`. The lengths sum to
  // cpts.size(); none is zero.
  void split(const std::vector<uint32_t>& cpts, std::vector<uint32_t>& lengths) const;

  // The PCRE2 pattern a llama.cpp-style regex becomes on the collapsed text, or
  // an empty string if it runs on codepoints (exposed for tests).
  static std::string collapsed_pattern(std::string_view pattern, bool han_distinct);

  struct Stage;

 private:
  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace deltafin
