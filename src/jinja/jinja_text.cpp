#include "jinja/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace deltafin::jinja {

char32_t decode_utf8(std::string_view s, size_t pos, size_t* len) {
  auto b = static_cast<unsigned char>(s[pos]);
  *len = 1;
  if (b < 0x80) return b;
  int n = 0;
  char32_t cp = 0;
  if ((b & 0xE0) == 0xC0) {
    n = 1;
    cp = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    n = 2;
    cp = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    n = 3;
    cp = b & 0x07;
  } else {
    return 0xFFFD;
  }
  for (int i = 1; i <= n; ++i) {
    if (pos + i >= s.size()) return 0xFFFD;
    auto c = static_cast<unsigned char>(s[pos + i]);
    if ((c & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (c & 0x3F);
  }
  static const char32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFD;
  *len = static_cast<size_t>(n) + 1;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<char32_t> to_code_points(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len;
    out.push_back(decode_utf8(s, i, &len));
    i += len;
  }
  return out;
}

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t cp = decode_utf8(s, i, &len);
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out += static_cast<char16_t>(0xD800 + (cp >> 10));
      out += static_cast<char16_t>(0xDC00 + (cp & 0x3FF));
    } else {
      out += static_cast<char16_t>(cp);
    }
  }
  return out;
}

std::string from_utf16(std::u16string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t u = s[i];
    if (u >= 0xD800 && u <= 0xDBFF && i + 1 < s.size() && s[i + 1] >= 0xDC00 && s[i + 1] <= 0xDFFF) {
      append_utf8(out, 0x10000 + ((u - 0xD800) << 10) + (s[i + 1] - 0xDC00));
      ++i;
    } else {
      append_utf8(out, u);  // lone surrogates -> U+FFFD
    }
  }
  return out;
}

size_t utf16_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t cp = decode_utf8(s, i, &len);
    i += len;
    n += cp >= 0x10000 ? 2 : 1;
  }
  return n;
}

bool js_is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

size_t js_space_len(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t len;
  char32_t cp = decode_utf8(s, pos, &len);
  return js_is_space(cp) ? len : 0;
}

std::string js_trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_len(s, i)) i += n;
  return std::string(s.substr(i));
}

std::string js_trim_end(std::string_view s) {
  // Find the end of the last non-space character, walking forward (UTF-8 is not
  // reliably decodable backwards when it is invalid).
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t cp = decode_utf8(s, i, &len);
    i += len;
    if (!js_is_space(cp)) end = i;
  }
  return std::string(s.substr(0, end));
}

std::string js_trim(std::string_view s) { return js_trim_end(js_trim_start(s)); }

namespace {

// Ranges where upper and lower case alternate: even = upper, odd = lower (or
// the reverse when `odd_upper`).
struct AlternatingRange {
  char32_t lo, hi;
  bool odd_upper;
};
constexpr AlternatingRange kAlternating[] = {
    {0x100, 0x137, false},   {0x139, 0x148, true},    {0x14A, 0x177, false}, {0x179, 0x17E, true},
    {0x1CD, 0x1DC, true},    {0x1DE, 0x1EF, false},   {0x1F8, 0x21F, false}, {0x222, 0x233, false},
    {0x460, 0x481, false},   {0x48A, 0x4BF, false},   {0x4C1, 0x4CE, true},  {0x4D0, 0x52F, false},
    {0x1E00, 0x1E95, false}, {0x1EA0, 0x1EFF, false},
};

// The digraph triples DŽ Dž dž, LJ Lj lj, NJ Nj nj, DZ Dz dz: (upper, title, lower).
constexpr char32_t kDigraphs[][3] = {{0x1C4, 0x1C5, 0x1C6}, {0x1C7, 0x1C8, 0x1C9}, {0x1CA, 0x1CB, 0x1CC},
                                     {0x1F1, 0x1F2, 0x1F3}};

// True when c is the upper-case member of its pair in [lo, hi].
bool alternating_pair(char32_t c, char32_t lo, char32_t hi, bool odd_upper) {
  return c >= lo && c <= hi && ((c & 1) == (odd_upper ? 1u : 0u));
}

char32_t simple_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  for (const auto& d : kDigraphs)
    if (c == d[1] || c == d[2]) return d[0];
  if (c == 0xB5) return 0x39C;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  for (const auto& [lo, hi, odd] : kAlternating) {
    // c is the lower member when its parity is the opposite of the upper's.
    if (c >= lo && c <= hi && !alternating_pair(c, lo, hi, odd)) return c - 1;
  }
  if (c == 0x4CF) return 0x4C0;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CA || c == 0x3CB) return c - 32;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x561 && c <= 0x586) return c - 48;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}

char32_t simple_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  for (const auto& d : kDigraphs)
    if (c == d[0] || c == d[1]) return d[2];
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  for (const auto& [lo, hi, odd] : kAlternating) {
    if (alternating_pair(c, lo, hi, odd) && c + 1 <= hi) return c + 1;
  }
  if (c == 0x4C0) return 0x4CF;
  if (c == 0x1E9E) return 0xDF;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x3AA || c == 0x3AB) return c + 32;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x531 && c <= 0x556) return c + 48;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

