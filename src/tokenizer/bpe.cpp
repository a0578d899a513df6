#include "tokenizer/bpe.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace deltafin {

namespace {

// Raw bytes a GPT-2 stand-in string encodes; false if a character is not a
// stand-in (all stand-ins are below U+0200: one or two UTF-8 bytes).
bool stand_ins_to_bytes(std::string_view text, std::string& out) {
  out.clear();
  for (size_t i = 0; i < text.size();) {
    const uint8_t b0 = uint8_t(text[i]);
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size() && (uint8_t(text[i + 1]) & 0xC0) == 0x80) {
      cp = (uint32_t(b0 & 0x1F) << 6) | (uint8_t(text[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;
    }
    const int b = unicode::symbol_to_byte(cp);
    if (b < 0) return false;
    out.push_back(char(b));
  }
  return true;
}

// Heap order: lowest rank first, then leftmost.
struct PairAfter {
  bool operator()(const BpeScratch::Pair& a, const BpeScratch::Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

BpeModel BpeModel::build(const Vocab& vocab) {
  BpeModel m;
  m.vocab_ = &vocab;
  std::string raw;
  m.raw_to_id_.reserve(vocab.tokens.size(), vocab.tokens.size() * 8);
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    if (stand_ins_to_bytes(vocab.tokens[size_t(id)].text, raw)) m.raw_to_id_.insert(raw, id);
  }
  m.ranks_.reserve(vocab.merges.size(), vocab.merges.size() * 8);
  std::string left, right;
  for (size_t r = 0; r < vocab.merges.size(); ++r) {
    const auto& [l, rt] = vocab.merges[r];
    if (l.empty() || rt.empty()) continue;
    // A merge with a character outside the alphabet can never apply.
    if (!stand_ins_to_bytes(l, left) || !stand_ins_to_bytes(rt, right)) continue;
    const uint32_t split = uint32_t(left.size());
    left += right;
    m.ranks_.insert(left, int32_t(r), split);  // a repeated pair keeps its first rank
  }
  return m;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const {
  if (word.empty()) return;
  if (vocab_->ignore_merges) {
    const int32_t id = raw_to_id_.find(word);
    if (id != StringTable::kAbsent) {
      out.push_back(id);
      return;
    }
  }

  auto& sym = scratch.symbols;
  auto& heap = scratch.heap;
  sym.clear();
  heap.clear();
  const int32_t n = int32_t(word.size());
  for (int32_t i = 0; i < n; ++i) sym.push_back({uint32_t(i), 1, i - 1, i + 1 < n ? i + 1 : -1});

  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[size_t(l)].len + sym[size_t(r)].len;
    const int32_t rk = rank(word.substr(sym[size_t(l)].start, len), sym[size_t(l)].len);
    if (rk < 0) return;
    heap.push_back({rk, l, r, len});
    std::push_heap(heap.begin(), heap.end(), PairAfter{});
  };
  for (int32_t i = 1; i < n; ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), PairAfter{});
    const BpeScratch::Pair p = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& l = sym[size_t(p.left)];
    BpeScratch::Symbol& r = sym[size_t(p.right)];
    // Stale: one side was merged away or grew since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) {
    const std::string_view piece = word.substr(sym[size_t(i)].start, sym[size_t(i)].len);
    const int32_t id = raw_to_id_.find(piece);
    if (id != StringTable::kAbsent) {
      out.push_back(id);
      continue;
    }
    // Not in the vocabulary (an inconsistent vocab): like llama.cpp, emit the
    // tokens whose text is a single byte of the stand-in spelling, if any.
    for (char c : piece) {
      for (char sc : unicode::byte_to_symbol(uint8_t(c))) {
        const int32_t byte_id = vocab_->find(std::string_view(&sc, 1));
        if (byte_id != kNoToken) out.push_back(byte_id);
      }
    }
  }
}

}  // namespace deltafin
