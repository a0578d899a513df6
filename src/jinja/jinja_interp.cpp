#include "jinja/jinja_interp.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "jinja/jinja_text.h"

namespace deltafin::jinja {

namespace {

struct BreakSignal {};
struct ContinueSignal {};

[[noreturn]] void fail_hole() {
  fail("an undefined result (e.g. `first`/`last` of an empty list) was used in an expression; "
       "the reference fails on it too");
}

// --- Which of `kwargs` / `varargs` a macro body reads before declaring them ----
// (the reference follows Jinja's visit order; only names read this way are bound).

struct SpecialArgs {
  std::set<std::string> declared, accessed;
  static bool special(const std::string& n) { return n == "kwargs" || n == "varargs"; }
  void declare(const std::string& n) {
    if (special(n)) declared.insert(n);
  }
  void declare_target(const Node* t) {
    if (!t) return;
    if (t->kind == NodeKind::Identifier) declare(t->str);
    else if (t->kind == NodeKind::Tuple)
      for (const auto& e : t->args) declare_target(e.get());
  }
  void declare_params(const std::vector<NodePtr>& params) {
    for (const auto& p : params) declare(p->str);
  }
  void visit_defaults(const std::vector<NodePtr>& params) {
    for (const auto& p : params)
      if (p->kind == NodeKind::KwArg) visit(p->a.get());
  }
  void visit_filter(const Node* f) {
    if (f && f->kind == NodeKind::Call) visit(f->args);
  }
  void visit(const std::vector<NodePtr>& nodes) {
    for (const auto& n : nodes) visit(n.get());
  }
  void visit(const Node* n) {
    if (!n) return;
    switch (n->kind) {
      case NodeKind::For:
        declare_target(n->a.get());
        if (n->b->kind == NodeKind::Select) {  // the loop condition is visited last
          visit(n->b->a.get());
          visit(n->body);
          visit(n->alt);
          visit(n->b->b.get());
          return;
        }
        visit(n->b.get());
        visit(n->body);
        visit(n->alt);
        return;
      case NodeKind::Set:
        declare_target(n->a.get());
        visit(n->b.get());
        visit(n->body);
        return;
      case NodeKind::Macro:
        declare_params(n->args);
        visit_defaults(n->args);
        visit(n->body);
        return;
      case NodeKind::CallBlock:
        visit(n->a.get());
        declare_params(n->args);
        visit_defaults(n->args);
        visit(n->body);
        return;
      case NodeKind::FilterBlock:
        visit(n->body);
        visit_filter(n->a.get());
        return;
      case NodeKind::Identifier:
        if (special(n->str) && !declared.count(n->str)) accessed.insert(n->str);
        return;
      case NodeKind::Member:
        visit(n->a.get());
        if (n->flag) visit(n->b.get());
        return;
      case NodeKind::Filter:
        visit(n->a.get());
        visit_filter(n->b.get());
        return;
      case NodeKind::Test: visit(n->a.get()); return;
      case NodeKind::Select:
        visit(n->b.get());
        visit(n->a.get());
        return;
      case NodeKind::KwArg: visit(n->a.get()); return;
      case NodeKind::If:
      case NodeKind::Ternary:
      case NodeKind::Call:
      case NodeKind::Binary:
      case NodeKind::Unary:
      case NodeKind::Slice:
      case NodeKind::Spread:
      case NodeKind::KwSpread:
      case NodeKind::Array:
      case NodeKind::Tuple:
        // Field order of the reference's nodes: If (test, body, alternate),
        // Ternary (condition, true, false), Call (callee, args), ...
        if (n->kind == NodeKind::Ternary) {
          visit(n->a.get());
          visit(n->b.get());
          visit(n->c.get());
          return;
        }
        visit(n->a.get());
        visit(n->args);
        visit(n->b.get());
        visit(n->c.get());
        visit(n->body);
        visit(n->alt);
        return;
      case NodeKind::Object:
        for (const auto& [k, v] : n->pairs) {
          visit(k.get());
          visit(v.get());
        }
        return;
      default: return;
    }
  }
};

std::set<std::string> accessed_special_args(const std::vector<NodePtr>& params, const std::vector<NodePtr>& body) {
  SpecialArgs s;
  s.declare_params(params);
  s.visit(body);
  return s.accessed;
}

// Python-style slicing as the reference implements it (utils.ts slice).
template <typename T>
std::vector<T> slice_vec(const std::vector<T>& v, const Value& start_v, const Value& stop_v, const Value& step_v) {
  double len = static_cast<double>(v.size());
  double step = step_v.is(Kind::Undefined) ? 1 : step_v.num();
  double dir = step > 0 ? 1 : step < 0 ? -1 : 0;
  double start, stop;
  if (dir >= 0) {
    start = start_v.is(Kind::Undefined) ? 0 : start_v.num();
    start = start < 0 ? std::max(len + start, 0.0) : std::min(start, len);
    stop = stop_v.is(Kind::Undefined) ? len : stop_v.num();
    stop = stop < 0 ? std::max(len + stop, 0.0) : std::min(stop, len);
  } else {
    start = start_v.is(Kind::Undefined) ? len - 1 : start_v.num();
    start = start < 0 ? std::max(len + start, -1.0) : std::min(start, len - 1);
    stop = stop_v.is(Kind::Undefined) ? -1 : stop_v.num();
    stop = stop < -1 ? std::max(len + stop, -1.0) : std::min(stop, len - 1);
  }
  std::vector<T> out;
  for (double i = start; dir * i < dir * stop; i += step) out.push_back(v[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

Value kwargs_value(KwArgs kwargs) { return Value::object(std::move(kwargs), true); }

KwArgs take_kwargs(Args& args) {
  if (args.empty() || !args.back().is_kwargs()) return {};
  KwArgs kw = args.back().obj().entries;
  args.pop_back();
  return kw;
}

std::string Interpreter::run(const std::vector<NodePtr>& program, const EnvPtr& env) {
  struct ClearNamespaces {
    std::vector<std::weak_ptr<ObjectData>>& list;
    ~ClearNamespaces() {
      for (auto& w : list)
        if (auto ns = w.lock()) ns->entries.clear();
      list.clear();
    }
  } clear{namespaces_};
  try {
    return eval_block(program, env);
  } catch (const BreakSignal&) {
    fail("{% break %} outside of a loop");
  } catch (const ContinueSignal&) {
    fail("{% continue %} outside of a loop");
  }
}

Value Interpreter::eval(const Node& n, const EnvPtr& env) {
  Value v = eval_hole(n, env);
  if (v.is(Kind::Hole)) {
    try {
      fail_hole();
    } catch (JinjaError& e) {
      e.line = n.line;
      throw;
    }
  }
  return v;
}

Value Interpreter::eval_hole(const Node& n, const EnvPtr& env) {
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& depth) : d(depth) { ++d; }
    ~DepthGuard() { --d; }
  } guard(depth_);
  try {
    if (depth_ > kMaxEvalDepth) fail("template recursion too deep (more than " + std::to_string(kMaxEvalDepth) + " nested evaluations)");
    return eval_node(n, env);
  } catch (JinjaError& e) {
    if (!e.line) e.line = n.line;
    throw;
  }
}

std::string Interpreter::eval_block(const std::vector<NodePtr>& body, const EnvPtr& env) {
  std::string out;
  for (const auto& stmt : body) {
    Value v = eval(*stmt, env);
    if (!v.is(Kind::Null) && !v.is(Kind::Undefined)) {
      try {
        out += to_output_string(v);
      } catch (JinjaError& e) {
        if (!e.line) e.line = stmt->line;
        throw;
      }
    }
  }
  return out;
}

Value Interpreter::eval_node(const Node& n, const EnvPtr& env) {
  switch (n.kind) {
    case NodeKind::Text: return Value::string(n.str);
    case NodeKind::Comment: return Value::null();
    case NodeKind::If: return Value::string(eval_block(truthy(eval(*n.a, env)) ? n.body : n.alt, env));
    case NodeKind::For: return for_loop(n, env);
    case NodeKind::Break: throw BreakSignal{};
    case NodeKind::Continue: throw ContinueSignal{};
    case NodeKind::Set: return set(n, env);
    case NodeKind::Macro: return macro(n, env);
    case NodeKind::CallBlock: return call_block(n, env);
    case NodeKind::FilterBlock: return apply_filter(Value::string(eval_block(n.body, env)), *n.a, env);
    case NodeKind::Identifier: return env->lookup(n.str);
    case NodeKind::Integer: return Value::integer(n.num);
    case NodeKind::Float: return Value::floating(n.num);
    case NodeKind::Array:
    case NodeKind::Tuple: {
      std::vector<Value> items;
      for (const auto& e : n.args) items.push_back(eval(*e, env));
      return Value::array(std::move(items), n.kind == NodeKind::Tuple);
    }
    case NodeKind::Object: return object_literal(n, env);
    case NodeKind::Member: return member(n, env);
    case NodeKind::Call: return call(n, env);
    case NodeKind::Binary: return binary(n, env);
    case NodeKind::Unary: return unary(n, env);
    case NodeKind::Filter: {
      Value operand = eval_hole(*n.a, env);
      if (operand.is(Kind::Hole) && !(n.b->kind == NodeKind::Identifier && n.b->str == "safe")) fail_hole();
      return apply_filter(operand, *n.b, env);
    }
    case NodeKind::Test: {
      Value operand = eval(*n.a, env);
      if (!has_test(n.str)) fail("Unknown test: " + n.str);
      bool r = run_test(n.str, operand, nullptr);
      return Value::boolean(n.flag ? !r : r);
    }
    case NodeKind::Select:
      if (!truthy(eval(*n.b, env))) return Value::undefined();
      return eval_hole(*n.a, env);
    case NodeKind::Ternary: return truthy(eval(*n.a, env)) ? eval_hole(*n.b, env) : eval_hole(*n.c, env);
    case NodeKind::Slice:
    case NodeKind::KwArg:
    case NodeKind::Spread:
    case NodeKind::KwSpread: break;
  }
  fail(std::string("Unknown node type: ") + node_name(n.kind));
}

Value Interpreter::object_literal(const Node& n, const EnvPtr& env) {
  auto obj = std::make_shared<ObjectData>();
  for (const auto& [k, v] : n.pairs) {
    Value key = eval(*k, env);
    if (!key.is(Kind::String)) fail(std::string("Object keys must be strings: got ") + key.type_name());
    obj->set(key.str(), eval(*v, env));
  }
  return Value::object(std::move(obj));
}

Value Interpreter::binary(const Node& n, const EnvPtr& env) {
  const std::string& op = n.str;
  Value left = eval(*n.a, env);
  if (op == "and") return truthy(left) ? eval_hole(*n.b, env) : left;
  if (op == "or") return truthy(left) ? left : eval_hole(*n.b, env);
  Value right = eval(*n.b, env);
  if (op == "==") return Value::boolean(loose_equals(left, right));
  if (op == "!=") return Value::boolean(!loose_equals(left, right));

  if (left.is(Kind::Undefined) || right.is(Kind::Undefined)) {
    if (right.is(Kind::Undefined) && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    fail("Cannot perform operation " + op + " on undefined values");
  } else if (left.is(Kind::Null) || right.is(Kind::Null)) {
    fail("Cannot perform operation on null values");
  } else if (op == "~") {
    return Value::string(js_raw_string(left) + js_raw_string(right));
  } else if (op == "**" && left.is_numeric_like() && right.is_numeric_like()) {
    double a = left.as_number(), b = right.as_number();
    if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
    double r = std::pow(a, b);
    if (std::fabs(a) == 1 && !std::isfinite(b)) r = NAN;  // JS: (+-1) ** (NaN or +-Infinity) is NaN
    if (!std::isfinite(r)) fail("Exponentiation result is not a finite real number");
    bool is_float = left.is(Kind::Float) || right.is(Kind::Float) || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  } else if (left.is_number() && right.is_number()) {
    double a = left.num(), b = right.num();
    bool is_float = left.is(Kind::Float) || right.is(Kind::Float);
    auto num = [&](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == ">=") return Value::boolean(a >= b);
    if (op == "<=") return Value::boolean(a <= b);
  } else if (left.is(Kind::Array) && right.is(Kind::Array)) {
    if (op == "+") {
      std::vector<Value> items = left.arr().items;
      items.insert(items.end(), right.arr().items.begin(), right.arr().items.end());
      return Value::array(std::move(items));
    }
  } else if (right.is(Kind::Array)) {
    if (op == "in" || op == "not in") {
      bool found = false;
      for (const auto& x : right.arr().items) found = found || strict_equals(x, left);
      return Value::boolean(op == "in" ? found : !found);
    }
  }
  if ((left.is(Kind::String) || right.is(Kind::String)) && op == "+")
    return Value::string(js_raw_string(left) + js_raw_string(right));
  if (left.is(Kind::String) && right.is(Kind::String) && (op == "in" || op == "not in")) {
    bool found = right.str().find(left.str()) != std::string::npos;
    return Value::boolean(op == "in" ? found : !found);
  }
  if (left.is(Kind::String) && right.is(Kind::Object) && (op == "in" || op == "not in")) {
    bool found = right.obj().find(left.str()) != nullptr;
    return Value::boolean(op == "in" ? found : !found);
  }
  fail("Unknown operator \"" + op + "\" between " + left.type_name() + " and " + right.type_name());
}

Value Interpreter::unary(const Node& n, const EnvPtr& env) {
  Value v = eval(*n.a, env);
  if (n.str == "not") return Value::boolean(!truthy(v));
  if (v.is_numeric_like()) {
    double r = (n.str == "-" ? -1 : 1) * v.as_number();
    return v.is(Kind::Float) ? Value::floating(r) : Value::integer(r);
  }
  fail("Unknown operator \"" + n.str + "\" for " + v.type_name());
}

void Interpreter::evaluate_arguments(const std::vector<NodePtr>& nodes, const EnvPtr& env, Args* positional,
                                     KwArgs* kwargs) {
  for (const auto& a : nodes) {
    if (a->kind == NodeKind::Spread) {
      Value v = eval(*a->a, env);
      if (!v.is(Kind::Array)) fail(std::string("Cannot unpack non-iterable type: ") + v.type_name());
      for (const auto& item : v.arr().items) positional->push_back(item);
    } else if (a->kind != NodeKind::KwArg && a->kind != NodeKind::KwSpread) {
      positional->push_back(eval(*a, env));
    }
  }
  auto add = [&](const std::string& key, Value v) {
    for (const auto& [k, _] : *kwargs)
      if (k == key) fail("Got multiple values for keyword argument '" + key + "'");
    kwargs->emplace_back(key, std::move(v));
  };
  for (const auto& a : nodes) {
    if (a->kind == NodeKind::KwArg) {
      add(a->str, eval(*a->a, env));
    } else if (a->kind == NodeKind::KwSpread) {
      Value v = eval(*a->a, env);
      if (!v.is(Kind::Object)) fail(std::string("Argument after ** must be a mapping, not ") + v.type_name());
      for (const auto& [k, val] : v.obj().entries) add(k, val);
    }
  }
}

Value Interpreter::call(const Node& n, const EnvPtr& env) {
  Args args;
  KwArgs kwargs;
  evaluate_arguments(n.args, env, &args, &kwargs);
  if (!kwargs.empty()) args.push_back(kwargs_value(std::move(kwargs)));
  Value fn = eval(*n.a, env);
  if (!fn.is(Kind::Function)) fail(std::string("Cannot call something that is not a function: got ") + fn.type_name());
  return fn.fn().call(args, env);
}

Value Interpreter::member(const Node& n, const EnvPtr& env) {
  Value object = eval(*n.a, env);
  Value prop;
  if (n.flag) {
    if (n.b->kind == NodeKind::Slice) return slice(object, *n.b, env);
    prop = eval(*n.b, env);
  } else if (n.b->kind == NodeKind::Integer) {
    prop = Value::integer(n.b->num);
  } else {
    prop = Value::string(n.b->str);
  }
  if (object.is_object_like()) {
    if (!prop.is(Kind::String)) fail(std::string("Cannot access property with non-string: got ") + prop.type_name());
    if (const Value* v = object.obj().find(prop.str())) return *v;
    return object.is(Kind::Object) ? builtin_member(object, prop.str()) : Value::undefined();
  }
  if (object.is(Kind::Array) || object.is(Kind::String)) {
    if (prop.is(Kind::Int)) {
      double i = std::trunc(prop.num());
      if (object.is(Kind::Array)) {
        const auto& items = object.arr().items;
        if (i < 0) i += static_cast<double>(items.size());
        if (i < 0 || i >= static_cast<double>(items.size())) return Value::undefined();
        return items[static_cast<size_t>(i)];
      }
      std::u16string units = to_utf16(object.str());
      if (i < 0) i += static_cast<double>(units.size());
      if (i < 0 || i >= static_cast<double>(units.size())) return Value::undefined();
      return Value::string(from_utf16(units.substr(static_cast<size_t>(i), 1)));
    }
    if (prop.is(Kind::String)) return builtin_member(object, prop.str());
    fail(std::string("Cannot access property with non-string/non-number: got ") + prop.type_name());
  }
  if (!prop.is(Kind::String)) fail(std::string("Cannot access property with non-string: got ") + prop.type_name());
  return builtin_member(object, prop.str());
}

Value Interpreter::slice(const Value& object, const Node& n, const EnvPtr& env) {
  if (!object.is(Kind::Array) && !object.is(Kind::String)) fail("Slice object must be an array or string");
  Value start = n.a ? eval(*n.a, env) : Value::undefined();
  Value stop = n.b ? eval(*n.b, env) : Value::undefined();
  Value step = n.c ? eval(*n.c, env) : Value::undefined();
  if (!start.is(Kind::Int) && !start.is(Kind::Undefined)) fail("Slice start must be numeric or undefined");
  if (!stop.is(Kind::Int) && !stop.is(Kind::Undefined)) fail("Slice stop must be numeric or undefined");
  if (!step.is(Kind::Int) && !step.is(Kind::Undefined)) fail("Slice step must be numeric or undefined");
  if (object.is(Kind::Array)) return Value::array(slice_vec(object.arr().items, start, stop, step));
  std::string out;
  for (char32_t cp : slice_vec(to_code_points(object.str()), start, stop, step)) append_utf8(out, cp);
  return Value::string(std::move(out));
}

Value Interpreter::set(const Node& n, const EnvPtr& env) {
  Value rhs = n.b ? eval_hole(*n.b, env) : Value::string(eval_block(n.body, env));
  if (rhs.is(Kind::Hole)) rhs = Value::undefined();  // stored JS undefined reads back as Undefined
  const Node& target = *n.a;
  if (target.kind == NodeKind::Identifier) {
    env->set(target.str, rhs);
  } else if (target.kind == NodeKind::Tuple) {
    if (!rhs.is(Kind::Array)) fail(std::string("Cannot unpack non-iterable type in set: ") + rhs.type_name());
    const auto& items = rhs.arr().items;
    if (items.size() != target.args.size())
      fail(std::string("Too ") + (target.args.size() > items.size() ? "few" : "many") + " items to unpack in set");
    for (size_t i = 0; i < items.size(); ++i) {
      if (target.args[i]->kind != NodeKind::Identifier)
        fail(std::string("Cannot unpack to non-identifier in set: ") + node_name(target.args[i]->kind));
      env->set(target.args[i]->str, items[i]);
    }
  } else if (target.kind == NodeKind::Member) {
    Value object = eval(*target.a, env);
    if (!object.is(Kind::Namespace)) fail("cannot assign attribute on non-namespace object");
    if (target.b->kind != NodeKind::Identifier || target.flag)
      fail("Cannot assign to member with non-identifier property");
    object.obj().set(target.b->str, rhs);
  } else {
    fail(std::string("Invalid LHS inside assignment expression: ") + node_name(target.kind));
  }
  return Value::null();
}

Value Interpreter::for_loop(const Node& n, const EnvPtr& env) {
  auto scope = std::make_shared<Env>(env);
  const Node* test = nullptr;
  Value iterable;
  if (n.b->kind == NodeKind::Select) {
    iterable = eval(*n.b->a, scope);
    test = n.b->b.get();
  } else {
    iterable = eval(*n.b, scope);
  }
  if (!iterable.is(Kind::Array) && !iterable.is(Kind::Object))
    fail(std::string("Expected iterable or object type in for loop: got ") + iterable.type_name());
  std::vector<Value> source;
  if (iterable.is(Kind::Object)) {
    for (const auto& [k, _] : iterable.obj().entries) source.push_back(Value::string(k));
  } else {
    source = iterable.arr().items;
  }

  const Node& target = *n.a;
  auto bind = [&](const EnvPtr& s, const Value& current) {
    if (target.kind == NodeKind::Identifier) {
      s->set(target.str, current);
      return;
    }
    const auto& items = current.arr().items;
    for (size_t j = 0; j < target.args.size(); ++j) {
      if (target.args[j]->kind != NodeKind::Identifier)
        fail(std::string("Cannot unpack non-identifier type: ") + node_name(target.args[j]->kind));
      s->set(target.args[j]->str, items[j]);
    }
  };
  std::vector<Value> items;
  for (const Value& current : source) {
    if (target.kind == NodeKind::Tuple) {
      // Only a plain ArrayValue unpacks (a TupleValue does not, in the reference).
      if (!current.is(Kind::Array) || current.is_tuple())
        fail(std::string("Cannot unpack non-iterable type: ") + current.type_name());
      size_t have = current.arr().items.size(), want = target.args.size();
      if (have != want) fail(std::string("Too ") + (want > have ? "few" : "many") + " items to unpack");
    }
    if (test) {
      auto loop_scope = std::make_shared<Env>(scope);
      bind(loop_scope, current);
      if (!truthy(eval(*test, loop_scope))) continue;
    }
    items.push_back(current);
  }

  std::string out;
  bool no_iteration = true;
  const double len = static_cast<double>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    double di = static_cast<double>(i);
    scope->set("loop", Value::object({
                           {"index", Value::integer(di + 1)},
                           {"index0", Value::integer(di)},
                           {"revindex", Value::integer(len - di)},
                           {"revindex0", Value::integer(len - di - 1)},
                           {"first", Value::boolean(i == 0)},
                           {"last", Value::boolean(i + 1 == items.size())},
                           {"length", Value::integer(len)},
                           {"previtem", i > 0 ? items[i - 1] : Value::undefined()},
                           {"nextitem", i + 1 < items.size() ? items[i + 1] : Value::undefined()},
                       }));
    bind(scope, items[i]);
    // An iteration's output is kept only if its body completes (the reference
    // drops the partial output of an iteration that hits break/continue).
    try {
      out += eval_block(n.body, scope);
    } catch (const ContinueSignal&) {
      continue;
    } catch (const BreakSignal&) {
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) out += eval_block(n.alt, scope);
  return Value::string(std::move(out));
}

void Interpreter::bind_macro_arguments(const std::string& display_name, const std::vector<NodePtr>& params,
                                       bool uses_kwargs, bool uses_varargs, const Args& args_in,
                                       const EnvPtr& scope) {
  Args positional = args_in;
  KwArgs kwargs = take_kwargs(positional);
  std::vector<const Node*> pending;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    Value v = Value::hole();
    if (i < positional.size()) v = positional[i];
    if (v.is(Kind::Hole)) {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        if (it->first == p.str) {
          v = it->second;
          kwargs.erase(it);
          break;
        }
      }
    }
    if (v.is(Kind::Hole) && p.kind == NodeKind::KwArg) pending.push_back(&p);
    scope->set(p.str, v.is(Kind::Hole) ? Value::undefined() : v);
  }
  if (uses_kwargs) {
    scope->set("kwargs", Value::object(kwargs));
  } else if (!kwargs.empty()) {
    fail("macro " + display_name + " takes no keyword argument '" + kwargs.front().first + "'");
  }
  if (uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = params.size(); i < positional.size(); ++i) rest.push_back(positional[i]);
    scope->set("varargs", Value::array(std::move(rest)));
  } else if (positional.size() > params.size()) {
    fail("macro " + display_name + " takes not more than " + std::to_string(params.size()) + " argument(s)");
  }
  for (const Node* p : pending) scope->set(p->str, eval(*p->a, scope));
}

Value Interpreter::macro(const Node& n, const EnvPtr& env) {
  auto special = accessed_special_args(n.args, n.body);
  bool uses_kwargs = special.count("kwargs") != 0, uses_varargs = special.count("varargs") != 0;
  const Node* node = &n;
  env->set(n.str, Value::function(n.str, [this, node, uses_kwargs, uses_varargs](Args& args, const EnvPtr& caller) {
             auto scope = std::make_shared<Env>(caller);
             bind_macro_arguments("'" + node->str + "'", node->args, uses_kwargs, uses_varargs, args, scope);
             return Value::string(eval_block(node->body, scope));
           }));
  return Value::null();
}

Value Interpreter::call_block(const Node& n, const EnvPtr& env) {
  auto special = accessed_special_args(n.args, n.body);
  bool uses_kwargs = special.count("kwargs") != 0, uses_varargs = special.count("varargs") != 0;
  const Node* node = &n;
  Value caller_fn = Value::function("caller", [this, node, env, uses_kwargs, uses_varargs](Args& args, const EnvPtr&) {
    auto scope = std::make_shared<Env>(env);
    bind_macro_arguments("None", node->args, uses_kwargs, uses_varargs, args, scope);
    return Value::string(eval_block(node->body, scope));
  });
  const Node& call_node = *n.a;
  Args args;
  KwArgs kwargs;
  evaluate_arguments(call_node.args, env, &args, &kwargs);
  args.push_back(kwargs_value(std::move(kwargs)));
  Value fn = eval(*call_node.a, env);
  if (!fn.is(Kind::Function)) fail(std::string("Cannot call something that is not a function: got ") + fn.type_name());
  auto call_env = std::make_shared<Env>(env);
  call_env->set("caller", caller_fn);
  return fn.fn().call(args, call_env);
}

}  // namespace deltafin::jinja
