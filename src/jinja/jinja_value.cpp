#include "jinja/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/jinja_text.h"

namespace deltafin::jinja {

void fail(std::string message) { throw JinjaError{std::move(message), 0}; }

const Value* ObjectData::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void ObjectData::set(const std::string& key, Value v) {
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(key, std::move(v));
}

bool ObjectData::erase(std::string_view key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == key) {
      entries.erase(it);
      return true;
    }
  }
  return false;
}

Value Value::array(std::vector<Value> items, bool tuple) {
  auto a = std::make_shared<ArrayData>();
  a->items = std::move(items);
  a->tuple = tuple;
  return Value{Kind::Array, std::move(a)};
}

Value Value::object(std::vector<std::pair<std::string, Value>> entries, bool kwargs) {
  auto o = std::make_shared<ObjectData>();
  o->entries = std::move(entries);
  o->kwargs = kwargs;
  return Value{Kind::Object, std::move(o)};
}

Value Value::ns(std::vector<std::pair<std::string, Value>> entries) {
  auto o = std::make_shared<ObjectData>();
  o->entries = std::move(entries);
  return Value{Kind::Namespace, std::move(o)};
}

Value Value::function(std::string name, std::function<Value(Args&, const EnvPtr&)> fn) {
  auto f = std::make_shared<FunctionData>();
  f->name = std::move(name);
  f->call = std::move(fn);
  return Value{Kind::Function, std::move(f)};
}

const void* Value::identity() const {
  switch (kind) {
    case Kind::Array: return &arr();
    case Kind::Object:
    case Kind::Namespace: return &obj();
    case Kind::Function: return &fn();
    default: return nullptr;
  }
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "UndefinedValue";
    case Kind::Null: return "NullValue";
    case Kind::Bool: return "BooleanValue";
    case Kind::Int: return "IntegerValue";
    case Kind::Float: return "FloatValue";
    case Kind::String: return "StringValue";
    case Kind::Array: return arr().tuple ? "TupleValue" : "ArrayValue";
    case Kind::Object: return obj().kwargs ? "KeywordArgumentsValue" : "ObjectValue";
    case Kind::Namespace: return "NamespaceValue";
    case Kind::Function: return "FunctionValue";
    case Kind::Hole: return "undefined";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null:
    case Kind::Hole: return false;
    case Kind::Bool: return v.b();
    case Kind::Int:
    case Kind::Float: return v.num() != 0 && !std::isnan(v.num());
    case Kind::String: return !v.str().empty();
    case Kind::Array: return !v.arr().items.empty();
    case Kind::Object: return !v.obj().entries.empty();
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

namespace {

std::string float_to_string(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::floor(d) == d) {
    if (std::fabs(d) >= 1e21) return js_number_to_string(d);  // toFixed falls back to String()
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.1f", d);
    return buf;
  }
  return js_number_to_string(d);
}

[[noreturn]] void fail_function_string() {
  fail("cannot convert a function to a string (the reference would print its JavaScript source)");
}

}  // namespace

std::string to_output_string(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Hole:
    case Kind::Null: return "undefined";  // the reference's NullValue holds JS undefined
    case Kind::Bool: return v.b() ? "true" : "false";
    case Kind::Int: return js_number_to_string(v.num());
    case Kind::Float: return float_to_string(v.num());
    case Kind::String: return v.str();
    case Kind::Array:
    case Kind::Object:
    case Kind::Namespace: return to_json(v, JsonOptions{}, 0, false);
    case Kind::Function: fail_function_string();
  }
  return "";
}

std::string js_raw_string(const Value& v) {
  switch (v.kind) {
    case Kind::Float: return js_number_to_string(v.num());
    case Kind::Array: {
      std::string out;
      bool first = true;
      for (const auto& item : v.arr().items) {
        if (!first) out += ',';
        first = false;
        if (!item.is(Kind::Hole)) out += to_output_string(item);
      }
      return out;
    }
    case Kind::Object:
    case Kind::Namespace: return "[object Map]";
    default: return to_output_string(v);
  }
}

