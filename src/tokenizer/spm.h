// SentencePiece-style BPE (tokenizer.ggml.model = "llama": Llama 2, Mistral,
// Phi-3): start from UTF-8 characters and repeatedly merge the adjacent pair
// whose concatenation is the vocabulary token with the highest score (leftmost
// first on ties); characters left without a token fall back to byte tokens
// <0xXX>. The caller has already replaced spaces with U+2581 and added the
// space prefix.
//
// llama.cpp merges over the whole text at once. When no vocabulary token has a
// U+2581 right after another character (true of Llama 2 and Phi-3), no merge
// can cross the start of a "▁word", so each such chunk of valid UTF-8 text is
// merged on its own, with identical results, and repeated chunks are looked up.
//
// Thread safety: immutable; encode() keeps its working memory in SpmScratch.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/string_table.h"
#include "tokenizer/vocab.h"

namespace deltafin {

struct SpmScratch {
  struct Symbol {
    uint32_t start, len;
    int32_t prev, next;
  };
  struct Pair {
    float score;
    int32_t left, right;
    uint32_t len;
  };
  std::vector<Symbol> symbols;
  std::vector<Pair> heap;
  WordCache chunks;
};

class SpmModel {
 public:
  static SpmModel build(const Vocab& vocab);

  // Appends the tokens of `text` (already escaped: spaces are U+2581).
  void encode(std::string_view text, std::vector<int32_t>& out, SpmScratch& scratch) const;

  // The token for one byte: <0xXX>, else the one-byte text, else kNoToken.
  int32_t byte_token(uint8_t b) const { return byte_tokens_[b]; }

 private:
  void encode_chunk(std::string_view text, std::vector<int32_t>& out, SpmScratch& scratch) const;

  const Vocab* vocab_ = nullptr;
  int32_t byte_tokens_[256];
  bool chunkable_ = false;
};

}  // namespace deltafin
