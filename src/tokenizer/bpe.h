// Byte-level BPE merging (GPT-2 style), within one pre-tokenized word.
//
// llama.cpp maps every byte of a word to its GPT-2 stand-in character and merges
// those characters by rank. Each stand-in is one byte, so we translate the vocab
// and the merges back to raw bytes once at load and merge raw bytes directly:
// the result is identical, and no per-word re-encoding is needed. Merge ranks are
// looked up in a hash table keyed by (left + right, length of left), hashed over
// a view of the word, so lookups allocate nothing.
//
// Merging: repeatedly apply the lowest-ranked adjacent pair (leftmost first on
// ties) with a binary heap and lazy invalidation: O(n log n) in the word length.
//
// Thread safety: immutable after build(); encode_word() is const and keeps its
// working memory in the caller's BpeScratch.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/string_table.h"
#include "tokenizer/vocab.h"

namespace deltafin {

struct BpeScratch {
  struct Symbol {
    uint32_t start, len;
    int32_t prev, next;
  };
  struct Pair {
    int32_t rank, left, right;
    uint32_t len;  // bytes of left + right when queued; stale if they changed
  };
  std::vector<Symbol> symbols;
  std::vector<Pair> heap;
};

class BpeModel {
 public:
  static BpeModel build(const Vocab& vocab);

  // Appends the tokens of `word` (raw UTF-8 bytes of one pre-tokenizer piece).
  void encode_word(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const;

  size_t n_merges() const { return ranks_.size(); }

 private:
  int32_t rank(std::string_view pair_text, uint32_t split) const { return ranks_.find(pair_text, split); }

  const Vocab* vocab_ = nullptr;
  StringTable raw_to_id_;  // tokens whose text is all stand-ins, as raw bytes
  StringTable ranks_;      // (left + right as raw bytes, tag = bytes of left) -> rank
};

}  // namespace deltafin
