#include "chat/tool_calls.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "chat/reasoning.h"

namespace deltafin {

namespace {
using json = nlohmann::ordered_json;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return std::string(s.substr(a, b - a));
}

// Arguments: a JSON object, or a string holding one (some models write that).
bool arguments_of(const json& args, std::string* out) {
  if (args.is_string()) {
    json inner = json::parse(args.get<std::string>(), nullptr, false);
    if (inner.is_discarded() || !inner.is_object()) return false;
    *out = inner.dump();
    return true;
  }
  if (!args.is_object()) return false;
  *out = args.dump();
  return true;
}

// The JSON-schema type of a tool's parameter ("" when the request does not say).
std::string param_type(const json* tools, std::string_view fn, std::string_view key) {
  if (!tools || !tools->is_array()) return {};
  for (const json& t : *tools) {
    const json* f = t.contains("function") ? &t["function"] : &t;
    if (!f->is_object() || f->value("name", "") != fn) continue;
    const json* p = f->contains("parameters") ? &(*f)["parameters"] : nullptr;
    if (!p || !p->is_object() || !p->contains("properties") || !(*p)["properties"].is_object()) return {};
    const json& props = (*p)["properties"];
    auto it = props.find(std::string(key));
    if (it == props.end() || !it->is_object() || !it->contains("type")) return {};
    const json& type = (*it)["type"];
    if (type.is_string()) return type.get<std::string>();
    if (type.is_array() && std::find(type.begin(), type.end(), "string") != type.end()) return "string";
    return "json";
  }
  return {};
}

// A Qwen3-Coder parameter's text as a JSON value: a "string" parameter as it is,
// another typed one parsed (Python's True/False for booleans too), an untyped one
// parsed if it is a JSON number, boolean, null, object or array.
json qwen_value(std::string_view text, const std::string& type) {
  if (type == "string") return json(std::string(text));
  if (type == "boolean" && (text == "True" || text == "False")) return json(text == "True");
  json v = json::parse(text, nullptr, false);
  if (v.is_discarded() || (type.empty() && v.is_string())) return json(std::string(text));
  return v;
}

// How `s` stands against `lit`: it starts with it (Done), is a proper prefix of it
// (More), or neither (Fail).
enum class Prefix { Done, More, Fail };
Prefix against(std::string_view s, std::string_view lit) {
  if (s.starts_with(lit)) return Prefix::Done;
  return lit.starts_with(s) ? Prefix::More : Prefix::Fail;
}

size_t skip_space(std::string_view s, size_t at = 0) {
  while (at < s.size() && is_space(s[at])) ++at;
  return at;
}

// Hermes' usual head, ws { ws "name" ws : ws "NAME" ws , ws "arguments" ws : ws, up to
// the first byte of the arguments: Done (*name, *end set), More, or Fail (written
// otherwise: read whole at the end of the call). A name with escapes counts as
// otherwise.
Prefix hermes_head(std::string_view s, std::string* name, size_t* end) {
  size_t at = 0;
  auto lit = [&](std::string_view l) {
    at = skip_space(s, at);
    const Prefix p = against(s.substr(at), l);
    if (p == Prefix::Done) at += l.size();
    return p;
  };
  for (std::string_view l : {"{", "\"name\"", ":", "\""}) 
    if (Prefix p = lit(l); p != Prefix::Done) return p;
  const size_t q = s.find_first_of("\"\\", at);
  if (q == std::string_view::npos) return Prefix::More;
  if (s[q] == '\\') return Prefix::Fail;
  *name = std::string(s.substr(at, q - at));
  at = q + 1;
  for (std::string_view l : {",", "\"arguments\"", ":"})
    if (Prefix p = lit(l); p != Prefix::Done) return p;
  at = skip_space(s, at);
  if (at >= s.size()) return Prefix::More;
  if (s[at] != '{') return Prefix::Fail;  // a string holding the object, say
  *end = at;
  return Prefix::Done;
}

// Whether the format's calls are read here (XTML's are XtmlReply's).
bool reads_calls(const ChatFormat& f) { return f.syntax != CallSyntax::None && f.syntax != CallSyntax::Xtml; }

// A header longer than this is not one: the text is content.
constexpr size_t kMaxHeader = 4096;

}  // namespace

