// StringTable: an open-addressing hash map from byte strings (plus a small
// integer tag that is part of the key) to int32 values. Keys are copied into
// one arena, so building a table of a few hundred thousand tokens costs one
// allocation per growth step rather than two per key (a std::unordered_map of
// std::string took ~1.3 us per insert here), and lookups take a string_view.
//
// Thread safety: concurrent find() calls are safe; insert() is not.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin {

class StringTable {
 public:
  static constexpr int32_t kAbsent = -1;

  void reserve(size_t n_keys, size_t n_bytes) {
    arena_.reserve(n_bytes);
    entries_.reserve(n_keys);
    if (slot_capacity_for(n_keys) > slots_.size()) rehash(slot_capacity_for(n_keys));
  }

  // Adds key -> value. If the key is already present, keeps the old value and
  // returns false.
  bool insert(std::string_view key, int32_t value, uint32_t tag = 0) {
    if (slot_capacity_for(entries_.size() + 1) > slots_.size()) rehash(slot_capacity_for(entries_.size() + 1) * 2);
    const uint64_t h = hash(key, tag);
    size_t s = size_t(h) & mask_;
    while (slots_[s] != 0) {
      if (matches(entries_[slots_[s] - 1], key, tag, h)) return false;
      s = (s + 1) & mask_;
    }
    entries_.push_back({h, uint32_t(arena_.size()), uint32_t(key.size()), tag, value});
    arena_.append(key);
    slots_[s] = uint32_t(entries_.size());
    return true;
  }

  int32_t find(std::string_view key, uint32_t tag = 0) const {
    if (slots_.empty()) return kAbsent;
    const uint64_t h = hash(key, tag);
    size_t s = size_t(h) & mask_;
    while (slots_[s] != 0) {
      const Entry& e = entries_[slots_[s] - 1];
      if (matches(e, key, tag, h)) return e.value;
      s = (s + 1) & mask_;
    }
    return kAbsent;
  }

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t hash;
    uint32_t off, len, tag;
    int32_t value;
  };

  static uint64_t hash(std::string_view key, uint32_t tag) {
    uint64_t h = std::hash<std::string_view>{}(key) ^ (uint64_t(tag) * 0x9E3779B97F4A7C15ull);
    h ^= h >> 29;  // spread high bits into the low bits the mask keeps
    return h * 0xBF58476D1CE4E5B9ull;
  }
  bool matches(const Entry& e, std::string_view key, uint32_t tag, uint64_t h) const {
    return e.hash == h && e.tag == tag && e.len == key.size() &&
           std::memcmp(arena_.data() + e.off, key.data(), key.size()) == 0;
  }
  static size_t slot_capacity_for(size_t n) {  // load factor <= 1/2, power of two
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    return cap;
  }
  void rehash(size_t cap) {
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    for (size_t i = 0; i < entries_.size(); ++i) {
      size_t s = size_t(entries_[i].hash) & mask_;
      while (slots_[s] != 0) s = (s + 1) & mask_;
      slots_[s] = uint32_t(i + 1);
    }
  }

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // entry index + 1; 0 = empty
  size_t mask_ = 0;
};

// Tokens of the words already seen in one encode() call: text repeats its
// words, and merging is the costly step. Only short words are kept.
class WordCache {
 public:
  static constexpr size_t kMaxWord = 48;

  bool lookup(std::string_view word, std::vector<int32_t>& out) const {
    if (word.size() > kMaxWord || table_.size() == 0) return false;
    const int32_t i = table_.find(word);
    if (i == StringTable::kAbsent) return false;
    const Span sp = spans_[size_t(i)];
    out.insert(out.end(), ids_.begin() + sp.first, ids_.begin() + sp.first + sp.count);
    return true;
  }
  void store(std::string_view word, const std::vector<int32_t>& out, size_t first) {
    if (word.size() > kMaxWord) return;
    spans_.push_back({uint32_t(ids_.size()), uint32_t(out.size() - first)});
    ids_.insert(ids_.end(), out.begin() + std::ptrdiff_t(first), out.end());
    table_.insert(word, int32_t(spans_.size() - 1));
  }

 private:
  struct Span {
    uint32_t first, count;
  };
  StringTable table_;
  std::vector<Span> spans_;
  std::vector<int32_t> ids_;
};

}  // namespace deltafin
