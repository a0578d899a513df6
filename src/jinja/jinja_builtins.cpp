// Tests (`is ...`), methods of strings and mappings, and the globals of a render,
// with the reference's behaviour: e.g. str.strip() ignores its argument (JS trim),
// title() only uppercases word starts. Beyond the reference, which has no list
// methods and fails on them, lists have Python's append() and pop(): Kimi K2's
// templates call them (Python jinja2, which transformers renders with, has them).
#include <algorithm>
#include <cmath>

#include "jinja/jinja_interp.h"
#include "jinja/jinja_text.h"

namespace deltafin::jinja {

namespace {

Value method(const std::string& name, std::function<Value(Args&)> fn) {
  return Value::function(name, [fn = std::move(fn)](Args& args, const EnvPtr&) { return fn(args); });
}

bool is_word_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// s.replace(/\b\w/g, upper): uppercases ASCII word characters that start a word.
std::string title_case(const std::string& s) {
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i)
    if (is_word_byte(out[i]) && (i == 0 || !is_word_byte(s[i - 1])) && out[i] >= 'a' && out[i] <= 'z')
      out[i] = static_cast<char>(out[i] - 32);
  return out;
}

std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  size_t len;
  char32_t cp = decode_utf8(s, 0, &len);
  if (cp >= 0x10000) return s;  // charAt(0) is half a surrogate pair: unchanged
  return js_to_upper(s.substr(0, len)) + s.substr(len);
}

// utils.ts replace(): Python str.replace semantics over JS strings.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, double count) {
  if (count == 0) return s;
  double remaining = (std::isnan(count) || count < 0) ? INFINITY : count;
  std::string out;
  if (from.empty()) {  // inserts at every code point boundary
    for (size_t i = 0;;) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (i >= s.size()) break;
      size_t len;
      decode_utf8(s, i, &len);
      out.append(s, i, len);
      i += len;
    }
    return out;
  }
  size_t pos = 0;
  while (remaining > 0) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    --remaining;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Value split(const std::string& s, Args& args) {
  Value sep = args.size() > 0 ? args[0] : Value::null();
  if (!sep.is(Kind::String) && !sep.is(Kind::Null)) fail("sep argument must be a string or null");
  Value maxsplit_v = args.size() > 1 ? args[1] : Value::integer(-1);
  if (!maxsplit_v.is(Kind::Int)) fail("maxsplit argument must be a number");
  double maxsplit = maxsplit_v.num();
  std::vector<std::string> parts;
  if (sep.is(Kind::Null)) {
    std::string text = js_trim_start(s);
    size_t i = 0;
    while (i < text.size()) {
      while (size_t n = js_space_len(text, i)) i += n;
      if (i >= text.size()) break;
      size_t start = i;
      while (i < text.size() && !js_space_len(text, i)) {
        size_t len;
        decode_utf8(text, i, &len);
        i += len;
      }
      if (maxsplit != -1 && static_cast<double>(parts.size()) >= maxsplit) {
        parts.push_back(text.substr(start));
        break;
      }
      parts.push_back(text.substr(start, i - start));
    }
  } else {
    const std::string& d = sep.str();
    if (d.empty()) fail("empty separator");
    for (size_t pos = 0;;) {
      size_t hit = s.find(d, pos);
      parts.push_back(s.substr(pos, hit == std::string::npos ? std::string::npos : hit - pos));
      if (hit == std::string::npos) break;
      pos = hit + d.size();
    }
    double n = static_cast<double>(parts.size());
    if (maxsplit != -1 && n > maxsplit) {
      // result.push(result.splice(maxsplit).join(sep))
      double k = maxsplit < 0 ? std::max(n + maxsplit, 0.0) : maxsplit;
      auto at = static_cast<size_t>(k);
      std::string rest;
      for (size_t i = at; i < parts.size(); ++i) rest += (i > at ? d : "") + parts[i];
      parts.resize(at);
      parts.push_back(rest);
    }
  }
  std::vector<Value> out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::array(std::move(out));
}