void add_deltas(std::vector<ToolCall>* calls, const std::vector<ToolCallDelta>& deltas) {
  for (const ToolCallDelta& d : deltas) {
    if (d.index >= calls->size()) calls->resize(d.index + 1);
    ToolCall& c = (*calls)[d.index];
    if (!d.name.empty()) c.name = d.name;
    c.arguments += d.arguments;
  }
}

bool parse_tool_calls(ToolFormat f, const std::string& text, std::string* content, std::vector<ToolCall>* calls,
                      const json* tools) {
  ToolCallStream s(f, tools ? *tools : json());
  ToolText a = s.push(text), b = s.finish();
  std::vector<ToolCall> out;
  add_deltas(&out, a.calls);
  add_deltas(&out, b.calls);
  if (out.empty()) return false;
  *content = trim(a.content + b.content);
  *calls = std::move(out);
  return true;
}

std::string RawArguments::push(std::string_view s) {
  if (!started_) {
    const size_t a = skip_space(s);
    if (a == s.size()) return {};
    started_ = true;
    s.remove_prefix(a);
  }
  held_ += s;
  size_t keep = held_.size();
  while (keep > 0 && is_space(held_[keep - 1])) --keep;
  if (outer_ && keep > 0 && held_[keep - 1] == '}') --keep;
  std::string out = held_.substr(0, keep);
  held_.erase(0, keep);
  sent_ = sent_ || !out.empty();
  return out;
}

std::string RawArguments::finish() {
  std::string out = trim(held_);
  if (outer_ && !out.empty() && out.back() == '}') out = trim(out.substr(0, out.size() - 1));
  if (out.empty() && !sent_) out = "{}";  // no text: no arguments
  held_.clear();
  started_ = sent_ = false;
  return out;
}

ToolCallStream::ToolCallStream(ToolFormat f, json tools) : f_(chat_format(f)), tools_(std::move(tools)) {}

void ToolCallStream::eat(size_t n) {
  if (!in_call_) raw_ += held_.substr(0, n);
  held_.erase(0, n);
}

void ToolCallStream::named(const std::string& name, ToolText* out) {
  name_ = name;
  in_call_ = true;
  section_calls_ = true;
  n_params_ = 0;
  raw_.clear();
  out->calls.push_back(ToolCallDelta{n_calls_++, name, ""});
}

void ToolCallStream::close_call(ToolText* out) {
  if (!in_call_) return;
  std::string tail;
  if (st_ == St::Raw) tail = args_.finish();
  else if (st_ == St::Params) tail = n_params_ ? "}" : "{}";
  if (!tail.empty()) out->calls.push_back(ToolCallDelta{n_calls_ - 1, "", tail});
  in_call_ = false;
  raw_.clear();
}

void ToolCallStream::fail(ToolText* out) {
  close_call(out);
  out->content += raw_;  // what began a call or section that never named one
  raw_.clear();
  st_ = St::Text;
  hermes_whole_ = false;
}

ToolCallStream::Step ToolCallStream::header(ToolText* out) {
  if (f_.syntax == CallSyntax::NamedJson) {
    const size_t sep = held_.find(f_.name_end);
    if (sep == std::string::npos || sep > kMaxHeader) return held_.size() > kMaxHeader ? Step::Fail : Step::More;
    const std::string name = f_.call_name ? f_.call_name(held_.substr(0, sep)) : trim(held_.substr(0, sep));
    if (name.empty()) return Step::Fail;
    eat(sep + f_.name_end.size());
    named(name, out);
    args_ = RawArguments();
    st_ = St::Raw;
    return Step::Done;
  }
  if (f_.syntax == CallSyntax::DsmlParams || f_.syntax == CallSyntax::Params) {
    // DSML's call_open ends inside the name's tag: no space before the name.
    const std::string_view open = f_.name_open, close = f_.name_end;
    const size_t at = f_.syntax == CallSyntax::DsmlParams ? 0 : skip_space(held_);
    if (at == held_.size()) return Step::More;
    const Prefix p = against(std::string_view(held_).substr(at), open);
    if (p != Prefix::Done) return p == Prefix::More ? Step::More : Step::Fail;
    const size_t end = held_.find(close, at + open.size());
    if (end == std::string::npos || end > kMaxHeader) return held_.size() > kMaxHeader ? Step::Fail : Step::More;
    const std::string name = held_.substr(at + open.size(), end - at - open.size());
    if (name.empty() || name.find('\n') != std::string::npos) return Step::Fail;
    eat(end + close.size());
    named(name, out);
    st_ = St::Params;
    return Step::Done;
  }
  // Hermes.
  if (!hermes_whole_) {
    std::string name;
    size_t end = 0;
    const Prefix p = hermes_head(held_, &name, &end);
    if (p == Prefix::More && held_.size() <= kMaxHeader) return Step::More;
    if (p == Prefix::Done && end <= kMaxHeader) {
      eat(end);
      named(name, out);
      args_ = RawArguments(true);
      st_ = St::Raw;
      return Step::Done;
    }
    hermes_whole_ = true;
  }
  const size_t close = held_.find(f_.calls_close);
  if (close == std::string::npos) return Step::More;
  json j = json::parse(std::string_view(held_).substr(0, close), nullptr, false);
  std::string args;
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string() ||
      !arguments_of(j.contains("arguments") ? j["arguments"] : json::object(), &args))
    return Step::Fail;
  eat(close + f_.calls_close.size());
  named(j["name"].get<std::string>(), out);
  out->calls.back().arguments = args;
  in_call_ = false;
  hermes_whole_ = false;
  st_ = St::Between;
  return Step::Done;
}

