// Text helpers for the Jinja engine: UTF-8 <-> code points / UTF-16 units, and the
// JavaScript string and number semantics the reference renderer (@huggingface/jinja,
// which runs on JS strings and doubles) exposes to templates.
//
// Strings are UTF-8 throughout. Where JS semantics depend on UTF-16 (String.length,
// s.at(i), charAt) the helpers convert; invalid UTF-8 bytes decode as U+FFFD.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin::jinja {

// Decodes the code point at s[pos]; *len receives its byte length (>= 1).
char32_t decode_utf8(std::string_view s, size_t pos, size_t* len);
void append_utf8(std::string& out, char32_t cp);
std::vector<char32_t> to_code_points(std::string_view s);
std::u16string to_utf16(std::string_view s);
// Lone surrogates become U+FFFD (what Node writes for them).
std::string from_utf16(std::u16string_view s);
size_t utf16_length(std::string_view s);

// JS WhiteSpace + LineTerminator: the set of /\s/ and String.prototype.trim.
bool js_is_space(char32_t cp);
// Byte length of the JS whitespace character at s[pos], 0 if none.
size_t js_space_len(std::string_view s, size_t pos);
std::string js_trim(std::string_view s);
std::string js_trim_start(std::string_view s);
std::string js_trim_end(std::string_view s);

// String.prototype.toUpperCase / toLowerCase. Covers ASCII, Latin-1, Latin
// Extended-A/B (regular pairs and digraphs), Latin Extended Additional (Vietnamese),
// basic Greek (with final sigma), Cyrillic, Armenian and full-width Latin, plus
// ß -> SS and İ -> i̇; characters of other cased scripts are left unchanged.
std::string js_to_upper(std::string_view s);
std::string js_to_lower(std::string_view s);

// Number.prototype.toString() (also String(n) and JSON.stringify for finite n).
std::string js_number_to_string(double v);
// parseInt(s, 10) and parseFloat(s); NaN when no number prefix.
double js_parse_int(std::string_view s);
double js_parse_float(std::string_view s);
// ToNumber(string), as used by == between a number and a string.
double js_string_to_number(std::string_view s);

// JSON.stringify(string): quotes and escapes; non-ASCII stays raw.
void json_quote(std::string& out, std::string_view s);
// Replaces every character >= U+007F with \uXXXX UTF-16 escapes (ensure_ascii).
std::string json_ascii_escape(std::string_view s);

}  // namespace deltafin::jinja
