#include "jinja/jinja_parser.h"

#include <cstdlib>
#include <initializer_list>
#include <set>

#include "jinja/jinja_value.h"

namespace deltafin::jinja {

const char* node_name(NodeKind k) {
  switch (k) {
    case NodeKind::Text: return "StringLiteral";
    case NodeKind::Comment: return "Comment";
    case NodeKind::If: return "If";
    case NodeKind::For: return "For";
    case NodeKind::Break: return "Break";
    case NodeKind::Continue: return "Continue";
    case NodeKind::Set: return "Set";
    case NodeKind::Macro: return "Macro";
    case NodeKind::CallBlock: return "CallStatement";
    case NodeKind::FilterBlock: return "FilterStatement";
    case NodeKind::Identifier: return "Identifier";
    case NodeKind::Integer: return "IntegerLiteral";
    case NodeKind::Float: return "FloatLiteral";
    case NodeKind::Array: return "ArrayLiteral";
    case NodeKind::Tuple: return "TupleLiteral";
    case NodeKind::Object: return "ObjectLiteral";
    case NodeKind::Member: return "MemberExpression";
    case NodeKind::Call: return "CallExpression";
    case NodeKind::Binary: return "BinaryExpression";
    case NodeKind::Unary: return "UnaryExpression";
    case NodeKind::Filter: return "FilterExpression";
    case NodeKind::Test: return "TestExpression";
    case NodeKind::Select: return "SelectExpression";
    case NodeKind::Ternary: return "Ternary";
    case NodeKind::Slice: return "SliceExpression";
    case NodeKind::KwArg: return "KeywordArgumentExpression";
    case NodeKind::Spread: return "SpreadExpression";
    case NodeKind::KwSpread: return "KeywordSpreadExpression";
  }
  return "?";
}

namespace {

enum class ArgMode { Call, Parameters };

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  std::vector<NodePtr> program() {
    std::vector<NodePtr> body;
    while (cur_ < t_.size()) body.push_back(parse_any());
    return body;
  }

 private:
  const std::vector<Token>& t_;
  size_t cur_ = 0;
  int depth_ = 0;  // nesting of statements/expressions, bounded against stack overflow

  // Bounds the height of the syntax tree (recursive descent and left-nested
  // operator chains alike), so a hostile template fails instead of overflowing
  // the stack while parsing, evaluating or destroying the tree.
  static constexpr int kMaxDepth = 1000;
  struct Nest {
    Parser& p;
    int n = 0;
    explicit Nest(Parser& parser) : p(parser) { step(); }
    void step() {
      ++n;
      if (++p.depth_ > kMaxDepth) p.error("template nesting too deep");
    }
    ~Nest() { p.depth_ -= n; }
  };

  int line() const {
    if (t_.empty()) return 1;
    return t_[cur_ < t_.size() ? cur_ : t_.size() - 1].line;
  }
  [[noreturn]] void error(const std::string& msg) const { throw JinjaError{msg, line()}; }
  const Token& peek() const {
    if (cur_ >= t_.size()) error("Unexpected end of template");
    return t_[cur_];
  }
  NodePtr node(NodeKind k) const { return std::make_unique<Node>(k, line()); }

  const Token& expect(Tok type, const char* what) {
    if (cur_ >= t_.size()) error(std::string("Parser Error: ") + what + ". Unexpected end of template.");
    const Token& tok = t_[cur_++];
    if (tok.type != type) {
      --cur_;
      error(std::string("Parser Error: ") + what + ". " + tok_name(tok.type) + " !== " + tok_name(type) + ".");
    }
    return tok;
  }
  void expect_identifier(const char* name) {
    if (!is_identifier({name})) error(std::string("Expected ") + name);
    ++cur_;
  }
  bool is(std::initializer_list<Tok> types) const {
    if (cur_ + types.size() > t_.size()) return false;
    size_t i = cur_;
    for (Tok type : types)
      if (t_[i++].type != type) return false;
    return true;
  }
  bool is(Tok type) const { return is({type}); }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (cur_ + 1 >= t_.size() || t_[cur_].type != Tok::OpenStmt || t_[cur_ + 1].type != Tok::Ident) return false;
    for (const char* n : names)
      if (t_[cur_ + 1].value == n) return true;
    return false;
  }
  bool is_identifier(std::initializer_list<const char*> names) const {
    if (cur_ + names.size() > t_.size()) return false;
    size_t i = cur_;
    for (const char* n : names) {
      if (t_[i].type != Tok::Ident || t_[i].value != n) return false;
      ++i;
    }
    return true;
  }
  // Parses statements until one of `names` opens a tag ({% name ...).
  std::vector<NodePtr> parse_until(std::initializer_list<const char*> names, const char* closing) {
    std::vector<NodePtr> body;
    while (!is_statement(names)) {
      if (cur_ >= t_.size()) error(std::string("Unexpected end of template: missing {% ") + closing + " %}");
      body.push_back(parse_any());
    }
    return body;
  }