ToolCallStream::Step ToolCallStream::params(ToolText* out) {
  const bool dsml = f_.syntax == CallSyntax::DsmlParams;
  const size_t at = skip_space(held_);
  if (at == held_.size()) return Step::More;
  const std::string_view rest = std::string_view(held_).substr(at);
  const std::string_view end = f_.call_close, param = f_.param_open;
  const Prefix pe = against(rest, end), pp = against(rest, param);
  if (pe == Prefix::Done) {
    eat(at + end.size());
    close_call(out);
    st_ = dsml ? St::Section : St::AfterCall;
    return Step::Done;
  }
  if (pp != Prefix::Done) return pe == Prefix::More || pp == Prefix::More ? Step::More : Step::Fail;
  // The whole parameter: its key, (DSML) whether it is a string, and its value.
  const std::string_view value_end = f_.param_close;
  const size_t close = rest.find(value_end);
  const size_t key_end = rest.find(f_.param_key_end, param.size());
  if (key_end == std::string_view::npos || key_end > kMaxHeader || (close != std::string_view::npos && key_end > close))
    return close == std::string_view::npos && rest.size() <= kMaxHeader ? Step::More : Step::Fail;
  const std::string key(rest.substr(param.size(), key_end - param.size()));
  size_t v0 = key_end + f_.param_key_end.size();
  bool is_string = false;
  if (dsml) {
    const Prefix ps = against(rest.substr(v0), " string=\"");
    if (ps != Prefix::Done) return ps == Prefix::More ? Step::More : Step::Fail;
    const size_t q = rest.find("\">", v0 + 9);
    if (q == std::string_view::npos || q > kMaxHeader || (close != std::string_view::npos && q > close))
      return close == std::string_view::npos && rest.size() <= kMaxHeader ? Step::More : Step::Fail;
    is_string = rest.substr(v0 + 9, q - v0 - 9) == "true";
    v0 = q + 2;
  }
  if (close == std::string_view::npos) return Step::More;
  std::string_view value = rest.substr(v0, close - v0);
  json v;
  if (dsml) {
    if (is_string) {
      v = std::string(value);
    } else {
      v = json::parse(value, nullptr, false);
      if (v.is_discarded()) return Step::Fail;
    }
  } else {
    if (value.starts_with("\n")) value.remove_prefix(1);
    if (value.ends_with("\n")) value.remove_suffix(1);
    v = qwen_value(value, param_type(&tools_, name_, key));
  }
  eat(at + close + value_end.size());
  out->calls.push_back(ToolCallDelta{n_calls_ - 1, "", (n_params_++ ? "," : "{") + json(key).dump() + ":" + v.dump()});
  return Step::Done;
}

