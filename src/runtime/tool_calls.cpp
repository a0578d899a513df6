#include "runtime/tool_calls.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "runtime/reasoning.h"

namespace deltafin {

namespace {
using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";

// Formats of a section of calls, each call a name and a JSON object between markers.
struct Sectioned {
  std::string_view begin, end, call, sep, call_end;
};
constexpr Sectioned kKimiK2{"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                            "<|tool_call_argument_begin|>", "<|tool_call_end|>"};
constexpr Sectioned kDeepSeek{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                              "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"};

constexpr std::string_view kDsmlCalls = "<｜DSML｜function_calls>", kDsmlCallsEnd = "</｜DSML｜function_calls>",
                           kDsmlInvoke = "<｜DSML｜invoke name=\"", kDsmlInvokeEnd = "</｜DSML｜invoke>",
                           kDsmlParam = "<｜DSML｜parameter name=\"", kDsmlParamEnd = "</｜DSML｜parameter>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return std::string(s.substr(a, b - a));
}

// Reads the held text of calls from left to right.
struct Reader {
  std::string_view s;
  size_t at = 0;
  void ws() {
    while (at < s.size() && is_space(s[at])) ++at;
  }
  bool end() const { return at >= s.size(); }
  bool eat(std::string_view lit) {
    if (s.substr(at).substr(0, lit.size()) != lit) return false;
    at += lit.size();
    return true;
  }
  // The text up to `lit`, which is consumed; false when it does not follow.
  bool until(std::string_view lit, std::string_view* out) {
    const size_t e = s.find(lit, at);
    if (e == std::string_view::npos) return false;
    *out = s.substr(at, e - at);
    at = e + lit.size();
    return true;
  }
};

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

bool arguments_text(std::string_view text, std::string* out) {
  json j = json::parse(text, nullptr, false);
  return !j.is_discarded() && arguments_of(j, out);
}

// From just after the opening tag. The last call may end at the end of the reply (a
// stop at the closing tag).
bool parse_hermes(Reader r, std::vector<ToolCall>* out) {
  for (;;) {
    std::string_view inner;
    if (!r.until(kHermesClose, &inner)) inner = r.s.substr(r.at), r.at = r.s.size();
    json j = json::parse(inner, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    ToolCall c;
    c.name = j["name"].get<std::string>();
    if (!arguments_of(j.contains("arguments") ? j["arguments"] : json::object(), &c.arguments)) return false;
    out->push_back(std::move(c));
    r.ws();
    if (r.end()) return true;
    if (!r.eat(kHermesOpen)) return false;
  }
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

// From just after <tool_call>: <function=f> with <parameter=k> values, each on lines
// of their own; the last call may end at the end of the reply.
bool parse_qwen_xml(Reader r, const json* tools, std::vector<ToolCall>* out) {
  for (;;) {
    r.ws();
    std::string_view name;
    if (!r.eat("<function=") || !r.until(">", &name) || name.empty()) return false;
    json args = json::object();
    for (;;) {
      r.ws();
      if (r.eat("</function>")) break;
      std::string_view key, value;
      if (!r.eat("<parameter=") || !r.until(">", &key) || !r.until("</parameter>", &value)) return false;
      if (value.substr(0, 1) == "\n") value.remove_prefix(1);
      if (value.size() >= 1 && value.back() == '\n') value.remove_suffix(1);
      args[std::string(key)] = qwen_value(value, param_type(tools, name, key));
    }
    out->push_back(ToolCall{std::string(name), args.dump()});
    r.ws();
    if (r.end()) return true;
    if (!r.eat(kHermesClose)) return false;
    r.ws();
    if (r.end()) return true;
    if (!r.eat(kHermesOpen)) return false;
  }
}

// Kimi K2 names a call "functions.NAME:INDEX".
std::string kimi_k2_name(std::string_view id) {
  std::string s = trim(id);
  if (s.rfind("functions.", 0) == 0) s.erase(0, 10);
  const size_t colon = s.rfind(':');
  if (colon != std::string::npos && colon + 1 < s.size() &&
      s.find_first_not_of("0123456789", colon + 1) == std::string::npos)
    s.resize(colon);
  return s;
}

// From just after the section's begin marker; the section may end at the end of the
// reply.
bool parse_sectioned(const Sectioned& m, bool kimi_names, Reader r, std::vector<ToolCall>* out) {
  for (;;) {
    r.ws();
    if (r.end()) return !out->empty();
    if (r.eat(m.end)) {
      r.ws();
      return r.end() && !out->empty();
    }
    std::string_view name, args;
    if (!r.eat(m.call) || !r.until(m.sep, &name) || !r.until(m.call_end, &args)) return false;
    ToolCall c;
    c.name = kimi_names ? kimi_k2_name(name) : trim(name);
    if (c.name.empty() || !arguments_text(args, &c.arguments)) return false;
    out->push_back(std::move(c));
  }
}

// DSML, from just after <｜DSML｜function_calls>: string="true" values are text, others
// JSON.
bool parse_dsml(Reader r, std::vector<ToolCall>* out) {
  for (;;) {
    r.ws();
    if (r.end()) return !out->empty();
    if (r.eat(kDsmlCallsEnd)) {
      r.ws();
      return r.end() && !out->empty();
    }
    std::string_view name;
    if (!r.eat(kDsmlInvoke) || !r.until("\">", &name) || name.empty()) return false;
    json args = json::object();
    for (;;) {
      r.ws();
      if (r.eat(kDsmlInvokeEnd)) break;
      std::string_view key, is_string, value;
      if (!r.eat(kDsmlParam) || !r.until("\"", &key) || !r.eat(" string=\"") || !r.until("\">", &is_string) ||
          !r.until(kDsmlParamEnd, &value))
        return false;
      if (is_string == "true") {
        args[std::string(key)] = std::string(value);
      } else {
        json v = json::parse(value, nullptr, false);
        if (v.is_discarded()) return false;
        args[std::string(key)] = std::move(v);
      }
    }
    out->push_back(ToolCall{std::string(name), args.dump()});
  }
}

std::string_view begin_marker(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes:
    case ToolFormat::QwenXml: return kHermesOpen;
    case ToolFormat::KimiK2: return kKimiK2.begin;
    case ToolFormat::DeepSeek: return kDeepSeek.begin;
    case ToolFormat::Dsml: return kDsmlCalls;
    default: return {};
  }
}
}  // namespace

ToolFormat tool_format_of(const std::string& src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string::npos; };
  if (has("<|open|>") && has("<|close|>") && has("<|sep|>")) return ToolFormat::Xtml;
  if (has(kKimiK2.begin)) return ToolFormat::KimiK2;
  if (has("DSML｜")) return ToolFormat::Dsml;
  if (has(kDeepSeek.begin)) return ToolFormat::DeepSeek;
  if (has(kHermesOpen)) return has("<function=") ? ToolFormat::QwenXml : ToolFormat::Hermes;
  return ToolFormat::None;
}

std::vector<std::string_view> tool_markers(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes:
    case ToolFormat::QwenXml: return {kHermesOpen, kHermesClose};
    case ToolFormat::KimiK2: return {kKimiK2.begin, kKimiK2.end, kKimiK2.call, kKimiK2.sep, kKimiK2.call_end};
    case ToolFormat::DeepSeek:
      return {kDeepSeek.begin, kDeepSeek.end, kDeepSeek.call, kDeepSeek.sep, kDeepSeek.call_end};
    case ToolFormat::Xtml: return {"<|open|>", "<|close|>", "<|sep|>"};
    default: return {};
  }
}