  NodePtr parse_any() {
    Nest nest(*this);
    const Token& tok = peek();
    switch (tok.type) {
      case Tok::Comment: {
        auto n = node(NodeKind::Comment);
        ++cur_;
        return n;
      }
      case Tok::Text: {
        auto n = node(NodeKind::Text);
        n->str = tok.value;
        ++cur_;
        return n;
      }
      case Tok::OpenStmt: return parse_statement();
      case Tok::OpenExpr: {
        ++cur_;
        auto e = parse_expression();
        expect(Tok::CloseExpr, "Expected closing expression token");
        return e;
      }
      default: error(std::string("Unexpected token type: ") + tok_name(tok.type));
    }
  }

  void expect_end_tag(const char* name) {
    expect(Tok::OpenStmt, "Expected {% token");
    expect_identifier(name);
    expect(Tok::CloseStmt, "Expected %} token");
  }

  NodePtr parse_statement() {
    expect(Tok::OpenStmt, "Expected opening statement token");
    const Token& tok = peek();
    if (tok.type != Tok::Ident) error(std::string("Unknown statement, got ") + tok_name(tok.type));
    std::string name = tok.value;
    int stmt_line = tok.line;
    NodePtr result;
    if (name == "set") {
      ++cur_;
      result = parse_set();
    } else if (name == "if") {
      ++cur_;
      result = parse_if();
      expect_end_tag("endif");
    } else if (name == "macro") {
      ++cur_;
      result = parse_macro();
      expect_end_tag("endmacro");
    } else if (name == "for") {
      ++cur_;
      result = parse_for();
      expect_end_tag("endfor");
    } else if (name == "call") {
      ++cur_;
      result = node(NodeKind::CallBlock);
      if (is(Tok::LParen)) {
        result->flag = true;
        result->args = parse_args(ArgMode::Parameters);
      }
      auto callee = parse_primary();
      if (callee->kind != NodeKind::Identifier) error("Expected identifier following call statement");
      auto call = std::make_unique<Node>(NodeKind::Call, callee->line);
      call->a = std::move(callee);
      call->args = parse_args(ArgMode::Call);
      result->a = std::move(call);
      expect(Tok::CloseStmt, "Expected closing statement token");
      result->body = parse_until({"endcall"}, "endcall");
      expect_end_tag("endcall");
    } else if (name == "break" || name == "continue") {
      ++cur_;
      expect(Tok::CloseStmt, "Expected closing statement token");
      result = node(name == "break" ? NodeKind::Break : NodeKind::Continue);
    } else if (name == "filter") {
      ++cur_;
      result = node(NodeKind::FilterBlock);
      auto filter = parse_primary();
      if (filter->kind == NodeKind::Identifier && is(Tok::LParen)) filter = parse_call(std::move(filter));
      result->a = std::move(filter);
      expect(Tok::CloseStmt, "Expected closing statement token");
      result->body = parse_until({"endfilter"}, "endfilter");
      expect_end_tag("endfilter");
    } else {
      error("Unknown statement type: " + name);
    }
    result->line = stmt_line;
    return result;
  }

  NodePtr parse_set() {
    auto n = node(NodeKind::Set);
    n->a = parse_expression_sequence(false);
    if (is(Tok::Equals)) {
      ++cur_;
      n->b = parse_expression_sequence(false);
    } else {
      expect(Tok::CloseStmt, "Expected %} token");
      n->body = parse_until({"endset"}, "endset");
      expect(Tok::OpenStmt, "Expected {% token");
      expect_identifier("endset");
    }
    expect(Tok::CloseStmt, "Expected closing statement token");
    return n;
  }

