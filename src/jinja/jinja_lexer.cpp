#include "jinja/jinja_lexer.h"

#include "jinja/jinja_text.h"
#include "jinja/jinja_value.h"

namespace deltafin::jinja {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Text: return "Text";
    case Tok::Number: return "NumericLiteral";
    case Tok::String: return "StringLiteral";
    case Tok::Ident: return "Identifier";
    case Tok::Equals: return "Equals";
    case Tok::LParen: return "OpenParen";
    case Tok::RParen: return "CloseParen";
    case Tok::OpenStmt: return "OpenStatement";
    case Tok::CloseStmt: return "CloseStatement";
    case Tok::OpenExpr: return "OpenExpression";
    case Tok::CloseExpr: return "CloseExpression";
    case Tok::LBracket: return "OpenSquareBracket";
    case Tok::RBracket: return "CloseSquareBracket";
    case Tok::LBrace: return "OpenCurlyBracket";
    case Tok::RBrace: return "CloseCurlyBracket";
    case Tok::Comma: return "Comma";
    case Tok::Dot: return "Dot";
    case Tok::Colon: return "Colon";
    case Tok::Pipe: return "Pipe";
    case Tok::Additive: return "AdditiveBinaryOperator";
    case Tok::Multiplicative: return "MultiplicativeBinaryOperator";
    case Tok::Power: return "ExponentiationBinaryOperator";
    case Tok::Comparison: return "ComparisonBinaryOperator";
    case Tok::Unary: return "UnaryOperator";
    case Tok::Comment: return "Comment";
  }
  return "?";
}

namespace {

// Template text after preprocessing, with the original line of every byte so
// errors can name the line the author wrote.
struct Src {
  std::string text;
  std::vector<int> line;
  void push(char c, int l) {
    text += c;
    line.push_back(l);
  }
  void push_range(const Src& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    line.insert(line.end(), from.line.begin() + begin, from.line.begin() + end);
  }
};

bool is_line_start(const std::string& t, size_t i) {
  if (i == 0) return true;
  char p = t[i - 1];
  if (p == '\n' || p == '\r') return true;
  // U+2028 / U+2029 (E2 80 A8 / E2 80 A9) also start a line for JS's multiline ^.
  return i >= 3 && static_cast<unsigned char>(t[i - 3]) == 0xE2 && static_cast<unsigned char>(t[i - 2]) == 0x80 &&
         (static_cast<unsigned char>(p) == 0xA8 || static_cast<unsigned char>(p) == 0xA9);
}

// Matches {%-?\s*(?:end)?generation\s*-?%} at `pos`; returns its length (0 if no
// match) and whether each side carries a '-'.
size_t match_generation_tag(const std::string& t, size_t pos, bool* lstrip, bool* rstrip) {
  if (t.compare(pos, 2, "{%") != 0) return 0;
  size_t i = pos + 2;
  *lstrip = i < t.size() && t[i] == '-';
  if (*lstrip) ++i;
  while (size_t n = js_space_len(t, i)) i += n;
  if (t.compare(i, 3, "end") == 0 && t.compare(i + 3, 10, "generation") == 0) i += 3;
  if (t.compare(i, 10, "generation") != 0) return 0;
  i += 10;
  while (size_t n = js_space_len(t, i)) i += n;
  *rstrip = i < t.size() && t[i] == '-';
  if (*rstrip) ++i;
  if (t.compare(i, 2, "%}") != 0) return 0;
  return i + 2 - pos;
}

Src preprocess(std::string_view source) {
  Src in;
  int line = 1;
  for (char c : source) {
    in.push(c, line);
    if (c == '\n') ++line;
  }
  // A single trailing newline is dropped.
  if (!in.text.empty() && in.text.back() == '\n') {
    in.text.pop_back();
    in.line.pop_back();
  }
  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
  Src a;
  for (size_t i = 0; i < in.text.size();) {
    if (is_line_start(in.text, i)) {
      size_t j = i;
      while (j < in.text.size() && (in.text[j] == ' ' || in.text[j] == '\t')) ++j;
      if (j + 1 < in.text.size() && in.text[j] == '{' &&
          (in.text[j + 1] == '#' || in.text[j + 1] == '%' || in.text[j + 1] == '-')) {
        i = j;
      }
    }
    a.push(in.text[i], in.line[i]);
    ++i;
  }
  // trim_blocks: /([#%-]})\n/g -> "$1".
  Src b;
  for (size_t i = 0; i < a.text.size();) {
    char c = a.text[i];
    if ((c == '#' || c == '%' || c == '-') && i + 2 < a.text.size() && a.text[i + 1] == '}' && a.text[i + 2] == '\n') {
      b.push_range(a, i, i + 2);
      i += 3;
      continue;
    }
    b.push(c, a.line[i]);
    ++i;
  }
  // {% generation %} tags: /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs ->
  // before + after, each dropped when the tag's '-' on that side is present.
  Src out;
  size_t last = 0;  // end of the previous match
  for (size_t i = 0; i < b.text.size();) {
    bool lstrip, rstrip;
    size_t n = b.text[i] == '{' ? match_generation_tag(b.text, i, &lstrip, &rstrip) : 0;
    if (!n) {
      ++i;
      continue;
    }
    // The match starts at the earliest point of the whitespace run before the tag.
    size_t ws_begin = i;
    while (ws_begin > last) {
      size_t p = ws_begin - 1;
      while (p > last && (static_cast<unsigned char>(b.text[p]) & 0xC0) == 0x80) --p;
      if (js_space_len(b.text, p) != ws_begin - p) break;
      ws_begin = p;
    }
    size_t after_begin = i + n, after_end = after_begin;
    while (size_t m = js_space_len(b.text, after_end)) after_end += m;
    out.push_range(b, last, ws_begin);
    if (!lstrip) out.push_range(b, ws_begin, i);
    if (!rstrip) out.push_range(b, after_begin, after_end);
    last = i = after_end;
  }
  out.push_range(b, last, b.text.size());
  return out;
}

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

struct Lexer {
  Src src;
  size_t pos = 0;
  int curly_depth = 0;
  std::vector<Token> tokens;

