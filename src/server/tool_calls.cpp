#include "server/tool_calls.h"

#include <nlohmann/json.hpp>

#include "server/reasoning.h"

namespace deltafin::server {

namespace {
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return std::string(s.substr(a, b - a));
}
}  // namespace

ToolFormat tool_format_of(const std::string& template_source) {
  return template_source.find(kOpen) != std::string::npos ? ToolFormat::Hermes : ToolFormat::None;
}

bool parse_tool_calls(ToolFormat f, const std::string& text, std::string* content, std::vector<ToolCall>* calls) {
  if (f != ToolFormat::Hermes) return false;
  size_t at = text.find(kOpen);
  if (at == std::string::npos) return false;
  std::vector<ToolCall> out;
  const std::string before = text.substr(0, at);
  while (at != std::string::npos) {
    const size_t body = at + kOpen.size();
    size_t end = text.find(kClose, body);
    // The last call may end at the end of the reply (a stop at the closing tag).
    const std::string_view inner = std::string_view(text).substr(body, end == std::string::npos ? std::string::npos : end - body);
    nlohmann::json j = nlohmann::json::parse(inner, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    ToolCall c;
    c.name = j["name"].get<std::string>();
    const nlohmann::json args = j.contains("arguments") ? j["arguments"] : nlohmann::json::object();
    if (args.is_string()) {  // some models write the arguments as a JSON string
      nlohmann::json inner_args = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
      if (inner_args.is_discarded() || !inner_args.is_object()) return false;
      c.arguments = inner_args.dump();
    } else if (args.is_object()) {
      c.arguments = args.dump();
    } else {
      return false;
    }
    out.push_back(std::move(c));
    if (end == std::string::npos) break;
    const size_t next = end + kClose.size();
    // Only whitespace may separate calls and follow the last one.
    at = text.find(kOpen, next);
    const std::string_view gap =
        std::string_view(text).substr(next, at == std::string::npos ? std::string::npos : at - next);
    if (!trim(gap).empty()) return false;
  }
  *content = trim(before);
  *calls = std::move(out);
  return true;
}

std::string ToolCallStream::push(const std::string& content) {
  if (f_ != ToolFormat::Hermes) return content;
  held_ += content;
  if (in_call_) return {};
  const size_t at = held_.find(kOpen);
  if (at != std::string::npos) {
    in_call_ = true;
    std::string out = held_.substr(0, at);
    held_.erase(0, at);
    return out;
  }
  // Hold back a tail that could be the start of the tag.
  const size_t keep = partial_tag(held_, kOpen);
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::vector<ToolCall> ToolCallStream::finish(std::string* rest) {
  std::vector<ToolCall> calls;
  std::string content;
  if (in_call_ && parse_tool_calls(f_, held_, &content, &calls)) {
    *rest = content;  // empty: the text before the first call went out already
  } else {
    *rest = held_;
    calls.clear();
  }
  held_.clear();
  return calls;
}

}  // namespace deltafin::server
