// Unicode helpers for the tokenizers: UTF-8 decoding with llama.cpp's error
// policy, codepoint categories as the pre-tokenizer regexes see them, and the
// GPT-2 byte <-> character alphabet of byte-level BPE.
//
// Category data comes from unicode_data.cpp (generated from the Unicode
// Character Database 15.1, the version llama.cpp's tables use). All functions
// are pure and thread-safe; the flat lookup table is built once on first use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin::unicode {

// General-category groups, as \p{N}, \p{L}, ... use them. Unassigned (Cn) is
// kUndefined. Values are stored in the generated table; do not renumber.
enum Category : uint8_t {
  kUndefined = 0,
  kNumber = 1,
  kLetter = 2,
  kSeparator = 3,
  kMark = 4,
  kPunctuation = 5,
  kSymbol = 6,
  kControl = 7,
};

// Per-codepoint flags: the category in the low 3 bits, plus these.
constexpr uint8_t kCategoryMask = 0x07;
constexpr uint8_t kWhitespaceBit = 0x08;  // Unicode White_Space
constexpr uint8_t kHanBit = 0x10;         // CJK ideograph blocks (Kimi-K2's \p{Han})

constexpr uint32_t kReplacementChar = 0xFFFD;
constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Flags of a codepoint; codepoints beyond U+10FFFF are kUndefined.
uint8_t flags(uint32_t cp);
inline Category category(uint32_t cp) { return Category(flags(cp) & kCategoryMask); }
inline bool is_whitespace(uint32_t cp) { return flags(cp) & kWhitespaceBit; }
bool is_han(uint32_t cp);

// Length of the UTF-8 sequence a lead byte announces, judged by its high nibble
// alone (1 for continuation and invalid bytes). The SPM and BPE tokenizers cut
// their initial symbols with this, without validating the continuation bytes.
inline size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Decodes UTF-8 to codepoints, appending to `out`. An ill-formed sequence
// becomes U+FFFD and consumes one byte. Overlong forms and surrogates are
// accepted, as llama.cpp accepts them; values above U+10FFFF are ill-formed.
void decode_utf8(std::string_view s, std::vector<uint32_t>& out);

// Appends the UTF-8 encoding of cp (surrogates are encoded like any other value).
void append_utf8(uint32_t cp, std::string& out);

// Bytes of the longest prefix of s that ends on a complete, well-formed UTF-8
// sequence, given that more bytes may follow: an incomplete sequence at the end
// is left out, an ill-formed one is counted (it can never become well-formed).
size_t complete_utf8_prefix(std::string_view s);

// Replaces every ill-formed sequence in s with U+FFFD (strict UTF-8: no
// overlongs, no surrogates, nothing above U+10FFFF).
std::string sanitize_utf8(std::string_view s);
bool is_valid_utf8(std::string_view s);

// GPT-2 byte-level alphabet: every byte has a printable stand-in character
// (printable Latin-1 bytes stand for themselves, the rest map to U+0100...).
// Returns the stand-in's UTF-8 (1 or 2 bytes).
std::string_view byte_to_symbol(uint8_t b);
// The byte a stand-in codepoint encodes, or -1 if cp is not in the alphabet.
int symbol_to_byte(uint32_t cp);

}  // namespace deltafin::unicode

// Generated tables (unicode_data.cpp).
namespace deltafin::unicode::data {
struct CategoryRun {
  uint32_t first;
  uint8_t category;
};
extern const CategoryRun kCategoryRuns[];
extern const size_t kCategoryRunCount;
extern const uint32_t kWhitespace[];
extern const size_t kWhitespaceCount;
}  // namespace deltafin::unicode::data
