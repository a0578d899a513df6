// Tokenizer: text <-> token ids from GGUF metadata alone, matching llama.cpp
// (llama_tokenize / llama_token_to_piece / llama_detokenize) token for token.
//
//   auto tok = Tokenizer::from_gguf(file);            // Result<Tokenizer>
//   std::vector<int32_t> ids = tok->encode("Hello", /*add_special=*/true, /*parse_special=*/false);
//   std::string text = tok->decode(ids);
//
// encode(): special tokens are split out first (longest text first; control and
// unknown tokens only when parse_special, user-defined tokens always; some carry
// lstrip/rstrip rules that swallow adjacent whitespace), then each stretch of
// text is tokenized: byte-level BPE after the model's pre-tokenizer, or SPM with
// the leading-space rule (a space is prefixed to the text at the start and after
// every special token). add_special adds BOS/EOS as the metadata asks.
//
// Thread safety: a Tokenizer is immutable after creation; all const methods may
// be called concurrently. StreamDecoder is single-threaded state.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "format/gguf.h"
#include "tokenizer/vocab.h"

namespace deltafin {

struct DecodeOptions {
  bool remove_special = false;   // drop a leading BOS / trailing EOS the model adds
  bool unparse_special = false;  // render control/unknown tokens as their text
  // Apply the model's clean-up (" ." -> ".", " 's" -> "'s", ...) where its
  // metadata asks for it, as llama_detokenize does; false concatenates pieces.
  bool clean_spaces = true;
};

class Tokenizer {
 public:
  static Result<Tokenizer> from_gguf(const GGUFFile& file);
  static Result<Tokenizer> from_vocab(Vocab vocab);

  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Text of one token (llama_token_to_piece with lstrip = 0): byte-level BPE
  // tokens are decoded to their bytes, SPM's U+2581 becomes a space, byte tokens
  // <0xXX> become that byte. Control and unknown tokens render only if `special`.
  // A piece may be an incomplete UTF-8 sequence. Out-of-range ids give "".
  std::string piece(int32_t id, bool special = true) const;
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& opts = {}) const;

  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  int32_t eot() const;
  int32_t eom() const;
  int32_t unk() const;
  int32_t pad() const;
  int32_t sep() const;
  int32_t nl() const;  // the newline token
  bool add_bos() const;
  bool add_eos() const;
  bool is_eog(int32_t id) const;
  bool is_control(int32_t id) const;
  uint32_t attr(int32_t id) const;
  const std::string& text(int32_t id) const;  // raw vocabulary text
  const Vocab& vocab() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenizer for streaming generated tokens: each push() returns
// the text that is complete so far. It never returns part of a UTF-8 sequence:
// an unfinished sequence at the end is held back until the next token completes
// it, and bytes that can never form valid UTF-8 come out as U+FFFD. Pieces are
// concatenated as they are (no clean-up of spaces). Control tokens show as their text
// when `special`, or when listed in `shown` (the markers a reply parser needs, such as
// Kimi K3's <|open|>).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false, std::vector<int32_t> shown = {})
      : tok_(&tok), special_(special), shown_(std::move(shown)) {}
  std::string push(int32_t id);
  // The held-back rest (U+FFFD if it was an unfinished sequence); resets.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool special_;
  std::vector<int32_t> shown_;
  std::string pending_;
};

}  // namespace deltafin
