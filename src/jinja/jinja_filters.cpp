// The | filters, per operand type exactly as the reference supports them: a filter
// the reference lacks for a type (e.g. `min`, `string` on a mapping, `map` without
// attribute=) fails with the reference's message rather than guessing.
#include <algorithm>
#include <cmath>

#include "jinja/jinja_interp.h"
#include "jinja/jinja_text.h"

namespace deltafin::jinja {

namespace {

// First of: positional args[i], keyword `name`, else `fallback`.
Value arg_or(const Args& args, size_t i, const KwArgs& kwargs, const char* name, Value fallback) {
  if (i < args.size()) return args[i];
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return fallback;
}

const Value* kwarg(const KwArgs& kwargs, const char* name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// Truthiness of the raw JS value (`!x.value`): containers are always truthy.
bool js_raw_truthy(const Value& v) {
  if (v.is(Kind::Array) || v.is_object_like() || v.is(Kind::Function)) return true;
  return truthy(v);
}

// Array.prototype.join over raw values: none/undefined join as "".
std::string js_join(const std::vector<Value>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if (!items[i].is(Kind::Null) && !items[i].is(Kind::Undefined)) out += js_raw_string(items[i]);
  }
  return out;
}

std::string indent_lines(const std::string& s, const std::string& indent, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    size_t nl = s.find('\n', start);
    std::string_view l(s.data() + start, (nl == std::string::npos ? s.size() : nl) - start);
    if (line) out += '\n';
    if (!((!first && line == 0) || (!blank && l.empty()))) out += indent;
    out += l;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

[[noreturn]] void fail_cannot_apply(const std::string& name, const Value& v) {
  fail("Cannot apply filter \"" + name + "\" to type: " + v.type_name());
}

}  // namespace

Value Interpreter::apply_filter(const Value& operand, const Node& f, const EnvPtr& env) {
  if (f.kind == NodeKind::Call) return apply_filter_call(operand, f, env);
  if (f.kind != NodeKind::Identifier) fail(std::string("Unknown filter: ") + node_name(f.kind));
  const std::string& name = f.str;
  if (name == "safe") return operand;
  if (name == "tojson") return Value::string(to_json(operand, JsonOptions{}));

  switch (operand.kind) {
    case Kind::Array: {
      const auto& items = operand.arr().items;
      if (name == "list") return operand;
      if (name == "first") return items.empty() ? Value::hole() : items.front();
      if (name == "last") return items.empty() ? Value::hole() : items.back();
      if (name == "length") return Value::integer(static_cast<double>(items.size()));
      if (name == "reverse") return Value::array(std::vector<Value>(items.rbegin(), items.rend()));
      if (name == "sort") return sort_array(operand, {}, {});
      if (name == "join") return Value::string(js_join(items, ""));
      if (name == "string") return Value::string(to_json(operand, JsonOptions{}, 0, false));
      if (name == "unique") {
        std::vector<Value> out;
        for (const auto& item : items) {
          bool seen = false;
          for (const auto& o : out) seen = seen || same_value_zero(o, item);
          if (!seen) out.push_back(item);
        }
        return Value::array(std::move(out));
      }
      fail("Unknown ArrayValue filter: " + name);
    }
    case Kind::String: {
      const std::string& s = operand.str();
      if (name == "length" || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        Value b = builtin_member(operand, name);
        if (b.is(Kind::Function)) {
          Args none;
          return b.fn().call(none, env);
        }
        return b;
      }
      if (name == "trim") return Value::string(js_trim(s));
      if (name == "indent") return Value::string(indent_lines(s, "    ", false, false));
      if (name == "join" || name == "string") return operand;
      if (name == "int") {
        double v = js_parse_int(s);
        return Value::integer(std::isnan(v) ? 0 : v);
      }
      if (name == "float") {
        double v = js_parse_float(s);
        return Value::floating(std::isnan(v) ? 0 : v);
      }
      fail("Unknown StringValue filter: " + name);
    }
    case Kind::Int:
    case Kind::Float: {
      double v = operand.num();
      if (name == "abs") return operand.is(Kind::Int) ? Value::integer(std::fabs(v)) : Value::floating(std::fabs(v));
      if (name == "int") return Value::integer(std::floor(v));
      if (name == "float") return Value::floating(v);
      if (name == "string") return Value::string(to_output_string(operand));
      fail("Unknown NumericValue filter: " + name);
    }
    case Kind::Object: {
      if (name == "length") return Value::integer(static_cast<double>(operand.obj().entries.size()));
      Value b = builtin_member(operand, name);  // items, keys, values, dictsort, get
      if (b.is(Kind::Undefined)) fail("Unknown ObjectValue filter: " + name);
      if (b.is(Kind::Function)) {
        Args none;
        return b.fn().call(none, env);
      }
      return b;
    }
    case Kind::Bool: {
      bool v = operand.b();
      if (name == "bool") return Value::boolean(v);
      if (name == "int") return Value::integer(v ? 1 : 0);
      if (name == "float") return Value::floating(v ? 1 : 0);
      if (name == "string") return Value::string(v ? "true" : "false");
      fail("Unknown BooleanValue filter: " + name);
    }
    default: fail_cannot_apply(name, operand);
  }
}

Value Interpreter::sort_array(const Value& operand, const Args& args, const KwArgs& kwargs) {
  Value reverse = arg_or(args, 0, kwargs, "reverse", Value::boolean(false));
  if (!reverse.is(Kind::Bool)) fail("reverse must be a boolean");
  Value case_sensitive = arg_or(args, 1, kwargs, "case_sensitive", Value::boolean(false));
  if (!case_sensitive.is(Kind::Bool)) fail("case_sensitive must be a boolean");
  Value attribute = arg_or(args, 2, kwargs, "attribute", Value::null());
  if (!attribute.is(Kind::String) && !attribute.is(Kind::Int) && !attribute.is(Kind::Null))
    fail("attribute must be a string, integer, or null");
  auto key = [&](const Value& item) {
    if (attribute.is(Kind::Null)) return item;
    return attribute_path(item, attribute.is(Kind::Int) ? js_number_to_string(attribute.num()) : attribute.str());
  };
  std::vector<Value> items = operand.arr().items;
  bool rev = reverse.b(), cs = case_sensitive.b();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int r = compare_values(key(a), key(b), cs);
    return (rev ? -r : r) < 0;
  });
  return Value::array(std::move(items));
}