  NodePtr parse_if() {
    Nest nest(*this);
    auto n = node(NodeKind::If);
    n->a = parse_expression();
    expect(Tok::CloseStmt, "Expected closing statement token");
    n->body = parse_until({"elif", "else", "endif"}, "endif");
    if (is_statement({"elif"})) {
      cur_ += 2;
      n->alt.push_back(parse_if());
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStmt, "Expected closing statement token");
      n->alt = parse_until({"endif"}, "endif");
    }
    return n;
  }

  NodePtr parse_macro() {
    auto n = node(NodeKind::Macro);
    auto name = parse_primary();
    if (name->kind != NodeKind::Identifier) error("Expected identifier following macro statement");
    n->str = name->str;
    n->args = parse_args(ArgMode::Parameters);
    expect(Tok::CloseStmt, "Expected closing statement token");
    n->body = parse_until({"endmacro"}, "endmacro");
    return n;
  }

  NodePtr parse_expression_sequence(bool primary) {
    int l = line();
    std::vector<NodePtr> items;
    items.push_back(primary ? parse_primary() : parse_expression());
    if (!is(Tok::Comma)) return std::move(items[0]);
    while (true) {
      ++cur_;
      items.push_back(primary ? parse_primary() : parse_expression());
      if (!is(Tok::Comma)) break;
    }
    auto t = std::make_unique<Node>(NodeKind::Tuple, l);
    t->args = std::move(items);
    return t;
  }

  NodePtr parse_for() {
    auto n = node(NodeKind::For);
    n->a = parse_expression_sequence(true);
    if (n->a->kind != NodeKind::Identifier && n->a->kind != NodeKind::Tuple)
      error(std::string("Expected identifier/tuple for the loop variable, got ") + node_name(n->a->kind) + " instead");
    if (!is_identifier({"in"})) error("Expected `in` keyword following loop variable");
    ++cur_;
    n->b = parse_expression();
    expect(Tok::CloseStmt, "Expected closing statement token");
    n->body = parse_until({"endfor", "else"}, "endfor");
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStmt, "Expected closing statement token");
      n->alt = parse_until({"endfor"}, "endfor");
    }
    return n;
  }

  NodePtr parse_expression() {
    Nest nest(*this);
    return parse_if_expression();
  }

  NodePtr parse_if_expression() {
    Nest nest(*this);
    auto a = parse_or();
    if (is_identifier({"if"})) {
      int l = line();
      ++cur_;
      auto test = parse_or();
      if (is_identifier({"else"})) {
        ++cur_;
        auto n = std::make_unique<Node>(NodeKind::Ternary, l);
        n->a = std::move(test);
        n->b = std::move(a);
        n->c = parse_if_expression();
        return n;
      }
      auto n = std::make_unique<Node>(NodeKind::Select, l);
      n->a = std::move(a);
      n->b = std::move(test);
      return n;
    }
    return a;
  }

  NodePtr binary(std::string op, NodePtr left, NodePtr right, int l) {
    auto n = std::make_unique<Node>(NodeKind::Binary, l);
    n->str = std::move(op);
    n->a = std::move(left);
    n->b = std::move(right);
    return n;
  }

  NodePtr parse_or() {
    Nest chain(*this);
    auto left = parse_and();
    while (is_identifier({"or"})) {
      chain.step();
      int l = line();
      ++cur_;
      left = binary("or", std::move(left), parse_and(), l);
    }
    return left;
  }

  NodePtr parse_and() {
    Nest chain(*this);
    auto left = parse_not();
    while (is_identifier({"and"})) {
      chain.step();
      int l = line();
      ++cur_;
      left = binary("and", std::move(left), parse_not(), l);
    }
    return left;
  }

  NodePtr parse_not() {
    Nest nest(*this);
    NodePtr result;
    while (is_identifier({"not"})) {
      auto n = node(NodeKind::Unary);
      n->str = "not";
      ++cur_;
      n->a = parse_not();
      result = std::move(n);
    }
    return result ? std::move(result) : parse_comparison();
  }

  NodePtr parse_comparison() {
    Nest chain(*this);
    auto left = parse_additive();
    while (true) {
      chain.step();
      int l = line();
      std::string op;
      if (is_identifier({"not", "in"})) {
        op = "not in";
        cur_ += 2;
      } else if (is_identifier({"in"})) {
        op = "in";
        ++cur_;
      } else if (is(Tok::Comparison)) {
        op = t_[cur_++].value;
      } else {
        break;
      }
      left = binary(op, std::move(left), parse_additive(), l);
    }
    return left;
  }

  NodePtr parse_additive() {
    Nest chain(*this);
    auto left = parse_multiplicative();
    while (is(Tok::Additive)) {
      chain.step();
      int l = line();
      std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), parse_multiplicative(), l);
    }
    return left;
  }

  NodePtr parse_multiplicative() {
    Nest chain(*this);
    auto left = parse_power();
    while (is(Tok::Multiplicative)) {
      chain.step();
      int l = line();
      std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), parse_power(), l);
    }
    return left;
  }

  NodePtr parse_power() {
    Nest chain(*this);
    auto left = parse_test();
    while (is(Tok::Power)) {
      chain.step();
      int l = line();
      ++cur_;
      left = binary("**", std::move(left), parse_test(), l);
    }
    return left;
  }

  NodePtr parse_test() {
    Nest chain(*this);
    auto operand = parse_filter();
    while (is_identifier({"is"})) {
      chain.step();
      auto n = node(NodeKind::Test);
      ++cur_;
      if (is_identifier({"not"})) {
        n->flag = true;
        ++cur_;
      }
      auto test = parse_primary();
      if (test->kind != NodeKind::Identifier) error("Expected identifier for the test");
      n->str = test->str;
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr parse_filter() {
    Nest chain(*this);
    auto operand = parse_unary_sign();
    while (is(Tok::Pipe)) {
      chain.step();
      auto n = node(NodeKind::Filter);
      ++cur_;
      auto filter = parse_primary();
      if (filter->kind != NodeKind::Identifier) error("Expected identifier for the filter");
      if (is(Tok::LParen)) filter = parse_call(std::move(filter));
      n->a = std::move(operand);
      n->b = std::move(filter);
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr parse_unary_sign() {
    Nest nest(*this);
    if (cur_ < t_.size() && (t_[cur_].type == Tok::Unary || t_[cur_].type == Tok::Additive) &&
        (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      auto n = node(NodeKind::Unary);
      n->str = t_[cur_++].value;
      n->a = parse_unary_sign();
      return n;
    }
    return parse_call_member();
  }

  NodePtr parse_call_member() {
    auto member = parse_member(parse_primary());
    if (is(Tok::LParen)) return parse_call(std::move(member));
    return member;
  }

  NodePtr parse_call(NodePtr callee) {
    Nest nest(*this);
    auto n = std::make_unique<Node>(NodeKind::Call, callee->line);
    n->a = std::move(callee);
    n->args = parse_args(ArgMode::Call);
    NodePtr expr = parse_member(std::move(n));
    if (is(Tok::LParen)) expr = parse_call(std::move(expr));
    return expr;
  }

  std::vector<NodePtr> parse_args(ArgMode mode) {
    expect(Tok::LParen, "Expected opening parenthesis for arguments list");
    auto args = parse_argument_list(mode);
    expect(Tok::RParen, "Expected closing parenthesis for arguments list");
    return args;
  }

  std::vector<NodePtr> parse_argument_list(ArgMode mode) {
    std::vector<NodePtr> args;
    std::set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!is(Tok::RParen)) {
      if (cur_ >= t_.size()) error("Unexpected end of template in argument list");
      bool kw_spread = is(Tok::Power);
      bool spread = is(Tok::Multiplicative) && t_[cur_].value == "*";
      if (mode == ArgMode::Parameters && (kw_spread || spread))
        error("Argument unpacking is not allowed in parameter declarations");
      if (kw_spread) {
        auto n = node(NodeKind::KwSpread);
        ++cur_;
        n->a = parse_expression();
        args.push_back(std::move(n));
        if (is(Tok::Comma)) ++cur_;
        if (!is(Tok::RParen)) error("Expected closing parenthesis: `**` must be applied to the final argument");
        break;
      }
      NodePtr arg;
      if (spread) {
        if (saw_spread) error("Only one `*` argument unpacking is allowed");
        saw_spread = true;
        arg = node(NodeKind::Spread);
        ++cur_;
        arg->a = parse_expression();
      } else {
        arg = parse_expression();
        if (is(Tok::Equals)) {
          ++cur_;
          if (arg->kind != NodeKind::Identifier)
            error(mode == ArgMode::Parameters ? "Expected identifier for parameter declaration"
                                              : "Expected identifier for keyword argument");
          auto kw = std::make_unique<Node>(NodeKind::KwArg, arg->line);
          kw->str = arg->str;
          kw->a = parse_expression();
          arg = std::move(kw);
        }
        if (mode == ArgMode::Parameters) {
          if (arg->kind != NodeKind::Identifier && arg->kind != NodeKind::KwArg)
            error("Expected identifier for parameter declaration");
          if (!names.insert(arg->str).second) error("Duplicate parameter name: " + arg->str);
        }
        if (arg->kind == NodeKind::KwArg) {
          saw_keyword = true;
        } else if (saw_keyword) {
          error(mode == ArgMode::Call ? "Positional arguments must come before keyword arguments"
                                      : "Non-default argument follows default argument");
        } else if (saw_spread) {
          error("Positional arguments must not follow `*` argument unpacking");
        }
      }
      args.push_back(std::move(arg));
      if (is(Tok::Comma)) ++cur_;
    }
    return args;
  }

  // obj[...] contents: an index expression or a slice start:stop:step.
  NodePtr parse_subscript() {
    int l = line();
    std::vector<NodePtr> parts;
    bool slice = false;
    while (!is(Tok::RBracket)) {
      if (cur_ >= t_.size()) error("Unexpected end of template in subscript");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++cur_;
        slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::Colon)) {
          ++cur_;
          slice = true;
        }
      }
    }
    if (parts.empty()) error("Expected at least one argument for member/slice expression");
    if (!slice) return std::move(parts[0]);
    if (parts.size() > 3) error("Expected 0-3 arguments for slice expression");
    auto n = std::make_unique<Node>(NodeKind::Slice, l);
    parts.resize(3);
    n->a = std::move(parts[0]);
    n->b = std::move(parts[1]);
    n->c = std::move(parts[2]);
    return n;
  }

  NodePtr parse_member(NodePtr object) {
    Nest chain(*this);
    while (is(Tok::Dot) || is(Tok::LBracket)) {
      chain.step();
      auto n = node(NodeKind::Member);
      bool computed = t_[cur_].type == Tok::LBracket;
      ++cur_;
      if (computed) {
        n->b = parse_subscript();
        expect(Tok::RBracket, "Expected closing square bracket");
      } else {
        n->b = parse_primary();
        if (n->b->kind != NodeKind::Identifier && n->b->kind != NodeKind::Integer)
          error("Expected identifier or integer following dot operator");
      }
      n->flag = computed;
      n->line = object->line;
      n->a = std::move(object);
      object = std::move(n);
    }
    return object;
  }

  NodePtr parse_primary() {
    const Token& tok = peek();
    ++cur_;
    switch (tok.type) {
      case Tok::Number: {
        bool is_float = tok.value.find('.') != std::string::npos;
        auto n = std::make_unique<Node>(is_float ? NodeKind::Float : NodeKind::Integer, tok.line);
        n->num = std::strtod(tok.value.c_str(), nullptr);
        return n;
      }
      case Tok::String: {
        auto n = std::make_unique<Node>(NodeKind::Text, tok.line);
        n->str = tok.value;
        while (is(Tok::String)) n->str += t_[cur_++].value;
        return n;
      }
      case Tok::Ident: {
        auto n = std::make_unique<Node>(NodeKind::Identifier, tok.line);
        n->str = tok.value;
        return n;
      }
      case Tok::LParen: {
        auto e = parse_expression_sequence(false);
        expect(Tok::RParen, "Expected closing parenthesis");
        return e;
      }
      case Tok::LBracket: {
        auto n = std::make_unique<Node>(NodeKind::Array, tok.line);
        while (!is(Tok::RBracket)) {
          if (cur_ >= t_.size()) error("Unexpected end of template in array literal");
          n->args.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return n;
      }
      case Tok::LBrace: {
        auto n = std::make_unique<Node>(NodeKind::Object, tok.line);
        while (!is(Tok::RBrace)) {
          if (cur_ >= t_.size()) error("Unexpected end of template in object literal");
          auto key = parse_expression();
          expect(Tok::Colon, "Expected colon between key and value in object literal");
          auto value = parse_expression();
          n->pairs.emplace_back(std::move(key), std::move(value));
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return n;
      }
      default: --cur_; error(std::string("Unexpected token: ") + tok_name(tok.type));
    }
  }
};

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace deltafin::jinja
