#include "chat/forced_calls.h"

#include <algorithm>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "chat/xtml.h"

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

// The grammar of a forced reply under construction: segments and their successors.
class CallGraph {
 public:
  uint32_t add(std::vector<JsonPiece> pieces, bool end = false) {
    segs_.push_back(JsonSegment{std::move(pieces), {}, end});
    return uint32_t(segs_.size() - 1);
  }
  void link(uint32_t from, uint32_t to) { segs_[from].next.push_back(to); }
  void set_end(uint32_t seg) { segs_[seg].end = true; }
  void link(uint32_t from, const std::vector<uint32_t>& to) {
    for (uint32_t t : to) link(from, t);
  }
  const std::vector<JsonSegment>& segments() const { return segs_; }

 private:
  std::vector<JsonSegment> segs_;
};

JsonPiece lit(std::string t) { return JsonPiece{Kind::Literal, std::move(t), nullptr, {}}; }

// How a format writes a reply of calls: `begin` + calls + `close`, each call
// `call_head` + arguments + `call_tail`, calls apart by `sep`. In the parameter formats
// the arguments are parameters, each its tag, value and closing tag; in the others a
// JSON object. {name} and {index} stand for the tool's name and the call's index.
struct CallFormat {
  std::string begin, call_head, call_tail, sep, close;
  bool params = false;
  bool dsml = false;
  int index_base = 0;  // the first call's index
};

CallFormat call_format(ToolFormat f, std::string_view prompt) {
  switch (f) {
    case ToolFormat::Hermes:
      return {"", "<tool_call>\n{\"name\": {name}, \"arguments\": ", "}\n</tool_call>", "\n", ""};
    case ToolFormat::KimiK2: {
      // Kimi K2 numbers calls across the conversation (its template's counter).
      int seen = 0;
      for (size_t at = prompt.find("<|tool_call_begin|>"); at != std::string_view::npos;
           at = prompt.find("<|tool_call_begin|>", at + 1))
        ++seen;
      return {"<|tool_calls_section_begin|>", "<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>",
              "<|tool_call_end|>", "", "<|tool_calls_section_end|>", false, false, seen};
    }
    case ToolFormat::DeepSeek:
      return {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "",
              "<｜tool▁calls▁end｜>"};
    case ToolFormat::Xtml:
      return {"<|open|>tools<|sep|>",
              "<|open|>call tool=\"{name}\" index=\"{index}\"<|sep|><|open|>json type=\"object\"<|sep|>",
              "<|close|>json<|sep|><|close|>call<|sep|>", "", "<|close|>tools<|sep|><|close|>message<|sep|>", false,
              false, 1};
    case ToolFormat::QwenXml:
      return {"", "<tool_call>\n<function={name}>\n", "</function>\n</tool_call>", "\n", "", true};
    case ToolFormat::Dsml:
      return {"<｜DSML｜function_calls>\n", "<｜DSML｜invoke name=\"{name}\">\n", "</｜DSML｜invoke>\n", "",
              "</｜DSML｜function_calls>", true, true};
    default: return {};
  }
}

std::string fill(std::string t, std::string_view key, const std::string& value) {
  if (size_t at = t.find(key); at != std::string::npos) t.replace(at, key.size(), value);
  return t;
}

// What a call of one tool is made of, built once per tool: the name as the call's
// head writes it, and the arguments' schema (JSON formats) or the parameters' pieces
// in the schema's order (parameter formats).
struct ToolPieces {
  std::string name;
  json args;
  struct Param {
    std::vector<JsonPiece> pieces;
    bool required = false;
  };
  std::vector<Param> params;
};

ToolPieces tool_pieces(const CallFormat& cf, ToolFormat f, const json& tool) {
  ToolPieces out;
  const std::string name = name_of(tool);
  out.name = f == ToolFormat::Hermes ? json(name).dump() : f == ToolFormat::Xtml ? xtml_attr(name) : name;
  if (!cf.params) {
    out.args = arguments_schema(tool);
    return out;
  }
  const json raw = parameters_of(tool);
  const json& props = raw.is_object() && raw.contains("properties") ? raw["properties"] : json();
  const json& required = raw.is_object() && raw.contains("required") ? raw["required"] : json();
  if (!props.is_object()) return out;
  for (const auto& [key, prop] : props.items()) {
    const bool text = is_text(prop);
    const std::string end = cf.dsml ? "</｜DSML｜parameter>\n" : "\n</parameter>\n";
    ToolPieces::Param p;
    p.required = required.is_array() && std::find(required.begin(), required.end(), key) != required.end();
    p.pieces.push_back(lit(cf.dsml ? "<｜DSML｜parameter name=\"" + key + "\" string=\"" + (text ? "true" : "false") + "\">"
                                   : "<parameter=" + key + ">\n"));
    if (text && prop.contains("enum")) {  // one of the words, unquoted
      JsonPiece w{Kind::Json, "", nullptr, {}};
      for (const json& v : prop["enum"]) w.words.push_back(v.get<std::string>());
      p.pieces.push_back(std::move(w));
      p.pieces.push_back(lit(end));
    } else if (text) {
      p.pieces.push_back({Kind::Text, end, nullptr, {}});
    } else {
      p.pieces.push_back({Kind::Json, "", value_schema(prop), {}});  // one the grammar cannot take is any value
      p.pieces.push_back(lit(end));
    }
    out.params.push_back(std::move(p));
    if (out.params.size() + 1 == JsonGrammar::kMaxChoices) break;
  }
  return out;
}