ToolCallStream::Step ToolCallStream::step(ToolText* out) {
  switch (st_) {
    case St::Text: {
      const std::string_view begin = reads_calls(f_) ? f_.calls_open : std::string_view();
      const size_t at = begin.empty() ? std::string::npos : held_.find(begin);
      if (at == std::string::npos) {
        const size_t keep = begin.empty() ? 0 : partial_tag(held_, begin);
        out->content += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return Step::More;
      }
      out->content += held_.substr(0, at);
      held_.erase(0, at);
      raw_.clear();
      eat(begin.size());
      section_calls_ = false;
      st_ = f_.call_open.empty() ? St::Header : St::Section;  // a call's own tag, or a section of calls
      return Step::Done;
    }
    case St::Section: {
      const size_t at = skip_space(held_);
      if (at == held_.size()) return Step::More;
      const std::string_view rest = std::string_view(held_).substr(at);
      const std::string_view end = f_.calls_close, call = f_.call_open;
      const Prefix pe = against(rest, end), pc = against(rest, call);
      if (pe == Prefix::Done) {
        eat(at + end.size());
        if (!section_calls_) return fail(out), Step::Done;  // an empty section: text
        raw_.clear();
        st_ = St::Text;
        return Step::Done;
      }
      if (pc == Prefix::Done) {
        if (section_calls_) raw_.clear();  // a new call: its text is content if it breaks
        eat(at + call.size());
        st_ = St::Header;
        return Step::Done;
      }
      return pe == Prefix::More || pc == Prefix::More ? Step::More : Step::Fail;
    }
    case St::Header: return header(out);
    case St::Raw: {
      const bool whole = f_.syntax == CallSyntax::JsonCall;  // the call's own tag closes it
      const std::string_view end = whole ? f_.calls_close : f_.call_close;
      const size_t at = held_.find(end);
      if (at == std::string::npos) {
        const size_t keep = partial_tag(held_, end);
        const std::string a = args_.push(std::string_view(held_).substr(0, held_.size() - keep));
        if (!a.empty()) out->calls.push_back(ToolCallDelta{n_calls_ - 1, "", a});
        held_.erase(0, held_.size() - keep);
        return Step::More;
      }
      const std::string a = args_.push(std::string_view(held_).substr(0, at));
      if (!a.empty()) out->calls.push_back(ToolCallDelta{n_calls_ - 1, "", a});
      held_.erase(0, at + end.size());
      close_call(out);
      st_ = whole ? St::Between : St::Section;
      return Step::Done;
    }
    case St::Params: return params(out);
    case St::AfterCall: {  // Params closes the call's tag
      const size_t at = skip_space(held_);
      if (at == held_.size()) return Step::More;
      const Prefix p = against(std::string_view(held_).substr(at), f_.calls_close);
      if (p == Prefix::More) return Step::More;
      if (p == Prefix::Done) {
        eat(at + f_.calls_close.size());
        raw_.clear();
      }
      st_ = St::Between;
      return Step::Done;
    }
    case St::Between: {  // after a call: another, or text
      const size_t at = skip_space(held_);
      if (at == held_.size()) return Step::More;
      const std::string_view rest = std::string_view(held_).substr(at);
      const Prefix p = against(rest, f_.calls_open);
      if (p == Prefix::More) return Step::More;
      raw_.clear();
      held_.erase(0, at);  // the whitespace between calls, or before the text after them
      st_ = St::Text;
      return Step::Done;
    }
  }
  return Step::Fail;
}

ToolText ToolCallStream::push(const std::string& text) {
  ToolText out;
  held_ += text;
  for (;;) {
    const Step s = step(&out);
    if (s == Step::More) break;
    if (s == Step::Fail) fail(&out);
  }
  return out;
}

ToolText ToolCallStream::finish() {
  ToolText out;
  for (;;) {
    const Step s = step(&out);
    if (s == Step::Done) continue;
    if (s == Step::Fail) {
      fail(&out);
      continue;
    }
    // More: the reply ended here.
    if (st_ == St::Header && f_.syntax == CallSyntax::JsonCall) {  // a stop at </tool_call>
      held_ += f_.calls_close;
      hermes_whole_ = true;
      if (header(&out) == Step::Done) continue;
      held_.resize(held_.size() - f_.calls_close.size());
      fail(&out);
      continue;
    }
    if (st_ == St::Raw) {
      const std::string a = args_.push(held_);
      if (!a.empty()) out.calls.push_back(ToolCallDelta{n_calls_ - 1, "", a});
      held_.clear();
      close_call(&out);
    } else if (st_ == St::Section || st_ == St::AfterCall || st_ == St::Between) {
      if (held_.find_first_not_of(" \n\t\r") == std::string::npos) held_.clear();
      if (!section_calls_ && st_ == St::Section) out.content += raw_;
    } else if (st_ == St::Header || st_ == St::Params) {
      fail(&out);
    }
    out.content += held_;
    held_.clear();
    raw_.clear();
    st_ = St::Text;
    break;
  }
  return out;
}

}  // namespace deltafin