namespace {

// Primary collation weight of a printable ASCII character in ICU's root collation
// (what String.prototype.localeCompare uses): spaces and punctuation, then symbols,
// then digits, then letters case-insensitively.
int primary_weight(char c) {
  static const std::string kOrder = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz";
  if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return static_cast<int>(kOrder.find(c));
}

int locale_compare(const std::string& a, const std::string& b) {
  for (const std::string* s : {&a, &b})
    for (char c : *s)
      if (c < 0x20 || c > 0x7E)
        fail("tojson(sort_keys=true) supports printable ASCII keys only (the reference sorts with localeCompare)");
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    int wa = primary_weight(a[i]), wb = primary_weight(b[i]);
    if (wa != wb) return wa < wb ? -1 : 1;
  }
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = 0; i < n; ++i) {  // tertiary: lowercase sorts first
    bool ua = a[i] >= 'A' && a[i] <= 'Z', ub = b[i] >= 'A' && b[i] <= 'Z';
    if (ua != ub) return ua ? 1 : -1;
  }
  return 0;
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opt, int depth, bool undefined_to_null) {
  std::string item_sep = ", ", key_sep = ": ";
  if (opt.has_separators) {
    item_sep = opt.item_sep;
    key_sep = opt.key_sep;
  } else if (opt.indent) {
    item_sep = ",";
  }
  switch (v.kind) {
    case Kind::Null: return "null";
    case Kind::Undefined: return undefined_to_null ? "null" : "undefined";
    case Kind::Bool: return v.b() ? "true" : "false";
    case Kind::Int:
    case Kind::Float: return std::isfinite(v.num()) ? js_number_to_string(v.num()) : "null";
    case Kind::String: {
      std::string out;
      json_quote(out, v.str());
      return opt.ensure_ascii ? json_ascii_escape(out) : out;
    }
    case Kind::Array:
    case Kind::Object:
    case Kind::Namespace: {
      if (v.is_tuple() || v.is_kwargs()) break;
      if (depth > 1000) fail("value nested too deeply to print (a namespace containing itself?)");
      if (opt.indent < 0) fail("Invalid count value: " + std::to_string(opt.indent));
      std::string indent_unit(static_cast<size_t>(opt.indent), ' ');
      std::string base = "\n";
      for (int i = 0; i < depth; ++i) base += indent_unit;
      std::string child = base + indent_unit;
      std::string out;
      if (v.is(Kind::Array)) {
        const auto& items = v.arr().items;
        bool pretty = opt.indent && !items.empty();
        out += '[';
        if (pretty) out += child;
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += pretty ? item_sep + child : item_sep;
          out += to_json(items[i], opt, depth + 1, undefined_to_null);
        }
        if (pretty) out += base;
        out += ']';
        return out;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.obj().entries) entries.push_back(&e);
      if (opt.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* x, const auto* y) { return locale_compare(x->first, y->first) < 0; });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (opt.indent) out += child;
        std::string key;
        json_quote(key, entries[i]->first);
        out += opt.ensure_ascii ? json_ascii_escape(key) : key;
        out += key_sep;
        out += to_json(entries[i]->second, opt, depth + 1, undefined_to_null);
      }
      if (opt.indent && !entries.empty()) out += base;
      out += '}';
      return out;
    }
    default: break;
  }
  fail(std::string("Cannot convert to JSON: ") + v.type_name());
}

namespace {

// A JS primitive, or an object reference, for the abstract equality algorithm.
struct Prim {
  enum T { Undef, Null, Bool, Num, Str, Obj } t;
  double n = 0;
  bool b = false;
  std::string s;
  const Value* obj = nullptr;