Value affix_test(const std::string& s, Args& args, bool prefix) {
  const char* fname = prefix ? "startswith" : "endswith";
  auto has = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (args.empty()) fail(std::string(fname) + "() requires at least one argument");
  const Value& pattern = args[0];
  if (pattern.is(Kind::String)) return Value::boolean(has(pattern.str()));
  if (pattern.is(Kind::Array)) {
    for (const auto& item : pattern.arr().items) {
      if (!item.is(Kind::String)) fail(std::string(fname) + "() tuple elements must be strings");
      if (has(item.str())) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  fail(std::string(fname) + "() argument must be a string or tuple of strings");
}

Value string_member(const Value& self, const std::string& name) {
  const std::string& s = self.str();
  if (name == "length") return Value::integer(static_cast<double>(utf16_length(s)));
  if (name == "upper") return method(name, [self](Args&) { return Value::string(js_to_upper(self.str())); });
  if (name == "lower") return method(name, [self](Args&) { return Value::string(js_to_lower(self.str())); });
  if (name == "strip") return method(name, [self](Args&) { return Value::string(js_trim(self.str())); });
  if (name == "lstrip") return method(name, [self](Args&) { return Value::string(js_trim_start(self.str())); });
  if (name == "rstrip") return method(name, [self](Args&) { return Value::string(js_trim_end(self.str())); });
  if (name == "title") return method(name, [self](Args&) { return Value::string(title_case(self.str())); });
  if (name == "capitalize") return method(name, [self](Args&) { return Value::string(capitalize(self.str())); });
  if (name == "startswith") return method(name, [self](Args& a) { return affix_test(self.str(), a, true); });
  if (name == "endswith") return method(name, [self](Args& a) { return affix_test(self.str(), a, false); });
  if (name == "split") return method(name, [self](Args& a) { return split(self.str(), a); });
  if (name == "replace") {
    return method(name, [self](Args& args) {
      if (args.size() < 2) fail("replace() requires at least two arguments");
      if (!args[0].is(Kind::String) || !args[1].is(Kind::String)) fail("replace() arguments must be strings");
      Value count = Value::null();
      if (args.size() > 2) {
        if (args[2].is_kwargs()) {
          const Value* c = args[2].obj().find("count");
          if (c) count = *c;
        } else {
          count = args[2];
        }
      }
      if (!count.is(Kind::Int) && !count.is(Kind::Null)) fail("replace() count argument must be a number or null");
      double n = count.is(Kind::Null) ? NAN : count.num();
      return Value::string(replace_all(self.str(), args[0].str(), args[1].str(), n));
    });
  }
  return Value::undefined();
}

Value items_of(const ObjectData& o) {
  std::vector<Value> out;
  for (const auto& [k, v] : o.entries) out.push_back(Value::array({Value::string(k), v}));
  return Value::array(std::move(out));
}

Value dictsort(const Value& self, Args& args) {
  KwArgs kwargs;
  Args positional;
  for (auto& a : args) {
    if (a.is_kwargs()) kwargs = a.obj().entries;
    else positional.push_back(a);
  }
  auto pick = [&](size_t i, const char* name, Value fallback) {
    if (i < positional.size()) return positional[i];
    for (const auto& [k, v] : kwargs)
      if (k == name) return v;
    return fallback;
  };
  Value cs = pick(0, "case_sensitive", Value::boolean(false));
  if (!cs.is(Kind::Bool)) fail("case_sensitive must be a boolean");
  Value by = pick(1, "by", Value::string("key"));
  if (!by.is(Kind::String)) fail("by must be a string");
  if (by.str() != "key" && by.str() != "value") fail("by must be either 'key' or 'value'");
  Value reverse = pick(2, "reverse", Value::boolean(false));
  if (!reverse.is(Kind::Bool)) fail("reverse must be a boolean");
  std::vector<Value> items = items_of(self.obj()).arr().items;
  size_t index = by.str() == "key" ? 0 : 1;
  bool rev = reverse.b(), case_sensitive = cs.b();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int r = compare_values(a.arr().items[index], b.arr().items[index], case_sensitive);
    return (rev ? -r : r) < 0;
  });
  return Value::array(std::move(items));
}

Value object_member(const Value& self, const std::string& name) {
  if (name == "get") {
    return method(name, [self](Args& args) {
      if (args.empty()) fail("Object key must be a string: got undefined");
      if (!args[0].is(Kind::String)) fail(std::string("Object key must be a string: got ") + args[0].type_name());
      if (const Value* v = self.obj().find(args[0].str())) return *v;
      return args.size() > 1 ? args[1] : Value::null();
    });
  }
  if (name == "items") return method(name, [self](Args&) { return items_of(self.obj()); });
  if (name == "keys") {
    return method(name, [self](Args&) {
      std::vector<Value> out;
      for (const auto& [k, _] : self.obj().entries) out.push_back(Value::string(k));
      return Value::array(std::move(out));
    });
  }
  if (name == "values") {
    return method(name, [self](Args&) {
      std::vector<Value> out;
      for (const auto& [_, v] : self.obj().entries) out.push_back(v);
      return Value::array(std::move(out));
    });
  }
  if (name == "dictsort") return method(name, [self](Args& args) { return dictsort(self, args); });
  return Value::undefined();
}

