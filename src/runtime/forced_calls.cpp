#include "runtime/forced_calls.h"

#include <string>
#include <vector>

#include "runtime/reasoning.h"
#include "runtime/xtml.h"

namespace deltafin {

using json = nlohmann::ordered_json;

namespace {

std::string xtml_attr(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// The literal text around one call of `name`.
void frame(ToolFormat f, const std::string& name, JsonFramed* d) {
  switch (f) {
    case ToolFormat::Hermes:
      d->prefix = "<tool_call>\n{\"name\": " + json(name).dump() + ", \"arguments\": ";
      d->suffix = "}\n</tool_call>";
      break;
    case ToolFormat::KimiK2:
      d->prefix = "<|tool_calls_section_begin|><|tool_call_begin|>functions." + name + ":0<|tool_call_argument_begin|>";
      d->suffix = "<|tool_call_end|><|tool_calls_section_end|>";
      break;
    case ToolFormat::DeepSeek:
      d->prefix = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>";
      d->suffix = "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
      break;
    case ToolFormat::Xtml:
      d->prefix = "<|open|>tools<|sep|><|open|>call tool=\"" + xtml_attr(name) +
                  "\" index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>";
      d->suffix = "<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";
      break;
    default: break;
  }
}

// The text that ends what the prompt left open before a call may start.
std::string opening(ToolFormat f, std::string_view prompt) {
  if (f == ToolFormat::Xtml) {
    std::vector<std::string> open = xtml_open_tags(prompt);
    std::string out;
    for (size_t i = open.size(); i-- > 0 && open[i] != "message";) out += "<|close|>" + open[i] + "<|sep|>";
    return out;
  }
  return prompt_opens_think(std::string(prompt)) ? "</think>" : "";
}

// The tool's parameter schema if the grammar takes it as an object, else any object.
json arguments_schema(const json& tool) {
  const json& fn = tool.contains("function") ? tool["function"] : tool;
  const json any = json{{"type", "object"}};
  if (!fn.contains("parameters") || !fn["parameters"].is_object()) return any;
  Result<JsonGrammar> g = JsonGrammar::from_schema(fn["parameters"]);
  if (!g.ok() || g->node(g->variant(0).root).kind != JsonNode::Kind::Object) return any;
  return fn["parameters"];
}

std::string name_of(const json& tool) {
  const json& fn = tool.contains("function") ? tool["function"] : tool;
  return fn.is_object() && fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "";
}

}  // namespace

bool can_force_calls(ToolFormat f) {
  return f == ToolFormat::Hermes || f == ToolFormat::KimiK2 || f == ToolFormat::DeepSeek || f == ToolFormat::Xtml;
}

std::shared_ptr<const JsonGrammar> forced_call_grammar(ToolFormat f, const json& tools, const json& choice,
                                                       std::string_view prompt, const Tokenizer& tok) {
  if (!can_force_calls(f) || !tools.is_array()) return nullptr;
  std::string want;  // empty: any tool
  if (choice.is_object() && choice.contains("function") && choice["function"].is_object())
    want = choice["function"].value("name", "");
  else if (choice != "required")
    return nullptr;
  const std::string open = opening(f, prompt);
  std::vector<JsonFramed> docs;
  for (const json& t : tools) {
    const std::string name = name_of(t);
    if (name.empty() || (!want.empty() && name != want)) continue;
    JsonFramed d;
    frame(f, name, &d);
    d.prefix = open + d.prefix;
    d.schema = arguments_schema(t);
    docs.push_back(std::move(d));
    if (docs.size() == JsonGrammar::kMaxCandidates) break;
  }
  if (docs.empty()) return nullptr;
  Result<JsonGrammar> g = JsonGrammar::one_of(docs);
  if (!g.ok()) return nullptr;  // names that do not tell the calls apart: the template asks
  std::vector<std::string_view> markers = tool_markers(f);
  markers.push_back("</think>");
  for (std::string_view m : markers)
    if (int32_t id = tok.vocab().find(m); id >= 0) g->force_token(m, id);
  return std::make_shared<const JsonGrammar>(std::move(g).value());
}

}  // namespace deltafin
