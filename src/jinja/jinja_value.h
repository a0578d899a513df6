// Runtime values of the Jinja engine. They model the reference renderer
// (@huggingface/jinja) value by value, since chat templates must render byte-exactly
// as it does: numbers are doubles tagged integer or float, arrays/objects/namespaces
// have reference identity (== between two objects is identity, as in JS), objects
// keep insertion order, and strings are UTF-8.
//
// Thread safety: values are not synchronized; one render uses them from one thread.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace deltafin::jinja {

// An evaluation or syntax error. `line` is the 1-based template line (0 until the
// innermost node that saw the error fills it in).
struct JinjaError {
  std::string message;
  int line = 0;
};
[[noreturn]] void fail(std::string message);

enum class Kind : uint8_t {
  Undefined,  // a missing variable/attribute (UndefinedValue)
  Null,       // none (NullValue)
  Bool,
  Int,        // a double holding an integer value (IntegerValue)
  Float,
  String,
  Array,      // ArrayValue, or TupleValue when ArrayData::tuple
  Object,     // ObjectValue, or KeywordArgumentsValue when ObjectData::kwargs
  Namespace,  // namespace(): attribute assignment allowed, no mapping builtins
  Function,
  Hole,       // a JS `undefined` leaking out of a filter (e.g. [] | first): only a
              // `set` may store it (it then reads back as Undefined); any other use fails
};

struct Value;
class Env;
using EnvPtr = std::shared_ptr<Env>;
using Args = std::vector<Value>;

struct ArrayData {
  std::vector<Value> items;
  bool tuple = false;
};

// Insertion-ordered map; assigning an existing key keeps its position (JS Map).
struct ObjectData {
  std::vector<std::pair<std::string, Value>> entries;
  bool kwargs = false;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
  bool erase(std::string_view key);
};

// A callable. `caller` is the environment of the call site: macros in the
// reference are dynamically scoped (their body scope's parent is the caller's).
struct FunctionData {
  std::string name;
  std::function<Value(Args& args, const EnvPtr& caller)> call;
};

struct Value {
  Kind kind = Kind::Undefined;
  std::variant<std::monostate, bool, double, std::shared_ptr<const std::string>, std::shared_ptr<ArrayData>,
               std::shared_ptr<ObjectData>, std::shared_ptr<FunctionData>>
      data;

  static Value undefined() { return {}; }
  static Value null() { return Value{Kind::Null, {}}; }
  static Value hole() { return Value{Kind::Hole, {}}; }
  static Value boolean(bool b) { return Value{Kind::Bool, b}; }
  static Value integer(double v) { return Value{Kind::Int, v}; }
  static Value floating(double v) { return Value{Kind::Float, v}; }
  static Value string(std::string s) { return Value{Kind::String, std::make_shared<const std::string>(std::move(s))}; }
  static Value array(std::vector<Value> items, bool tuple = false);
  static Value object(std::shared_ptr<ObjectData> o) { return Value{Kind::Object, std::move(o)}; }
  static Value object(std::vector<std::pair<std::string, Value>> entries, bool kwargs = false);
  static Value ns(std::vector<std::pair<std::string, Value>> entries);
  static Value function(std::string name, std::function<Value(Args&, const EnvPtr&)> fn);

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_numeric_like() const { return is_number() || kind == Kind::Bool; }
  bool is_object_like() const { return kind == Kind::Object || kind == Kind::Namespace; }  // attribute containers
  bool is_kwargs() const { return kind == Kind::Object && obj().kwargs; }
  bool is_tuple() const { return kind == Kind::Array && arr().tuple; }

  bool b() const { return std::get<bool>(data); }
  double num() const { return std::get<double>(data); }
  // Number value of a numeric-like (bool as 0/1).
  double as_number() const { return kind == Kind::Bool ? (b() ? 1 : 0) : num(); }
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(data); }
  ArrayData& arr() const { return *std::get<std::shared_ptr<ArrayData>>(data); }
  ObjectData& obj() const { return *std::get<std::shared_ptr<ObjectData>>(data); }
  FunctionData& fn() const { return *std::get<std::shared_ptr<FunctionData>>(data); }
  const void* identity() const;  // the heap object of containers/functions, else null

  // The reference's type name (IntegerValue, TupleValue, ...), used in messages.
  const char* type_name() const;
};

// Python-like truthiness as the reference computes it (__bool__): empty
// arrays/objects are false, namespaces and functions are always true.
bool truthy(const Value& v);

// RuntimeValue.toString(): how {{ v }} prints (none and undefined print nothing
// there; this returns "undefined" for them, as inside a list joined by ~). Floats
// with an integer value print with ".0"; arrays/objects print as JSON with
// undefined kept as "undefined".
std::string to_output_string(const Value& v);
// String(v.value): the raw JS value's string (used by ~, + and join): floats
// print without ".0", objects "[object Map]". (The reference's none holds a JS
// undefined, so none prints "undefined" here and equals undefined everywhere.)
std::string js_raw_string(const Value& v);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
};
// The reference's toJSON (the tojson filter): Python json.dumps-like separators,
// JS number formatting, keys in insertion order.
std::string to_json(const Value& v, const JsonOptions& opt, int depth = 0, bool undefined_to_null = true);

// JS `a.value == b.value` (loose equality; containers compare by identity).
bool loose_equals(const Value& a, const Value& b);
// JS `a.value === b.value`.
bool strict_equals(const Value& a, const Value& b);
// SameValueZero on raw values (Set membership, used by |unique).
bool same_value_zero(const Value& a, const Value& b);

// Converts render input, as JSON.parse would hand it to the reference: numbers
// with an integer value become integers, object keys that are array indices come
// first in ascending order (JS property order), the rest in insertion order.
Value from_json(const nlohmann::ordered_json& j);

// A scope. Lookups walk the parent chain; assignment always writes the own scope.
class Env {
 public:
  explicit Env(EnvPtr parent = nullptr) : parent_(std::move(parent)) {}
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  bool has_own(const std::string& name) const { return vars_.count(name) != 0; }

 private:
  std::unordered_map<std::string, Value> vars_;
  EnvPtr parent_;
};

}  // namespace deltafin::jinja