  static Prim of(T t) { return Prim{t, 0, false, {}, nullptr}; }
  static Prim number(double n) { return Prim{Num, n, false, {}, nullptr}; }
  static Prim boolean(bool b) { return Prim{Bool, 0, b, {}, nullptr}; }
  static Prim string(std::string s) { return Prim{Str, 0, false, std::move(s), nullptr}; }
  static Prim object(const Value* v) { return Prim{Obj, 0, false, {}, v}; }
};

Prim raw(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Hole:
    case Kind::Null: return Prim::of(Prim::Undef);  // NullValue.value is undefined in the reference
    case Kind::Bool: return Prim::boolean(v.b());
    case Kind::Int:
    case Kind::Float: return Prim::number(v.num());
    case Kind::String: return Prim::string(v.str());
    default: return Prim::object(&v);
  }
}

bool loose(const Prim& x, const Prim& y) {
  if (x.t == y.t) {
    switch (x.t) {
      case Prim::Undef:
      case Prim::Null: return true;
      case Prim::Bool: return x.b == y.b;
      case Prim::Num: return x.n == y.n;
      case Prim::Str: return x.s == y.s;
      case Prim::Obj: return x.obj->identity() == y.obj->identity();
    }
  }
  auto nullish = [](const Prim& p) { return p.t == Prim::Undef || p.t == Prim::Null; };
  if (nullish(x) || nullish(y)) return nullish(x) && nullish(y);
  if (x.t == Prim::Num && y.t == Prim::Str) return x.n == js_string_to_number(y.s);
  if (x.t == Prim::Str && y.t == Prim::Num) return js_string_to_number(x.s) == y.n;
  if (x.t == Prim::Bool) return loose(Prim::number(x.b ? 1 : 0), y);
  if (y.t == Prim::Bool) return loose(x, Prim::number(y.b ? 1 : 0));
  if (x.t == Prim::Obj) return loose(Prim::string(js_raw_string(*x.obj)), y);
  if (y.t == Prim::Obj) return loose(x, Prim::string(js_raw_string(*y.obj)));
  return false;
}

}  // namespace

bool loose_equals(const Value& a, const Value& b) { return loose(raw(a), raw(b)); }

bool strict_equals(const Value& a, const Value& b) {
  Prim x = raw(a), y = raw(b);
  if (x.t != y.t) return false;
  return loose(x, y);
}

bool same_value_zero(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number() && std::isnan(a.num()) && std::isnan(b.num())) return true;
  return strict_equals(a, b);
}

namespace {

// A canonical array index ("0", "17", < 2^32 - 1): JS orders these keys first.
bool is_array_index(const std::string& k, double* out) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  double v = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v >= 4294967295.0) return false;
  *out = v;
  return true;
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  using nlohmann::ordered_json;
  switch (j.type()) {
    case ordered_json::value_t::null:
    case ordered_json::value_t::discarded: return Value::null();
    case ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case ordered_json::value_t::number_integer: return Value::integer(static_cast<double>(j.get<int64_t>()));
    case ordered_json::value_t::number_unsigned: return Value::integer(static_cast<double>(j.get<uint64_t>()));
    case ordered_json::value_t::number_float: {
      double d = j.get<double>();
      return (std::isfinite(d) && std::floor(d) == d) ? Value::integer(d) : Value::floating(d);
    }
    case ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::array(std::move(items));
    }
    case ordered_json::value_t::object: {
      std::vector<std::pair<double, std::string>> index_keys;
      std::vector<std::pair<std::string, Value>> entries;
      for (const auto& [k, v] : j.items()) {
        double idx;
        if (is_array_index(k, &idx)) index_keys.emplace_back(idx, k);
      }
      std::sort(index_keys.begin(), index_keys.end());
      for (const auto& [idx, k] : index_keys) entries.emplace_back(k, from_json(j.at(k)));
      for (const auto& [k, v] : j.items()) {
        double idx;
        if (!is_array_index(k, &idx)) entries.emplace_back(k, from_json(v));
      }
      return Value::object(std::move(entries));
    }
    case ordered_json::value_t::binary: fail("binary JSON values are not supported in a template context");
  }
  return Value::undefined();
}

Value Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent_.get()) {
    auto it = e->vars_.find(name);
    if (it != e->vars_.end()) return it->second;
  }
  return Value::undefined();
}

}  // namespace deltafin::jinja