Value Interpreter::apply_filter_call(const Value& operand, const Node& f, const EnvPtr& env) {
  if (f.a->kind != NodeKind::Identifier) fail(std::string("Unknown filter: ") + node_name(f.a->kind));
  const std::string& name = f.a->str;
  Args args;
  KwArgs kwargs;

  if (name == "tojson") {
    evaluate_arguments(f.args, env, &args, &kwargs);
    JsonOptions opt;
    Value indent = arg_or({}, 0, kwargs, "indent", Value::null());
    if (!indent.is(Kind::Int) && !indent.is(Kind::Null)) fail("If set, indent must be a number");
    Value ensure_ascii = arg_or({}, 0, kwargs, "ensure_ascii", Value::boolean(false));
    if (!ensure_ascii.is(Kind::Bool)) fail("If set, ensure_ascii must be a boolean");
    Value sort_keys = arg_or({}, 0, kwargs, "sort_keys", Value::boolean(false));
    if (!sort_keys.is(Kind::Bool)) fail("If set, sort_keys must be a boolean");
    Value separators = arg_or({}, 0, kwargs, "separators", Value::null());
    if (separators.is(Kind::Array)) {
      const auto& seps = separators.arr().items;
      if (seps.size() != 2 || !seps[0].is(Kind::String) || !seps[1].is(Kind::String))
        fail("separators must be a tuple of two strings");
      opt.has_separators = true;
      opt.item_sep = seps[0].str();
      opt.key_sep = seps[1].str();
    } else if (!separators.is(Kind::Null)) {
      fail("If set, separators must be a tuple of two strings");
    }
    if (indent.is(Kind::Int)) {
      if (std::fabs(indent.num()) > 1e6) fail("tojson indent too large");
      opt.indent = static_cast<int>(indent.num());
    }
    opt.ensure_ascii = ensure_ascii.b();
    opt.sort_keys = sort_keys.b();
    return Value::string(to_json(operand, opt));
  }
  if (name == "join") {
    std::vector<Value> items;
    if (operand.is(Kind::String)) {
      for (char32_t cp : to_code_points(operand.str())) {
        std::string c;
        append_utf8(c, cp);
        items.push_back(Value::string(std::move(c)));
      }
    } else if (operand.is(Kind::Array)) {
      items = operand.arr().items;
    } else {
      fail_cannot_apply(name, operand);
    }
    evaluate_arguments(f.args, env, &args, &kwargs);
    Value sep = arg_or(args, 0, kwargs, "separator", Value::string(""));
    if (!sep.is(Kind::String)) fail("separator must be a string");
    return Value::string(js_join(items, sep.str()));
  }
  if (name == "int" || name == "float") {
    bool is_int = name == "int";
    evaluate_arguments(f.args, env, &args, &kwargs);
    Value def = arg_or(args, 0, kwargs, "default", is_int ? Value::integer(0) : Value::floating(0));
    if (operand.is(Kind::String)) {
      double v = is_int ? js_parse_int(operand.str()) : js_parse_float(operand.str());
      if (std::isnan(v)) return def;
      return is_int ? Value::integer(v) : Value::floating(v);
    }
    if (operand.is_number()) return operand;
    if (operand.is(Kind::Bool)) return is_int ? Value::integer(operand.b() ? 1 : 0) : Value::floating(operand.b() ? 1 : 0);
    fail_cannot_apply(name, operand);
  }
  if (name == "default") {
    evaluate_arguments(f.args, env, &args, &kwargs);
    Value def = args.empty() ? Value::string("") : args[0];
    Value boolean = arg_or(args, 1, kwargs, "boolean", Value::boolean(false));
    if (!boolean.is(Kind::Bool)) fail("`default` filter flag must be a boolean");
    if (operand.is(Kind::Undefined) || (boolean.b() && !truthy(operand))) return def;
    return operand;
  }

  if (operand.is(Kind::Array)) {
    const auto& items = operand.arr().items;
    if (name == "sort") {
      evaluate_arguments(f.args, env, &args, &kwargs);
      return sort_array(operand, args, kwargs);
    }
    if (name == "selectattr" || name == "rejectattr") {
      bool select = name == "selectattr";
      for (const auto& item : items)
        if (!item.is_object_like()) fail("`" + name + "` can only be applied to array of objects");
      for (const auto& a : f.args)
        if (a->kind != NodeKind::Text) fail("arguments of `" + name + "` must be strings");
      for (const auto& a : f.args) args.push_back(eval(*a, env));
      if (args.empty()) fail("`" + name + "` needs an attribute name");
      const std::string attr = args[0].str();
      std::string test = args.size() > 1 ? args[1].str() : "";
      if (args.size() > 1 && !has_test(test)) fail("Unknown test: " + test);
      const Value* test_arg = args.size() > 2 ? &args[2] : nullptr;
      std::vector<Value> out;
      for (const auto& item : items) {
        const Value* a = item.obj().find(attr);
        bool r = false;
        if (a) r = args.size() > 1 ? run_test(test, *a, test_arg) : truthy(*a);
        if (select ? r : !r) out.push_back(item);
      }
      return Value::array(std::move(out));
    }
    if (name == "map") {
      evaluate_arguments(f.args, env, &args, &kwargs);
      const Value* attr = kwarg(kwargs, "attribute");
      if (!attr) fail("`map` expressions without `attribute` set are not currently supported.");
      if (!attr->is(Kind::String)) fail("attribute must be a string");
      const Value* def = kwarg(kwargs, "default");
      std::vector<Value> out;
      for (const auto& item : items) {
        if (!item.is_object_like()) fail("items in map must be an object");
        Value v = attribute_path(item, attr->str());
        out.push_back(v.is(Kind::Undefined) && def ? *def : v);
      }
      return Value::array(std::move(out));
    }
    fail("Unknown ArrayValue filter: " + name);
  }
  if (operand.is(Kind::String)) {
    if (name == "indent") {
      evaluate_arguments(f.args, env, &args, &kwargs);
      Value width = arg_or(args, 0, kwargs, "width", Value::integer(4));
      if (!width.is(Kind::Int)) fail("width must be a number");
      Value first = arg_or(args, 1, kwargs, "first", Value::boolean(false));
      Value blank = arg_or(args, 2, kwargs, "blank", Value::boolean(false));
      if (width.num() < 0) fail("Invalid count value: " + js_number_to_string(width.num()));
      if (width.num() > 1e6) fail("indent width too large");
      std::string indent(static_cast<size_t>(width.num()), ' ');
      return Value::string(indent_lines(operand.str(), indent, js_raw_truthy(first), js_raw_truthy(blank)));
    }
    if (name == "replace") {
      evaluate_arguments(f.args, env, &args, &kwargs);
      args.push_back(kwargs_value(std::move(kwargs)));
      return builtin_member(operand, "replace").fn().call(args, env);
    }
    fail("Unknown StringValue filter: " + name);
  }
  if (operand.is(Kind::Object)) {
    Value b = builtin_member(operand, name);
    if (b.is(Kind::Function)) {
      evaluate_arguments(f.args, env, &args, &kwargs);
      if (!kwargs.empty()) args.push_back(kwargs_value(std::move(kwargs)));
      return b.fn().call(args, env);
    }
    fail("Unknown ObjectValue filter: " + name);
  }
  fail_cannot_apply(name, operand);
}

}  // namespace deltafin::jinja
