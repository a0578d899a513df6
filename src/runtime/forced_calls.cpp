#include "runtime/forced_calls.h"

#include <algorithm>
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

using Kind = JsonPart::Kind;

// A parameter whose value the format writes as plain text: a string (or an enum of
// strings without a type).
bool is_text(const json& prop) {
  if (!prop.is_object()) return false;
  const bool words = prop.contains("enum") && prop["enum"].is_array() && !prop["enum"].empty() &&
                     prop["enum"].size() <= JsonGrammar::kMaxCandidates &&
                     std::all_of(prop["enum"].begin(), prop["enum"].end(), [](const json& v) { return v.is_string(); });
  if (prop.contains("type")) return prop["type"] == "string" && (words || !prop.contains("enum"));
  return words;
}

// A value's schema where the grammar takes it, else any value.
json value_schema(const json& prop) { return JsonGrammar::from_schema(prop).ok() ? prop : json(true); }

// A tool's function object (OpenAI's {"type": "function", "function": {...}}, or bare).
const json& function_of(const json& tool) { return tool.contains("function") ? tool["function"] : tool; }

std::string name_of(const json& tool) {
  const json& fn = function_of(tool);
  return fn.is_object() && fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "";
}

// The tool's parameter schema, or null.
json parameters_of(const json& tool) {
  const json& fn = function_of(tool);
  return fn.is_object() && fn.contains("parameters") && fn["parameters"].is_object() ? fn["parameters"] : json();
}

// The tool's parameter schema if the grammar takes it as an object, else any object.
json arguments_schema(const json& tool) {
  const json params = parameters_of(tool);
  if (params.is_null()) return json{{"type", "object"}};
  Result<JsonGrammar> g = JsonGrammar::from_schema(params);
  if (!g.ok() || g->node(g->variant(0).parts[0].root).kind != JsonNode::Kind::Object) return json{{"type", "object"}};
  return params;
}

// One call of `name` (a tool of the request) as the format writes it. Parameter
// formats write the required parameters, in the schema's order.
std::vector<JsonPiece> call_pieces(ToolFormat f, const std::string& name, const json& tool) {
  auto lit = [](std::string t) { return JsonPiece{Kind::Literal, std::move(t), nullptr, {}}; };
  auto framed = [&](std::string pre, std::string post) {
    return std::vector<JsonPiece>{lit(std::move(pre)), {Kind::Json, "", arguments_schema(tool), {}},
                                  lit(std::move(post))};
  };
  switch (f) {
    case ToolFormat::Hermes:
      return framed("<tool_call>\n{\"name\": " + json(name).dump() + ", \"arguments\": ", "}\n</tool_call>");
    case ToolFormat::KimiK2:
      return framed("<|tool_calls_section_begin|><|tool_call_begin|>functions." + name + ":0<|tool_call_argument_begin|>",
                    "<|tool_call_end|><|tool_calls_section_end|>");
    case ToolFormat::DeepSeek:
      return framed("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>",
                    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
    case ToolFormat::Xtml:
      return framed("<|open|>tools<|sep|><|open|>call tool=\"" + xtml_attr(name) +
                        "\" index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>",
                    "<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>");
    case ToolFormat::QwenXml:
    case ToolFormat::Dsml: {
      const bool dsml = f == ToolFormat::Dsml;
      std::vector<JsonPiece> out{lit(dsml ? "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"" + name + "\">\n"
                                          : "<tool_call>\n<function=" + name + ">\n")};
      // Parameter by parameter: one the grammar cannot take is any value.
      const json raw = parameters_of(tool);
      const json& props = raw.is_object() && raw.contains("properties") ? raw["properties"] : json();
      const json& required = raw.is_object() && raw.contains("required") ? raw["required"] : json();
      if (props.is_object() && required.is_array())
        for (const auto& [key, prop] : props.items()) {
          if (std::find(required.begin(), required.end(), key) == required.end()) continue;
          const bool text = is_text(prop);
          const std::string end = dsml ? "</｜DSML｜parameter>\n" : "\n</parameter>\n";
          out.push_back(lit(dsml ? "<｜DSML｜parameter name=\"" + key + "\" string=\"" + (text ? "true" : "false") + "\">"
                                 : "<parameter=" + key + ">\n"));
          if (text && prop.contains("enum")) {  // one of the words, unquoted
            JsonPiece w{Kind::Json, "", nullptr, {}};
            for (const json& v : prop["enum"]) w.words.push_back(v.get<std::string>());
            out.push_back(std::move(w));
            out.push_back(lit(end));
          } else if (text) {
            out.push_back({Kind::Text, end, nullptr, {}});
          } else {
            out.push_back({Kind::Json, "", value_schema(prop), {}});
            out.push_back(lit(end));
          }
        }
      out.push_back(lit(dsml ? "</｜DSML｜invoke>\n</｜DSML｜function_calls>" : "</function>\n</tool_call>"));
      return out;
    }
    default: return {};
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

}  // namespace

bool can_force_calls(ToolFormat f) { return f != ToolFormat::None; }

std::shared_ptr<const JsonGrammar> forced_call_grammar(ToolFormat f, const json& tools, const json& choice,
                                                       std::string_view prompt, const Tokenizer& tok) {
  if (!can_force_calls(f) || !tools.is_array()) return nullptr;
  std::string want;  // empty: any tool
  if (choice.is_object() && choice.contains("function") && choice["function"].is_object())
    want = choice["function"].value("name", "");
  else if (choice != "required")
    return nullptr;
  const std::string open = opening(f, prompt);
  std::vector<std::vector<JsonPiece>> docs;
  for (const json& t : tools) {
    const std::string name = name_of(t);
    if (name.empty() || (!want.empty() && name != want)) continue;
    std::vector<JsonPiece> d = call_pieces(f, name, t);
    d.insert(d.begin(), JsonPiece{Kind::Literal, open, nullptr, {}});
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
