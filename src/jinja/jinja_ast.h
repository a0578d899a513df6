// Jinja syntax tree. One node struct; which fields a kind uses is listed below.
// Every node records the template line of its first token for error messages.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace deltafin::jinja {

enum class NodeKind {
  // Statements
  Text,        // str: the text (also string literals; both evaluate to a string)
  Comment,
  If,          // a: test; body; alt: else/elif branch
  For,         // a: loop target (Identifier or Tuple); b: iterable (Select for `for x in y if c`); body; alt: else block
  Break,
  Continue,
  Set,         // a: target; b: value (null for a {% set %}...{% endset %} block); body
  Macro,       // str: name; args: parameters (Identifier or KwArg); body
  CallBlock,   // a: Call node; flag: has caller parameters; args: caller parameters; body
  FilterBlock, // a: filter (Identifier or Call); body
  // Expressions
  Identifier,  // str: name
  Integer,     // num
  Float,       // num
  Array,       // args: items
  Tuple,       // args: items
  Object,      // pairs: (key, value)
  Member,      // a: object; b: property (an expression or a Slice); flag: computed ([...])
  Call,        // a: callee; args
  Binary,      // str: operator (+ - ~ * / // % ** == != < > <= >= and or in "not in"); a, b
  Unary,       // str: operator (not + -); a
  Filter,      // a: operand; b: filter (Identifier or Call)
  Test,        // a: operand; str: test name; flag: negated
  Select,      // a: value; b: condition  (`a if b` without else)
  Ternary,     // a: condition; b: if true; c: if false
  Slice,       // a, b, c: start, stop, step (each may be null)
  KwArg,       // str: name; a: value (call keyword argument or parameter default)
  Spread,      // a: *expr
  KwSpread,    // a: **expr
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  int line = 0;
  std::string str;
  double num = 0;
  bool flag = false;
  NodePtr a, b, c;
  std::vector<NodePtr> args;
  std::vector<NodePtr> body;
  std::vector<NodePtr> alt;
  std::vector<std::pair<NodePtr, NodePtr>> pairs;

  Node(NodeKind k, int l) : kind(k), line(l) {}
};

// The reference's AST type name (for messages such as "Unknown filter: MemberExpression").
const char* node_name(NodeKind k);

}  // namespace deltafin::jinja