const char* const kMonthShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
const char* const kMonthLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};

// utils.ts strftime: only %Y %m %d %b %B %H %M %% are replaced; others stay as written.
std::string strftime_js(const std::tm& t, const std::string& format) {
  auto pad2 = [](int n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    char c = format[i + 1];
    switch (c) {
      case 'Y': out += std::to_string(t.tm_year + 1900); break;
      case 'm': out += pad2(t.tm_mon + 1); break;
      case 'd': out += pad2(t.tm_mday); break;
      case 'b': out += kMonthShort[t.tm_mon]; break;
      case 'B': out += kMonthLong[t.tm_mon]; break;
      case 'H': out += pad2(t.tm_hour); break;
      case 'M': out += pad2(t.tm_min); break;
      case '%': out += '%'; break;
      default: out += '%'; continue;
    }
    ++i;
  }
  return out;
}

Value make_namespace(Args& args) {
  Args positional = args;
  KwArgs kwargs = take_kwargs(positional);
  if (positional.size() > 1)
    fail("namespace expected at most 1 argument, got " + std::to_string(positional.size()));
  auto ns = Value::ns({});
  ObjectData& entries = ns.obj();
  if (positional.size() == 1) {
    const Value& source = positional[0];
    if (source.is(Kind::Object)) {
      for (const auto& [k, v] : source.obj().entries) entries.set(k, v);
    } else if (source.is(Kind::Array)) {
      for (const auto& pair : source.arr().items) {
        std::vector<Value> kv;
        if (pair.is(Kind::Array)) {
          kv = pair.arr().items;
        } else if (pair.is(Kind::String)) {
          for (char32_t cp : to_code_points(pair.str())) {
            std::string c;
            append_utf8(c, cp);
            kv.push_back(Value::string(std::move(c)));
          }
        }
        if (kv.size() != 2) fail("namespace expected an object or an iterable of [key, value] pairs");
        if (!kv[0].is(Kind::String)) fail("namespace keys must be strings");
        entries.set(kv[0].str(), kv[1]);
      }
    } else {
      fail(std::string("'") + source.type_name() + "' object is not iterable");
    }
  }
  for (const auto& [k, v] : kwargs) entries.set(k, v);
  return ns;
}

// range() receives raw JS values; numbers (and booleans, as 0/1) are supported.
Value range(Args& args) {
  std::vector<double> n;
  for (const auto& a : args) {
    if (a.is(Kind::Undefined) || a.is(Kind::Null)) {
      n.push_back(NAN);  // treated as "not passed" below, like JS undefined (none holds undefined)
      continue;
    }
    if (!a.is_numeric_like()) fail(std::string("range() arguments must be numbers, got ") + a.type_name());
    n.push_back(a.as_number());
  }
  auto given = [&](size_t i) { return i < n.size() && !std::isnan(n[i]); };
  if (!given(0)) fail("range() needs at least one number");
  double start = n[0], stop = 0, step = given(2) ? n[2] : 1;
  if (given(1)) {
    stop = n[1];
  } else {
    stop = start;
    start = 0;
  }
  if (step == 0) fail("range() step must not be zero");
  std::vector<Value> out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 1000000) fail("range() is too long (over a million numbers)");
    out.push_back(std::floor(i) == i ? Value::integer(i) : Value::floating(i));
  }
  return Value::array(std::move(out));
}

}  // namespace

Value Interpreter::builtin_member(const Value& object, const std::string& name) {
  switch (object.kind) {
    case Kind::String: return string_member(object, name);
    case Kind::Object: return object_member(object, name);
    case Kind::Array:
      if (name == "length") return Value::integer(static_cast<double>(object.arr().items.size()));
      if (object.is_tuple()) return Value::undefined();
      if (name == "append") return method(name, [object](Args& a) {
          if (a.size() != 1) fail("append() takes exactly one argument");
          object.arr().items.push_back(a[0]);
          return Value::null();
        });
      if (name == "pop") return method(name, [object](Args& a) {
          auto& items = object.arr().items;
          if (items.empty()) fail("pop from empty list");
          double i = a.empty() ? -1 : a[0].is(Kind::Int) ? a[0].num() : (fail("pop() index must be an integer"), 0);
          if (i < 0) i += double(items.size());
          if (i < 0 || i >= double(items.size())) fail("pop index out of range");
          Value v = items[size_t(i)];
          items.erase(items.begin() + std::ptrdiff_t(i));
          return v;
        });
      return Value::undefined();
    default: return Value::undefined();
  }
}