  int line_at(size_t p) const {
    if (src.line.empty()) return 1;
    return src.line[p < src.line.size() ? p : src.line.size() - 1];
  }
  [[noreturn]] void error(const std::string& msg, size_t p) const { throw JinjaError{msg, line_at(p)}; }
  char at(size_t p) const { return p < src.text.size() ? src.text[p] : '\0'; }
  bool starts(std::string_view s) const { return src.text.compare(pos, s.size(), s) == 0; }
  void push(Tok t, std::string v, size_t start) { tokens.push_back(Token{t, std::move(v), line_at(start)}); }

  // consumeWhile: collects characters while `pred` holds, resolving backslash
  // escapes; running into the end of input is an error, as in the reference.
  template <typename Pred>
  std::string consume_while(Pred pred) {
    std::string out;
    char16_t pending_high = 0;  // a \uD8xx waiting for its low surrogate
    auto flush_high = [&] {
      if (pending_high) append_utf8(out, 0xFFFD);
      pending_high = 0;
    };
    while (pos < src.text.size() && pred(pos)) {
      if (src.text[pos] == '\\') {
        ++pos;
        if (pos >= src.text.size()) error("Unexpected end of input", pos);
        char esc = src.text[pos++];
        if (esc == 'x' || esc == 'u') {
          size_t len = esc == 'x' ? 2 : 4;
          std::string hex = src.text.substr(pos, len);
          bool ok = hex.size() == len;
          for (char h : hex) ok = ok && (is_digit(h) || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'));
          if (!ok) error(std::string("Invalid hexadecimal escape sequence: \\") + esc + hex, pos);
          auto unit = static_cast<char16_t>(std::stoul(hex, nullptr, 16));
          pos += len;
          if (unit >= 0xDC00 && unit <= 0xDFFF && pending_high) {
            append_utf8(out, 0x10000 + ((pending_high - 0xD800) << 10) + (unit - 0xDC00));
            pending_high = 0;
          } else {
            flush_high();
            if (unit >= 0xD800 && unit <= 0xDBFF) pending_high = unit;
            else append_utf8(out, unit);
          }
          continue;
        }
        flush_high();
        switch (esc) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          default: error(std::string("Unexpected escaped character: ") + esc, pos - 1);
        }
        continue;
      }
      flush_high();
      size_t len;
      decode_utf8(src.text, pos, &len);
      out.append(src.text, pos, len);
      pos += len;
      if (pos >= src.text.size()) error("Unexpected end of input", pos);
    }
    flush_high();
    return out;
  }

  void strip_trailing_whitespace() {
    if (!tokens.empty() && tokens.back().type == Tok::Text) {
      tokens.back().value = js_trim_end(tokens.back().value);
      if (tokens.back().value.empty()) tokens.pop_back();
    }
  }
  void skip_leading_whitespace() {
    while (size_t n = js_space_len(src.text, pos)) pos += n;
  }

