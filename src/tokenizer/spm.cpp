#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode.h"

namespace deltafin {

namespace {

constexpr std::string_view kMarker = "\xE2\x96\x81";  // U+2581

// Heap order: highest score first, then leftmost.
struct PairAfter {
  bool operator()(const SpmScratch::Pair& a, const SpmScratch::Pair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmModel SpmModel::build(const Vocab& vocab) {
  SpmModel m;
  m.vocab_ = &vocab;
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    int32_t id = vocab.find(hex);
    if (id == kNoToken) {
      const char c = char(b);
      id = vocab.find(std::string_view(&c, 1));
    }
    m.byte_tokens_[b] = id;
  }
  // Chunking is exact unless a token (that merges of valid text could form)
  // has U+2581 after some other character.
  m.chunkable_ = true;
  for (const TokenData& t : vocab.tokens) {
    if (!unicode::is_valid_utf8(t.text)) continue;
    for (size_t i = t.text.find(kMarker, 1); i != std::string::npos; i = t.text.find(kMarker, i + 1)) {
      if (i < kMarker.size() || t.text.compare(i - kMarker.size(), kMarker.size(), kMarker) != 0) {
        m.chunkable_ = false;
        return m;
      }
    }
  }
  return m;
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out, SpmScratch& scratch) const {
  if (!chunkable_ || !unicode::is_valid_utf8(text)) {
    encode_chunk(text, out, scratch);
    return;
  }
  // Cut before every U+2581 that follows another character.
  size_t begin = 0;
  auto flush = [&](size_t end) {
    if (end == begin) return;
    const std::string_view chunk = text.substr(begin, end - begin);
    begin = end;
    if (scratch.chunks.lookup(chunk, out)) return;
    const size_t first = out.size();
    encode_chunk(chunk, out, scratch);
    scratch.chunks.store(chunk, out, first);
  };
  bool prev_marker = true;
  for (size_t i = 0; i < text.size();) {
    const bool marker = text.compare(i, kMarker.size(), kMarker) == 0;
    if (marker && !prev_marker) flush(i);
    prev_marker = marker;
    i += marker ? kMarker.size() : unicode::utf8_len(uint8_t(text[i]));
  }
  flush(text.size());
}

void SpmModel::encode_chunk(std::string_view text, std::vector<int32_t>& out, SpmScratch& scratch) const {
  auto& sym = scratch.symbols;
  auto& heap = scratch.heap;
  sym.clear();
  heap.clear();
  // Initial symbols: characters as their lead byte announces them (not validated).
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::utf8_len(uint8_t(text[off])), text.size() - off);
    const int32_t i = int32_t(sym.size());
    sym.push_back({uint32_t(off), uint32_t(len), i - 1, off + len < text.size() ? i + 1 : -1});
    off += len;
  }
  if (sym.empty()) return;

  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[size_t(l)].len + sym[size_t(r)].len;
    const int32_t id = vocab_->find(text.substr(sym[size_t(l)].start, len));
    if (id == kNoToken) return;
    heap.push_back({vocab_->tokens[size_t(id)].score, l, r, len});
    std::push_heap(heap.begin(), heap.end(), PairAfter{});
  };
  for (int32_t i = 1; i < int32_t(sym.size()); ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), PairAfter{});
    const SpmScratch::Pair p = heap.back();
    heap.pop_back();
    SpmScratch::Symbol& l = sym[size_t(p.left)];
    SpmScratch::Symbol& r = sym[size_t(p.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }

  // Every merged symbol is a token; a single character may not be, and then
  // becomes byte tokens. (llama.cpp fails on a byte without a token; we emit
  // the unknown token instead.)
  for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) {
    const std::string_view piece = text.substr(sym[size_t(i)].start, sym[size_t(i)].len);
    const int32_t id = vocab_->find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t b = byte_tokens_[uint8_t(c)];
      if (b != kNoToken) {
        out.push_back(b);
      } else if (vocab_->unk != kNoToken) {
        out.push_back(vocab_->unk);
      }
    }
  }
}

}  // namespace deltafin