bool parse_tool_calls(ToolFormat f, const std::string& text, std::string* content, std::vector<ToolCall>* calls,
                      const json* tools) {
  const std::string_view begin = begin_marker(f);
  if (begin.empty()) return false;
  const size_t at = text.find(begin);
  if (at == std::string::npos) return false;
  Reader r{text, at + begin.size()};
  std::vector<ToolCall> out;
  bool ok = false;
  switch (f) {
    case ToolFormat::Hermes: ok = parse_hermes(r, &out); break;
    case ToolFormat::QwenXml: ok = parse_qwen_xml(r, tools, &out); break;
    case ToolFormat::KimiK2: ok = parse_sectioned(kKimiK2, true, r, &out); break;
    case ToolFormat::DeepSeek: ok = parse_sectioned(kDeepSeek, false, r, &out); break;
    case ToolFormat::Dsml: ok = parse_dsml(r, &out); break;
    default: break;
  }
  if (!ok) return false;
  *content = trim(std::string_view(text).substr(0, at));
  *calls = std::move(out);
  return true;
}

std::string ToolCallStream::push(const std::string& content) {
  const std::string_view begin = begin_marker(f_);
  if (begin.empty()) return content;
  held_ += content;
  if (in_call_) return {};
  const size_t at = held_.find(begin);
  if (at != std::string::npos) {
    in_call_ = true;
    std::string out = held_.substr(0, at);
    held_.erase(0, at);
    return out;
  }
  // Hold back a tail that could be the start of the marker.
  const size_t keep = partial_tag(held_, begin);
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::vector<ToolCall> ToolCallStream::finish(std::string* rest) {
  std::vector<ToolCall> calls;
  std::string content;
  if (in_call_ && parse_tool_calls(f_, held_, &content, &calls, &tools_)) {
    *rest = content;  // empty: the text before the first call went out already
  } else {
    *rest = held_;
    calls.clear();
  }
  held_.clear();
  return calls;
}

}  // namespace deltafin