// One call (index `index`) as segments of `g`: its first segment (what `lead` comes
// before) and its last (whose successors the caller adds). Parameter formats write the
// parameters in the schema's order, the required ones always and the optional ones
// where the model chooses.
std::pair<uint32_t, uint32_t> add_call(CallGraph* g, const CallFormat& cf, const ToolPieces& tool,
                                       const std::string& lead, int index) {
  const std::string head = fill(fill(cf.call_head, "{index}", std::to_string(index)), "{name}", tool.name);
  if (!cf.params) {
    const uint32_t s = g->add({lit(lead + head), {Kind::Json, "", tool.args, {}}, lit(cf.call_tail)});
    return {s, s};
  }
  const uint32_t first = g->add({lit(lead + head)});
  const uint32_t last = g->add({lit(cf.call_tail)});
  std::vector<uint32_t> segs;
  for (const ToolPieces::Param& p : tool.params) segs.push_back(g->add(p.pieces));
  // After the head or a parameter: any later parameter up to the next required one,
  // or the tail where none is required.
  auto follow = [&](uint32_t from, size_t i) {
    for (; i < segs.size(); ++i) {
      g->link(from, segs[i]);
      if (tool.params[i].required) return;
    }
    g->link(from, last);
  };
  follow(first, 0);
  for (size_t i = 0; i < segs.size(); ++i) follow(segs[i], i + 1);
  return {first, last};
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
                                                       std::string_view prompt, const Tokenizer& tok, int max_calls) {
  if (!can_force_calls(f) || !tools.is_array() || max_calls < 1) return nullptr;
  std::string want;  // empty: any tool
  if (choice.is_object() && choice.contains("function") && choice["function"].is_object())
    want = choice["function"].value("name", "");
  else if (choice != "required")
    return nullptr;
  const CallFormat cf = call_format(f, prompt);
  std::vector<ToolPieces> chosen;  // the close of the calls is one more candidate
  for (const json& t : tools) {
    const std::string name = name_of(t);
    if (name.empty() || (!want.empty() && name != want)) continue;
    chosen.push_back(tool_pieces(cf, f, t));
    if (chosen.size() + 1 == JsonGrammar::kMaxChoices) break;
  }
  if (chosen.empty()) return nullptr;
  CallGraph g;
  // Call k of any chosen tool: after it call k + 1 (led by the separator), and the close
  // of the calls or, in formats without one, the end.
  const uint32_t close = cf.close.empty() ? UINT32_MAX : g.add({lit(cf.close)}, true);
  std::vector<uint32_t> starts, tails;
  for (int k = 0; k < max_calls; ++k) {
    const std::string lead = k == 0 ? opening(f, prompt) + cf.begin : cf.sep;
    std::vector<uint32_t> heads, last;
    for (const ToolPieces& t : chosen) {
      auto [first, end] = add_call(&g, cf, t, lead, cf.index_base + k);
      heads.push_back(first);
      last.push_back(end);
    }
    for (uint32_t t : tails) g.link(t, heads);
    if (k == 0) starts = heads;
    tails = std::move(last);
    for (uint32_t t : tails) {
      if (close == UINT32_MAX) g.set_end(t);
      else g.link(t, close);
    }
  }
  Result<JsonGrammar> grammar = JsonGrammar::graph(g.segments(), starts);
  if (!grammar.ok()) return nullptr;  // names that do not tell the calls apart: the template asks
  std::vector<std::string_view> markers = tool_markers(f);
  markers.push_back("</think>");
  for (std::string_view m : markers)
    if (int32_t id = tok.vocab().find(m); id >= 0) grammar->force_token(m, id);
  return std::make_shared<const JsonGrammar>(std::move(grammar).value());
}

}  // namespace deltafin
