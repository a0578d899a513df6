// Jinja parser: tokens -> statements. Follows the reference's grammar and operator
// precedence (lowest first): `a if b else c`, or, and, not, comparisons and
// (not) in, + - ~, * / // %, **, `is` tests, | filters, unary + -, member/call.
#pragma once
#include <vector>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_lexer.h"

namespace deltafin::jinja {

// The program's top-level statements. Throws JinjaError naming the line.
std::vector<NodePtr> parse(const std::vector<Token>& tokens);

}  // namespace deltafin::jinja