  void run() {
    static const std::pair<const char*, Tok> kTable[] = {
        {"{%", Tok::OpenStmt},     {"%}", Tok::CloseStmt},      {"{{", Tok::OpenExpr},   {"}}", Tok::CloseExpr},
        {"(", Tok::LParen},        {")", Tok::RParen},          {"{", Tok::LBrace},      {"}", Tok::RBrace},
        {"[", Tok::LBracket},      {"]", Tok::RBracket},        {",", Tok::Comma},       {".", Tok::Dot},
        {":", Tok::Colon},         {"|", Tok::Pipe},            {"<=", Tok::Comparison}, {">=", Tok::Comparison},
        {"==", Tok::Comparison},   {"!=", Tok::Comparison},     {"<", Tok::Comparison},  {">", Tok::Comparison},
        {"+", Tok::Additive},      {"-", Tok::Additive},        {"~", Tok::Additive},    {"**", Tok::Power},
        {"*", Tok::Multiplicative}, {"//", Tok::Multiplicative}, {"/", Tok::Multiplicative},
        {"%", Tok::Multiplicative}, {"=", Tok::Equals},
    };
    const std::string& t = src.text;
    while (pos < t.size()) {
      // Text outside tags.
      Tok last = tokens.empty() ? Tok::Text : tokens.back().type;
      if (tokens.empty() || last == Tok::CloseStmt || last == Tok::CloseExpr || last == Tok::Comment) {
        size_t start = pos;
        while (pos < t.size() && !(t[pos] == '{' && (at(pos + 1) == '%' || at(pos + 1) == '{' || at(pos + 1) == '#')))
          ++pos;
        if (pos > start) {
          push(Tok::Text, t.substr(start, pos - start), start);
          continue;
        }
      }
      // Comments.
      if (t[pos] == '{' && at(pos + 1) == '#') {
        size_t start = pos;
        pos += 2;
        bool strip_before = at(pos) == '-';
        if (strip_before) ++pos;
        std::string comment;
        while (at(pos) != '#' || at(pos + 1) != '}') {
          if (pos + 2 >= t.size()) error("Missing end of comment tag", start);
          comment += t[pos++];
        }
        bool strip_after = !comment.empty() && comment.back() == '-';
        if (strip_after) comment.pop_back();
        if (strip_before) strip_trailing_whitespace();
        push(Tok::Comment, comment, start);
        pos += 2;
        if (strip_after) skip_leading_whitespace();
        continue;
      }
      if (starts("{%-")) {
        strip_trailing_whitespace();
        push(Tok::OpenStmt, "{%", pos);
        pos += 3;
        continue;
      }
      if (starts("{{-")) {
        strip_trailing_whitespace();
        push(Tok::OpenExpr, "{{", pos);
        curly_depth = 0;
        pos += 3;
        continue;
      }
      while (size_t n = js_space_len(t, pos)) {
        pos += n;
        if (pos >= t.size()) error("Unexpected end of input", pos);
      }
      if (starts("-%}")) {
        push(Tok::CloseStmt, "%}", pos);
        pos += 3;
        skip_leading_whitespace();
        continue;
      }
      if (starts("-}}")) {
        push(Tok::CloseExpr, "}}", pos);
        pos += 3;
        skip_leading_whitespace();
        continue;
      }
      char c = t[pos];
      size_t start = pos;
      if (c == '-' || c == '+') {
        if (tokens.empty() || tokens.back().type == Tok::Text) error(std::string("Unexpected character: ") + c, pos);
        Tok lt = tokens.back().type;
        bool binary = lt == Tok::Ident || lt == Tok::Number || lt == Tok::String || lt == Tok::RParen ||
                      lt == Tok::RBracket;
        if (!binary) {
          ++pos;
          std::string num = consume_while([&](size_t p) { return is_digit(t[p]); });
          if (!num.empty() && at(pos) == '.' && is_digit(at(pos + 1))) {
            ++pos;
            num += "." + consume_while([&](size_t p) { return is_digit(t[p]); });
          }
          push(num.empty() ? Tok::Unary : Tok::Number, std::string(1, c) + num, start);
          continue;
        }
      }
      bool matched = false;
      for (const auto& [seq, type] : kTable) {
        if (type == Tok::CloseExpr && curly_depth > 0) continue;
        if (!starts(seq)) continue;
        push(type, seq, pos);
        if (type == Tok::OpenExpr) curly_depth = 0;
        else if (type == Tok::LBrace) ++curly_depth;
        else if (type == Tok::RBrace) --curly_depth;
        pos += std::string_view(seq).size();
        matched = true;
        break;
      }
      if (matched) continue;
      if (c == '\'' || c == '"') {
        ++pos;
        std::string s = consume_while([&](size_t p) { return t[p] != c; });
        push(Tok::String, std::move(s), start);
        ++pos;
        continue;
      }
      if (is_digit(c)) {
        std::string num = consume_while([&](size_t p) { return is_digit(t[p]); });
        if ((tokens.empty() || tokens.back().type != Tok::Dot) && at(pos) == '.' && is_digit(at(pos + 1))) {
          ++pos;
          num += "." + consume_while([&](size_t p) { return is_digit(t[p]); });
        }
        push(Tok::Number, std::move(num), start);
        continue;
      }
      if (is_word(c)) {
        push(Tok::Ident, consume_while([&](size_t p) { return is_word(t[p]); }), start);
        continue;
      }
      size_t len;
      std::string ch;
      append_utf8(ch, decode_utf8(t, pos, &len));
      error("Unexpected character: " + ch, pos);
    }
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  Lexer lx;
  lx.src = preprocess(source);
  lx.run();
  return std::move(lx.tokens);
}

}  // namespace deltafin::jinja