// Upper-case mappings that expand to several characters (SpecialCasing.txt).
const char* special_upper(char32_t c) {
  switch (c) {
    case 0xDF: return "SS";
    case 0x149: return "\xCA\xBCN";                 // ŉ -> ʼN
    case 0x1F0: return "J\xCC\x8C";                 // ǰ -> J̌
    case 0x390: return "\xCE\x99\xCC\x88\xCC\x81";  // ΐ -> Ϊ́
    case 0x3B0: return "\xCE\xA5\xCC\x88\xCC\x81";  // ΰ -> Ϋ́
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05:
    case 0xFB06: return "ST";
    default: return nullptr;
  }
}

}  // namespace

std::string js_to_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t cp = decode_utf8(s, i, &len);
    if (cp < 0x80) {
      out += static_cast<char>(simple_upper(cp));
    } else if (const char* special = special_upper(cp)) {
      out += special;
    } else {
      append_utf8(out, simple_upper(cp));
    }
    i += len;
  }
  return out;
}

namespace {
bool is_cased(char32_t c) { return simple_lower(c) != c || simple_upper(c) != c || c == 0xDF; }
}  // namespace

std::string js_to_lower(std::string_view s) {
  std::vector<char32_t> cps = to_code_points(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t cp = cps[i];
    if (cp < 0x80) {
      out += static_cast<char>(simple_lower(cp));
    } else if (cp == 0x130) {
      out += "i\xCC\x87";  // i + U+0307 COMBINING DOT ABOVE
    } else if (cp == 0x3A3) {
      // Final sigma: after a cased letter and not before one.
      bool after = i > 0 && is_cased(cps[i - 1]);
      bool before = i + 1 < cps.size() && is_cased(cps[i + 1]);
      append_utf8(out, after && !before ? 0x3C2 : 0x3C3);
    } else {
      append_utf8(out, simple_lower(cp));
    }
  }
  return out;
}

std::string js_number_to_string(double v) {
  if (std::isnan(v)) return "NaN";
  if (v == 0) return "0";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  std::string sign = v < 0 ? "-" : "";
  v = std::fabs(v);
  // Shortest round-trip digits, as ECMAScript Number::toString requires.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  int exp10 = std::atoi(sci.c_str() + e + 1);
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;
  if (k <= n && n <= 21) return sign + digits + std::string(n - k, '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(-n, '0') + digits;
  std::string exp = std::string(n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
  if (k == 1) return sign + digits + "e" + exp;
  return sign + digits.substr(0, 1) + "." + digits.substr(1) + "e" + exp;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Length of the longest StrDecimalLiteral prefix of s (0 if none), without sign.
size_t decimal_prefix(std::string_view s) {
  if (s.substr(0, 8) == "Infinity") return 8;
  size_t i = 0, int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && is_digit(s[j])) ++j, ++frac_digits;
    if (int_digits > 0 || frac_digits > 0) i = j;
  }
  if (int_digits == 0 && frac_digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && is_digit(s[j])) {
      while (j < s.size() && is_digit(s[j])) ++j;
      i = j;
    }
  }
  return i;
}

double parse_decimal(std::string_view sign_and_digits) {
  std::string t(sign_and_digits);
  bool neg = !t.empty() && t[0] == '-';
  std::string_view body = t;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) body.remove_prefix(1);
  if (body == "Infinity") return neg ? -INFINITY : INFINITY;
  return std::strtod(t.c_str(), nullptr);
}

}  // namespace

double js_parse_int(std::string_view s) {
  std::string t = js_trim_start(s);
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  size_t start = i;
  while (i < t.size() && is_digit(t[i])) ++i;
  if (i == start) return NAN;
  double v = std::strtod(t.substr(start, i - start).c_str(), nullptr);
  return neg ? -v : v;
}

double js_parse_float(std::string_view s) {
  std::string t = js_trim_start(s);
  size_t sign = (!t.empty() && (t[0] == '+' || t[0] == '-')) ? 1 : 0;
  size_t n = decimal_prefix(std::string_view(t).substr(sign));
  if (n == 0) return NAN;
  return parse_decimal(std::string_view(t).substr(0, sign + n));
}

double js_string_to_number(std::string_view s) {
  std::string t = js_trim(s);
  if (t.empty()) return 0;
  if (t.size() > 2 && t[0] == '0') {
    int base = (t[1] == 'x' || t[1] == 'X') ? 16 : (t[1] == 'o' || t[1] == 'O') ? 8 : (t[1] == 'b' || t[1] == 'B') ? 2 : 0;
    if (base) {
      double v = 0;
      for (size_t i = 2; i < t.size(); ++i) {
        char c = t[i];
        int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
        if (d >= base) return NAN;
        v = v * base + d;
      }
      return v;
    }
  }
  size_t sign = (t[0] == '+' || t[0] == '-') ? 1 : 0;
  size_t n = decimal_prefix(std::string_view(t).substr(sign));
  if (n == 0 || sign + n != t.size()) return NAN;
  return parse_decimal(t);
}

void json_quote(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string json_ascii_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[8];
  for (char16_t u : to_utf16(s)) {
    if (u < 0x7F) {
      out += static_cast<char>(u);
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(u));
      out += buf;
    }
  }
  return out;
}

}  // namespace deltafin::jinja