void Interpreter::setup_globals(Env& env) {
  env.set("namespace", method("namespace", [this](Args& args) {
            Value ns = make_namespace(args);
            namespaces_.push_back(std::get<std::shared_ptr<ObjectData>>(ns.data));
            return ns;
          }));
  env.set("false", Value::boolean(false));
  env.set("true", Value::boolean(true));
  env.set("none", Value::null());
  env.set("raise_exception", method("raise_exception", [](Args& args) -> Value {
            if (args.empty() || args[0].is(Kind::Undefined) || args[0].is(Kind::Null)) fail("");
            fail(js_raw_string(args[0]));
          }));
  env.set("range", method("range", range));
  env.set("strftime_now", method("strftime_now", [this](Args& args) {
            if (args.empty() || !args[0].is(Kind::String)) fail("strftime_now() expects a format string");
            return Value::string(strftime_js(clock_(), args[0].str()));
          }));
  env.set("True", Value::boolean(true));
  env.set("False", Value::boolean(false));
  env.set("None", Value::null());
}

bool has_test(const std::string& n) {
  static const char* const kTests[] = {"boolean", "callable", "odd",     "even",     "false",     "true",
                                       "none",    "string",   "number",  "integer",  "iterable",  "mapping",
                                       "sequence", "lower",   "upper",   "defined",  "undefined", "equalto",
                                       "eq"};
  for (const char* t : kTests)
    if (n == t) return true;
  return false;
}

bool run_test(const std::string& n, const Value& v, const Value* arg) {
  if (n == "boolean") return v.is(Kind::Bool);
  if (n == "callable") return v.is(Kind::Function);
  if (n == "odd" || n == "even") {
    if (!v.is(Kind::Int)) fail("cannot " + n + " on " + v.type_name());
    bool odd = std::fmod(v.num(), 2) != 0;
    return n == "odd" ? odd : !odd;
  }
  if (n == "false") return v.is(Kind::Bool) && !v.b();
  if (n == "true") return v.is(Kind::Bool) && v.b();
  if (n == "none") return v.is(Kind::Null);
  if (n == "string") return v.is(Kind::String);
  if (n == "number") return v.is_number();
  if (n == "integer") return v.is(Kind::Int);
  if (n == "iterable") return (v.is(Kind::Array) && !v.is_tuple()) || v.is(Kind::String);
  if (n == "mapping") return v.is(Kind::Object);
  if (n == "sequence") return v.is(Kind::Array) || v.is(Kind::Object) || v.is(Kind::String);
  if (n == "lower") return v.is(Kind::String) && v.str() == js_to_lower(v.str());
  if (n == "upper") return v.is(Kind::String) && v.str() == js_to_upper(v.str());
  if (n == "defined") return !v.is(Kind::Undefined);
  if (n == "undefined") return v.is(Kind::Undefined);
  if (n == "equalto" || n == "eq") {
    if (!arg) fail("the `" + n + "` test needs a value to compare with (the reference fails without one)");
    return strict_equals(v, *arg);
  }
  fail("Unknown test: " + n);
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  auto cannot = [&] { fail(std::string("Cannot compare ") + a.type_name() + " with " + b.type_name()); };
  if (a.is(Kind::Null) && b.is(Kind::Null)) return 0;
  if (a.is(Kind::Null) || b.is(Kind::Null)) cannot();
  if (a.is(Kind::Undefined) && b.is(Kind::Undefined)) return 0;
  if (a.is(Kind::Undefined) || b.is(Kind::Undefined)) cannot();
  if (a.is_numeric_like() && b.is_numeric_like()) {
    double x = a.as_number(), y = b.as_number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (std::string(a.type_name()) != b.type_name())
    fail(std::string("Cannot compare different types: ") + a.type_name() + " and " + b.type_name());
  if (a.is(Kind::String)) {
    std::u16string x = to_utf16(case_sensitive ? a.str() : js_to_lower(a.str()));
    std::u16string y = to_utf16(case_sensitive ? b.str() : js_to_lower(b.str()));
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail(std::string("Cannot compare type: ") + a.type_name());
}

Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_object_like()) {
      const Value* f = v.obj().find(part);
      v = f ? *f : Value::undefined();
    } else if (v.is(Kind::Array)) {
      double idx = js_parse_int(part);
      const auto& items = v.arr().items;
      if (std::isnan(idx) || idx < 0 || idx >= static_cast<double>(items.size())) return Value::undefined();
      v = items[static_cast<size_t>(idx)];
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

}  // namespace deltafin::jinja
