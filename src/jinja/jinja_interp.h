// Jinja interpreter: evaluates a parsed template against an environment, with the
// semantics of the reference renderer (@huggingface/jinja) including its quirks
// (dynamically scoped macros, output of a loop iteration dropped when it hits
// break/continue, JS equality, none printing as nothing, ...).
//
// Implementation files: jinja_interp.cpp (statements, operators, macros),
// jinja_filters.cpp (| filters), jinja_builtins.cpp (tests, methods, globals).
#pragma once
#include <ctime>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_value.h"

namespace deltafin::jinja {

using KwArgs = std::vector<std::pair<std::string, Value>>;

// The broken-down local time strftime_now formats.
using Clock = std::function<std::tm()>;

class Interpreter {
 public:
  explicit Interpreter(Clock clock) : clock_(std::move(clock)) {}

  // Renders top-level statements. Throws JinjaError.
  std::string run(const std::vector<NodePtr>& program, const EnvPtr& env);

  // Declares the globals of a fresh render: true/false/none (and title case),
  // namespace, range, raise_exception, strftime_now.
  void setup_globals(Env& env);

  // Evaluates an expression; a JS-undefined "hole" is an error here.
  Value eval(const Node& n, const EnvPtr& env);

 private:
  // Evaluates and lets a hole through (for set, ternaries, and/or, select).
  Value eval_hole(const Node& n, const EnvPtr& env);
  Value eval_node(const Node& n, const EnvPtr& env);
  std::string eval_block(const std::vector<NodePtr>& body, const EnvPtr& env);

  Value binary(const Node& n, const EnvPtr& env);
  Value unary(const Node& n, const EnvPtr& env);
  Value member(const Node& n, const EnvPtr& env);
  Value slice(const Value& object, const Node& n, const EnvPtr& env);
  Value call(const Node& n, const EnvPtr& env);
  Value object_literal(const Node& n, const EnvPtr& env);
  Value set(const Node& n, const EnvPtr& env);
  Value for_loop(const Node& n, const EnvPtr& env);
  Value macro(const Node& n, const EnvPtr& env);
  Value call_block(const Node& n, const EnvPtr& env);
  void bind_macro_arguments(const std::string& display_name, const std::vector<NodePtr>& params,
                            bool uses_kwargs, bool uses_varargs, const Args& args, const EnvPtr& scope);
  void evaluate_arguments(const std::vector<NodePtr>& nodes, const EnvPtr& env, Args* positional, KwArgs* kwargs);

  // jinja_filters.cpp
  Value apply_filter(const Value& operand, const Node& filter, const EnvPtr& env);
  Value apply_filter_call(const Value& operand, const Node& filter, const EnvPtr& env);
  Value sort_array(const Value& operand, const Args& args, const KwArgs& kwargs);

  // jinja_builtins.cpp
  // A method or property of a value (s.upper, d.items, a.length); Undefined if none.
  Value builtin_member(const Value& object, const std::string& name);
  Clock clock_;
  // Namespaces made by this render; run() empties them at the end, which breaks
  // reference cycles (a namespace can hold itself: {% set ns.me = ns %}).
  std::vector<std::weak_ptr<ObjectData>> namespaces_;
  int depth_ = 0;  // nested evaluations; bounded so runaway recursion fails instead of overflowing the stack
};

// Nesting bound of evaluation (a recursive macro call adds 2-3 levels; ~1 KB of
// stack per level, so ~1 MB at worst). The reference
// fails similarly on runaway recursion (JS call stack exhaustion).
inline constexpr int kMaxEvalDepth = 1000;

// The reference's tests (`x is defined`, selectattr's test names). `arg` is the
// test's second operand (only selectattr passes one; null when absent).
bool has_test(const std::string& name);
bool run_test(const std::string& name, const Value& operand, const Value* arg);

// compareRuntimeValues: numbers (and booleans) by value, strings by UTF-16 code
// units (case-folded unless case_sensitive), none == none, undefined == undefined;
// anything else fails. Returns -1, 0 or 1.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

// Dotted attribute lookup ("a.b.0") used by map/sort: Undefined when missing.
Value attribute_path(const Value& item, const std::string& path);

// Keyword arguments as the trailing KeywordArgumentsValue of a call.
Value kwargs_value(KwArgs kwargs);
// Splits a trailing KeywordArgumentsValue off args (returns its entries, or none).
KwArgs take_kwargs(Args& args);

}  // namespace deltafin::jinja
