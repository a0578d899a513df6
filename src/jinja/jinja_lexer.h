// Jinja lexer. Mirrors the reference (@huggingface/jinja) with the options chat
// templates are rendered with: trim_blocks and lstrip_blocks on, a single
// trailing newline dropped, {%- -%} {{- -}} {#- -#} strip whitespace, and the
// transformers-specific {% generation %} / {% endgeneration %} tags removed.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace deltafin::jinja {

enum class Tok {
  Text,            // raw text between tags
  Number,          // 123, 1.5, -1 (a sign directly before digits in unary position)
  String,          // quoted literal, escapes resolved
  Ident,           // names and keywords (if, in, not, ...)
  Equals,          // =
  LParen,
  RParen,
  OpenStmt,        // {%
  CloseStmt,       // %}
  OpenExpr,        // {{
  CloseExpr,       // }}
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Dot,
  Colon,
  Pipe,
  Additive,        // + - ~
  Multiplicative,  // * / // %
  Power,           // **
  Comparison,      // < > <= >= == !=
  Unary,           // + - in unary position, not followed by digits
  Comment,         // {# ... #}
};
const char* tok_name(Tok t);  // the reference's token type name, for messages

struct Token {
  Tok type;
  std::string value;
  int line;  // 1-based line in the original template
};

// Throws JinjaError (with the line) on malformed input.
std::vector<Token> tokenize(std::string_view source);

}  // namespace deltafin::jinja
