#include "chat/forced_calls.h"

#include <algorithm>
#include <string>
#include <vector>

#include "chat/reasoning.h"

namespace deltafin {

using json = nlohmann::ordered_json;

namespace {

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

ToolPieces tool_pieces(const ChatFormat& f, const json& tool) {
  const CallWriting& cf = *f.forced;
  ToolPieces out;
  const std::string name = name_of(tool);
  out.name = cf.name ? cf.name(name) : name;
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
    // DSML says whether a value is a string; Qwen3-Coder puts each on its own lines.
    const bool dsml = f.syntax == CallSyntax::DsmlParams;
    const std::string open(f.param_open), key_end(f.param_key_end), close(f.param_close);
    const std::string end = dsml ? close + "\n" : "\n" + close + "\n";
    ToolPieces::Param p;
    p.required = required.is_array() && std::find(required.begin(), required.end(), key) != required.end();
    p.pieces.push_back(lit(dsml ? open + key + key_end + " string=\"" + (text ? "true" : "false") + "\">"
                                : open + key + key_end + "\n"));
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
std::pair<uint32_t, uint32_t> add_call(CallGraph* g, const CallWriting& cf, const ToolPieces& tool,
                                       const std::string& lead, int index) {
  const std::string head = fill(fill(std::string(cf.call_head), "{index}", std::to_string(index)), "{name}", tool.name);
  if (!cf.params) {
    const uint32_t s = g->add({lit(lead + head), {Kind::Json, "", tool.args, {}}, lit(std::string(cf.call_tail))});
    return {s, s};
  }
  const uint32_t first = g->add({lit(lead + head)});
  const uint32_t last = g->add({lit(std::string(cf.call_tail))});
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
std::string opening(const CallWriting& cf, std::string_view prompt) {
  if (cf.opening) return cf.opening(prompt);
  return prompt_opens_think(std::string(prompt)) ? std::string(kThinkClose) : "";
}

}  // namespace

std::shared_ptr<const JsonGrammar> forced_call_grammar(ToolFormat format, const json& tools, const json& choice,
                                                       std::string_view prompt, const Tokenizer& tok, int max_calls) {
  const ChatFormat& f = chat_format(format);
  if (!f.forced || !tools.is_array() || max_calls < 1) return nullptr;
  std::string want;  // empty: any tool
  if (choice.is_object() && choice.contains("function") && choice["function"].is_object())
    want = choice["function"].value("name", "");
  else if (choice != "required")
    return nullptr;
  const CallWriting& cf = *f.forced;
  const int index_base = cf.first_index ? cf.first_index(prompt) : 0;
  std::vector<ToolPieces> chosen;  // the close of the calls is one more candidate
  for (const json& t : tools) {
    const std::string name = name_of(t);
    if (name.empty() || (!want.empty() && name != want)) continue;
    chosen.push_back(tool_pieces(f, t));
    if (chosen.size() + 1 == JsonGrammar::kMaxChoices) break;
  }
  if (chosen.empty()) return nullptr;
  CallGraph g;
  // Call k of any chosen tool: after it call k + 1 (led by the separator), and the close
  // of the calls or, in formats without one, the end.
  const uint32_t close = cf.close.empty() ? UINT32_MAX : g.add({lit(std::string(cf.close))}, true);
  std::vector<uint32_t> starts, tails;
  for (int k = 0; k < max_calls; ++k) {
    const std::string lead = k == 0 ? opening(cf, prompt) + std::string(cf.begin) : std::string(cf.sep);
    std::vector<uint32_t> heads, last;
    for (const ToolPieces& t : chosen) {
      auto [first, end] = add_call(&g, cf, t, lead, index_base + k);
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
  std::vector<std::string_view> markers(f.shown.begin(), f.shown.end());
  markers.push_back(kThinkClose);
  for (std::string_view m : markers)
    if (int32_t id = tok.vocab().find(m); id >= 0) grammar->force_token(m, id);
  return std::make_shared<const JsonGrammar>(std::move(grammar).value());
}

}  // namespace deltafin
