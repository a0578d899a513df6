#include "tokenizer/unicode.h"

#include <array>
#include <memory>

namespace deltafin::unicode {

namespace {

constexpr uint32_t kTableSize = kMaxCodepoint + 1;

// Han blocks: CJK Unified Ideographs and Extensions A-F, and the compatibility
// ideographs (the set Kimi-K2's pre-tokenizer treats as \p{Han}).
constexpr std::array<std::pair<uint32_t, uint32_t>, 9> kHanRanges = {{
    {0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF},
    {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F}, {0x2B820, 0x2CEAF},
    {0x2CEB0, 0x2EBEF}, {0xF900, 0xFAFF},   {0x2F800, 0x2FA1F},
}};

// One byte per codepoint (1.1 MB), expanded from the generated runs.
const uint8_t* flag_table() {
  static const std::unique_ptr<uint8_t[]> table = [] {
    auto t = std::make_unique<uint8_t[]>(kTableSize);
    for (size_t i = 0; i < data::kCategoryRunCount; ++i) {
      uint32_t first = data::kCategoryRuns[i].first;
      uint32_t end = i + 1 < data::kCategoryRunCount ? data::kCategoryRuns[i + 1].first : kTableSize;
      for (uint32_t cp = first; cp < end; ++cp) t[cp] = data::kCategoryRuns[i].category;
    }
    for (size_t i = 0; i < data::kWhitespaceCount; ++i) t[data::kWhitespace[i]] |= kWhitespaceBit;
    for (auto [lo, hi] : kHanRanges)
      for (uint32_t cp = lo; cp <= hi; ++cp) t[cp] |= kHanBit;
    return t;
  }();
  return table.get();
}

struct ByteAlphabet {
  std::array<std::string, 256> to_symbol;
  std::array<int16_t, 512> to_byte;  // stand-ins are all below U+0200
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a = [] {
    ByteAlphabet r;
    r.to_byte.fill(-1);
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? uint32_t(b) : uint32_t(next++);
      append_utf8(cp, r.to_symbol[b]);
      r.to_byte[cp] = int16_t(b);
    }
    return r;
  }();
  return a;
}

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Strict UTF-8 at s[i]: returns the sequence length if well-formed, 0 if the
// input ends inside a sequence that could still be completed, or -(n) where n
// >= 1 is the length of the ill-formed maximal subpart to replace.
int strict_seq(std::string_view s, size_t i) {
  const uint8_t b0 = uint8_t(s[i]);
  if (b0 < 0x80) return 1;
  int n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    const uint8_t b = uint8_t(s[i + k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : is_cont(b);
    if (!ok) return -k;
  }
  return n;
}

}  // namespace

uint8_t flags(uint32_t cp) { return cp < kTableSize ? flag_table()[cp] : uint8_t(kUndefined); }

bool is_han(uint32_t cp) { return cp < kTableSize && (flag_table()[cp] & kHanBit); }

void decode_utf8(std::string_view s, std::vector<uint32_t>& out) {
  out.reserve(out.size() + s.size());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = uint8_t(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    // Length from the lead byte; continuation bytes must follow. Overlongs and
    // surrogates pass (llama.cpp's decoder does not reject them).
    size_t len = 0;
    uint32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      const uint8_t b = uint8_t(s[i + k]);
      ok = is_cont(b);
      cp = (cp << 6) | (b & 0x3F);
    }
    if (ok && cp <= kMaxCodepoint) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(kReplacementChar);
      ++i;
    }
  }
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | ((cp >> 18) & 0x07)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

size_t complete_utf8_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const int r = strict_seq(s, i);
    if (r == 0) break;
    i += size_t(r > 0 ? r : -r);
  }
  return i;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int r = strict_seq(s, i);
    if (r > 0) {
      out.append(s.substr(i, size_t(r)));
      i += size_t(r);
      continue;
    }
    append_utf8(kReplacementChar, out);
    i += r == 0 ? s.size() - i : size_t(-r);  // an unfinished tail is one subpart
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const int r = strict_seq(s, i);
    if (r <= 0) return false;
    i += size_t(r);
  }
  return true;
}

std::string_view byte_to_symbol(uint8_t b) { return byte_alphabet().to_symbol[b]; }

int symbol_to_byte(uint32_t cp) { return cp < 512 ? byte_alphabet().to_byte[cp] : -1; }

}  // namespace deltafin::unicode
