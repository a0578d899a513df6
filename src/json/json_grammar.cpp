#include "json/json_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace deltafin {

using ojson = nlohmann::ordered_json;

uint32_t JsonGrammar::add(JsonNode n) {
  nodes_.push_back(std::move(n));
  return uint32_t(nodes_.size() - 1);
}

// Any value: an AnyOf whose object holds any values and whose array any items.
uint32_t JsonGrammar::add_any() {
  if (any_ != kNoNode) return any_;
  JsonNode a;
  a.kind = JsonNode::Kind::AnyOf;
  a.dispatch.fill(kNoNode);
  any_ = add(a);
  JsonNode obj;
  obj.kind = JsonNode::Kind::Object;
  obj.free = true;
  obj.any = any_;
  obj.first_required = {0};
  JsonNode arr;
  arr.kind = JsonNode::Kind::Array;
  arr.items = any_;
  JsonNode str;
  str.kind = JsonNode::Kind::String;
  JsonNode num;
  num.kind = JsonNode::Kind::Number;
  JsonNode lit;
  lit.kind = JsonNode::Kind::Literal;
  lit.literals = {"true", "false", "null"};
  const uint32_t o = add(obj), r = add(arr), s = add(str), n = add(num), l = add(lit);
  auto& d = nodes_[any_].dispatch;
  d['{'] = o;
  d['['] = r;
  d['"'] = s;
  d['-'] = n;
  for (int c = '0'; c <= '9'; ++c) d[size_t(c)] = n;
  d['t'] = d['f'] = d['n'] = l;
  return any_;
}

JsonGrammar JsonGrammar::any_object() {
  JsonGrammar g;
  const uint32_t any = g.add_any();
  JsonVariant v;
  v.parts.push_back(JsonPart{JsonPart::Kind::Json, "", g.nodes_[any].dispatch['{'], {}, false, {}});
  g.variants_.push_back(std::move(v));
  g.starts_ = {0};
  return g;
}

// Compiles a schema into a grammar; each error names the keyword and its path.
class SchemaCompiler {
 public:
  explicit SchemaCompiler(JsonGrammar* g) : g_(*g) {}

  Result<uint32_t> compile(const ojson& s, const std::string& path, int depth) {
    const std::string at = path.empty() ? "/" : path;
    if (depth > JsonGrammar::kMaxSchemaDepth)
      return make_error("the schema nests deeper than {} levels (at {})", JsonGrammar::kMaxSchemaDepth, at);
    if (s.is_boolean()) {
      if (s.get<bool>()) return g_.add_any();
      return make_error("the schema 'false' (at {}) allows no value", at);
    }
    if (!s.is_object()) return make_error("a schema must be an object (at {})", at);
    static const std::set<std::string> supported = {"type",     "properties", "required", "additionalProperties",
                                                    "enum",     "const",      "items",    "minItems",
                                                    "maxItems", "anyOf"};
    static const std::set<std::string> ignored = {"title",   "description", "$schema",  "$id",        "$comment",
                                                  "default", "examples",    "readOnly", "writeOnly", "deprecated"};
    for (auto& [k, v] : s.items())
      if (!supported.count(k) && !ignored.count(k))
        return make_error("keyword '{}' (at {}) is not supported; supported: type, properties, required, "
                          "additionalProperties, enum, const, items, minItems, maxItems, anyOf",
                          k, at);
    if (s.contains("const")) return literals(ojson::array({s["const"]}), path + "/const");
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        return make_error("'enum' (at {}) must be a non-empty array", at);
      return literals(s["enum"], path + "/enum");
    }
    if (s.contains("anyOf")) {
      if (s.contains("type")) return make_error("'anyOf' together with 'type' (at {}) is not supported", at);
      const ojson& alts = s["anyOf"];
      if (!alts.is_array() || alts.empty()) return make_error("'anyOf' (at {}) must be a non-empty array", at);
      std::vector<uint32_t> nodes;
      for (size_t i = 0; i < alts.size(); ++i) {
        DF_ASSIGN(uint32_t n, compile(alts[i], fmt::format("{}/anyOf/{}", path, i), depth + 1));
        nodes.push_back(n);
      }
      return any_of(nodes, path + "/anyOf");
    }
    if (!s.contains("type")) {
      if (s.contains("properties")) return typed("object", s, path, depth);
      if (s.contains("items")) return typed("array", s, path, depth);
      return g_.add_any();
    }
    const ojson& t = s["type"];
    if (t.is_string()) return typed(t.get<std::string>(), s, path, depth);
    if (!t.is_array() || t.empty())
      return make_error("'type' (at {}) must be a type name or a non-empty array of them", at);
    std::vector<uint32_t> nodes;
    for (const ojson& name : t) {
      if (!name.is_string()) return make_error("'type' (at {}) must be a type name or an array of them", at);
      DF_ASSIGN(uint32_t n, typed(name.get<std::string>(), s, path, depth));
      nodes.push_back(n);
    }
    return nodes.size() == 1 ? Result<uint32_t>(nodes[0]) : any_of(nodes, path + "/type");
  }

 private:
  using Kind = JsonNode::Kind;

  Result<uint32_t> typed(const std::string& type, const ojson& s, const std::string& path, int depth) {
    const std::string at = path.empty() ? "/" : path;
    JsonNode n;
    if (type == "string") {
      n.kind = Kind::String;
    } else if (type == "number") {
      n.kind = Kind::Number;
    } else if (type == "integer") {
      n.kind = Kind::Integer;
    } else if (type == "boolean") {
      n.kind = Kind::Literal;
      n.literals = {"true", "false"};
    } else if (type == "null") {
      n.kind = Kind::Literal;
      n.literals = {"null"};
    } else if (type == "object") {
      return object(s, path, depth);
    } else if (type == "array") {
      return array(s, path, depth);
    } else {
      return make_error("type '{}' (at {}) is not a JSON Schema type", type, at);
    }
    return g_.add(std::move(n));
  }

  Result<uint32_t> object(const ojson& s, const std::string& path, int depth) {
    const std::string at = path.empty() ? "/" : path;
    JsonNode n;
    n.kind = Kind::Object;
    bool extra = true;
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (!it->is_boolean())
        return make_error("'additionalProperties' (at {}) must be a boolean (schemas for it are not supported)", at);
      extra = it->get<bool>();
    }
    const auto props = s.find("properties");
    if (props == s.end()) {
      if (s.contains("required") && !s["required"].empty())
        return make_error("'required' (at {}) names properties that 'properties' does not declare", at);
      // No declared properties: any object, or the empty one.
      n.free = extra;
      if (n.free) n.any = g_.add_any();
      n.first_required = {0};
      return g_.add(std::move(n));
    }
    if (!props->is_object()) return make_error("'properties' (at {}) must be an object", at);
    if (props->size() > JsonGrammar::kMaxCandidates)
      return make_error("'properties' (at {}) declares {} properties; at most {} are supported", at, props->size(),
                        JsonGrammar::kMaxCandidates);
    std::set<std::string> required;
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) return make_error("'required' (at {}) must be an array of property names", at);
      for (const ojson& name : *r) {
        if (!name.is_string()) return make_error("'required' (at {}) must be an array of property names", at);
        if (!props->contains(name.get<std::string>()))
          return make_error("'required' (at {}) names '{}', which 'properties' does not declare", at,
                            name.get<std::string>());
        required.insert(name.get<std::string>());
      }
    }
    for (auto& [name, sub] : props->items()) {
      DF_ASSIGN(uint32_t child, compile(sub, path + "/properties/" + name, depth + 1));
      n.props.push_back({ojson(name).dump(), child, required.count(name) > 0});
    }
    n.first_required.assign(n.props.size() + 1, uint32_t(n.props.size()));
    for (size_t i = n.props.size(); i-- > 0;)
      n.first_required[i] = n.props[i].required ? uint32_t(i) : n.first_required[i + 1];
    return g_.add(std::move(n));
  }

  Result<uint32_t> array(const ojson& s, const std::string& path, int depth) {
    const std::string at = path.empty() ? "/" : path;
    JsonNode n;
    n.kind = Kind::Array;
    if (auto it = s.find("items"); it != s.end()) {
      DF_ASSIGN(n.items, compile(*it, path + "/items", depth + 1));
    } else {
      n.items = g_.add_any();
    }
    for (const char* key : {"minItems", "maxItems"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_number_unsigned() || it->get<uint64_t>() >= UINT32_MAX)
        return make_error("'{}' (at {}) must be a non-negative integer", key, at);
      (std::string(key) == "minItems" ? n.min_items : n.max_items) = uint32_t(it->get<uint64_t>());
    }
    if (n.min_items > n.max_items) return make_error("'minItems' exceeds 'maxItems' (at {})", at);
    return g_.add(std::move(n));
  }

  Result<uint32_t> literals(const ojson& values, const std::string& path) {
    if (values.size() > JsonGrammar::kMaxCandidates)
      return make_error("'{}' has {} values; at most {} are supported", path, values.size(), JsonGrammar::kMaxCandidates);
    JsonNode n;
    n.kind = Kind::Literal;
    for (const ojson& v : values) {
      if (v.is_object() || v.is_array())
        return make_error("'{}' holds an object or array; only strings, numbers, booleans and null are supported",
                          path);
      std::string text = v.dump();
      if (std::find(n.literals.begin(), n.literals.end(), text) == n.literals.end()) n.literals.push_back(text);
    }
    return g_.add(std::move(n));
  }

  // The bytes a node's values can begin with.
  std::vector<uint8_t> first_bytes(uint32_t id) const {
    const JsonNode& n = g_.node(id);
    std::vector<uint8_t> out;
    switch (n.kind) {
      case Kind::Object: return {'{'};
      case Kind::Array: return {'['};
      case Kind::String: return {'"'};
      case Kind::Number:
      case Kind::Integer:
        out = {'-'};
        for (int c = '0'; c <= '9'; ++c) out.push_back(uint8_t(c));
        return out;
      case Kind::Literal:
        for (const std::string& l : n.literals)
          if (std::find(out.begin(), out.end(), uint8_t(l[0])) == out.end()) out.push_back(uint8_t(l[0]));
        return out;
      case Kind::AnyOf:
        for (int c = 0; c < 256; ++c)
          if (n.dispatch[size_t(c)] != JsonGrammar::kNoNode) out.push_back(uint8_t(c));
        return out;
    }
    return out;
  }

  // One AnyOf over `alts`, each first byte going to one alternative. Where several
  // begin with the same byte, one that accepts all their values there takes it (a
  // string over string literals, a number over integers and number literals, merged
  // literal sets); otherwise they cannot be told apart and the schema is refused.
  Result<uint32_t> any_of(const std::vector<uint32_t>& alts, const std::string& path) {
    std::array<std::vector<uint32_t>, 256> claims;
    for (uint32_t a : alts) {
      const JsonNode& n = g_.node(a);
      for (uint8_t b : first_bytes(a)) {
        const uint32_t target = n.kind == Kind::AnyOf ? n.dispatch[b] : a;
        if (std::find(claims[b].begin(), claims[b].end(), target) == claims[b].end()) claims[b].push_back(target);
      }
    }
    JsonNode out;
    out.kind = Kind::AnyOf;
    out.dispatch.fill(JsonGrammar::kNoNode);
    for (int b = 0; b < 256; ++b) {
      const std::vector<uint32_t>& c = claims[size_t(b)];
      if (c.empty()) continue;
      if (c.size() == 1) {
        out.dispatch[size_t(b)] = c[0];
        continue;
      }
      auto only = [&](std::initializer_list<Kind> kinds) {
        return std::all_of(c.begin(), c.end(), [&](uint32_t x) {
          return std::find(kinds.begin(), kinds.end(), g_.node(x).kind) != kinds.end();
        });
      };
      auto find = [&](Kind k) {
        for (uint32_t x : c)
          if (g_.node(x).kind == k) return x;
        return JsonGrammar::kNoNode;
      };
      if (b == '"' && only({Kind::String, Kind::Literal}) && find(Kind::String) != JsonGrammar::kNoNode) {
        out.dispatch[size_t(b)] = find(Kind::String);
      } else if (only({Kind::Number, Kind::Integer, Kind::Literal}) && find(Kind::Number) != JsonGrammar::kNoNode) {
        out.dispatch[size_t(b)] = find(Kind::Number);
      } else if (only({Kind::Literal})) {
        JsonNode lit;
        lit.kind = Kind::Literal;
        for (uint32_t x : c)
          for (const std::string& l : g_.node(x).literals)
            if (uint8_t(l[0]) == b && std::find(lit.literals.begin(), lit.literals.end(), l) == lit.literals.end())
              lit.literals.push_back(l);
        if (lit.literals.size() > JsonGrammar::kMaxCandidates)
          return make_error("'{}' allows more than {} literal values", path, JsonGrammar::kMaxCandidates);
        out.dispatch[size_t(b)] = g_.add(std::move(lit));
      } else {
        return make_error("'{}': two alternatives both begin with '{}' (two objects, two arrays, an integer and "
                          "a string enum, ...); only alternatives that differ in their first character are "
                          "supported",
                          path, char(b));
      }
    }
    return g_.add(std::move(out));
  }

  JsonGrammar& g_;
};

Result<JsonGrammar> JsonGrammar::from_schema(const nlohmann::ordered_json& schema) {
  JsonGrammar g;
  SchemaCompiler c(&g);
  JsonVariant v;
  v.parts.emplace_back();
  DF_ASSIGN(v.parts[0].root, c.compile(schema, "", 0));
  g.variants_.push_back(std::move(v));
  g.starts_ = {0};
  return g;
}

Result<JsonGrammar> JsonGrammar::one_of(const std::vector<std::vector<JsonPiece>>& docs) {
  if (docs.empty() || docs.size() > kMaxChoices)
    return make_error("a grammar holds 1 to {} documents, not {}", kMaxChoices, docs.size());
  std::vector<JsonSegment> segs;
  std::vector<uint32_t> starts;
  for (const std::vector<JsonPiece>& d : docs) {
    starts.push_back(uint32_t(segs.size()));
    segs.push_back(JsonSegment{d, {}, true});
  }
  return build(segs, starts, "document");  // one segment per document: named so
}

namespace {

// The ending's failure function (KMP): border[k], the longest proper border of t[0, k).
std::vector<uint32_t> borders(const std::string& t) {
  std::vector<uint32_t> border(t.size() + 1, 0);
  for (size_t k = 2; k <= t.size(); ++k) {
    uint32_t j = border[k - 1];
    while (j > 0 && t[j] != t[k - 1]) j = border[j];
    border[k] = t[j] == t[k - 1] ? j + 1 : 0;
  }
  return border;
}

}  // namespace

// Checks a choice between `cands` (and the end, where end_ok): each must begin with
// literal text that no other's begins with.
Status JsonGrammar::check_choice(const std::vector<uint32_t>& cands, bool end_ok, const std::string& where,
                                 std::string_view noun) const {
  using Kind = JsonPart::Kind;
  if (cands.size() > kMaxChoices) return make_error("{}: more than {} {}s to choose from", where, kMaxChoices, noun);
  if (cands.size() < 2 && !(cands.size() == 1 && end_ok)) return {};
  for (uint32_t c : cands)
    if (variants_[c].parts[0].kind != Kind::Literal) return make_error("{} {} does not begin with text", noun, c + 1);
  // In byte order a text that begins another comes right before it or before texts it
  // also begins: neighbours tell.
  std::vector<uint32_t> order = cands;
  auto text = [&](uint32_t c) -> const std::string& { return variants_[c].parts[0].text; };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return text(a) < text(b); });
  for (size_t i = 1; i < order.size(); ++i)
    if (text(order[i]).starts_with(text(order[i - 1])))
      return make_error("{} {}'s beginning '{}' and another's, '{}', do not tell them apart", noun, order[i] + 1,
                        text(order[i]), text(order[i - 1]));
  return {};
}

Result<JsonGrammar> JsonGrammar::graph(const std::vector<JsonSegment>& segs, const std::vector<uint32_t>& starts) {
  return build(segs, starts, "segment");
}

Result<JsonGrammar> JsonGrammar::build(const std::vector<JsonSegment>& segs, const std::vector<uint32_t>& starts,
                                       std::string_view noun) {
  using Kind = JsonPart::Kind;
  if (segs.empty() || starts.empty()) return make_error("a grammar needs a {} to start with", noun);
  JsonGrammar g;
  SchemaCompiler c(&g);
  std::map<std::string, uint32_t> compiled;  // a schema's JSON text -> its root
  for (size_t i = 0; i < segs.size(); ++i) {
    JsonVariant v;
    v.end = segs[i].end;
    v.next = segs[i].next;
    for (uint32_t n : v.next)
      if (n >= segs.size()) return make_error("{} {}: no {} {} to follow it", noun, i + 1, noun, n + 1);
    if (v.next.empty() && !v.end) return make_error("{} {} neither ends nor goes on", noun, i + 1);
    for (const JsonPiece& piece : segs[i].pieces) {
      if (piece.kind != Kind::Json && piece.text.empty()) {
        if (piece.kind == Kind::Text) return make_error("{} {}: free text needs an ending", noun, i + 1);
        continue;
      }
      if (piece.kind == Kind::Literal && !v.parts.empty() && v.parts.back().kind == Kind::Literal) {
        v.parts.back().text += piece.text;
        continue;
      }
      JsonPart part{piece.kind, piece.text, 0, {}, false, {}};
      if (piece.kind == Kind::Text) part.border = borders(piece.text);
      if (piece.kind == Kind::Json && !piece.words.empty()) {
        if (piece.words.size() > kMaxCandidates)
          return make_error("{} {}: more than {} words", noun, i + 1, kMaxCandidates);
        JsonNode n;
        n.kind = JsonNode::Kind::Literal;
        n.literals = piece.words;
        part.root = g.add(std::move(n));
        part.bare = true;
      } else if (piece.kind == Kind::Json) {
        const std::string key = piece.schema.dump();
        if (auto it = compiled.find(key); it != compiled.end()) {
          part.root = it->second;
        } else {
          Result<uint32_t> root = c.compile(piece.schema, "", 0);
          if (!root.ok()) return make_error("{} {}: {}", noun, i + 1, root.error().message);
          part.root = compiled[key] = root.value();
        }
      }
      v.parts.push_back(std::move(part));
    }
    if (v.parts.empty()) return make_error("{} {} is empty", noun, i + 1);
    for (size_t k = 0; k + 1 < v.parts.size(); ++k) {
      if (v.parts[k].kind != Kind::Json) continue;
      const JsonPart& next = v.parts[k + 1];
      if (next.kind != Kind::Literal || std::string_view("0123456789.eE+-").find(next.text[0]) != std::string::npos)
        return make_error("{} {}: a value must be followed by text that no number could go on with", noun, i + 1);
    }
    if (!v.next.empty() && v.parts.back().kind == Kind::Json)
      return make_error("{} {} ends with a value but goes on: its end would be ambiguous", noun, i + 1);
    g.variants_.push_back(std::move(v));
  }
  for (uint32_t s : starts)
    if (s >= segs.size()) return make_error("no {} {} to start with", noun, s + 1);
  DF_TRY(g.check_choice(starts, false, "the start", noun));
  for (size_t i = 0; i < segs.size(); ++i)
    DF_TRY(g.check_choice(g.variants_[i].next, g.variants_[i].end, fmt::format("after {} {}", noun, i + 1), noun));
  g.starts_ = starts;
  return g;
}

Result<JsonGrammar> JsonGrammar::one_of(const std::vector<JsonFramed>& docs) {
  using Kind = JsonPart::Kind;
  std::vector<std::vector<JsonPiece>> seqs;
  for (const JsonFramed& d : docs)
    seqs.push_back({{Kind::Literal, d.prefix, nullptr, {}}, {Kind::Json, "", d.schema, {}},
                    {Kind::Literal, d.suffix, nullptr, {}}});
  return one_of(seqs);
}

void JsonGrammar::wrap(std::string prefix, std::string suffix) {
  using Kind = JsonPart::Kind;
  for (size_t i = 0; i < variants_.size(); ++i) {
    JsonVariant& v = variants_[i];
    if (!prefix.empty() && std::find(starts_.begin(), starts_.end(), uint32_t(i)) != starts_.end()) {
      if (v.parts.front().kind != Kind::Literal) v.parts.insert(v.parts.begin(), JsonPart{Kind::Literal, "", 0, {}, false, {}});
      JsonPart& p = v.parts.front();
      p.text = prefix + p.text;
      for (JsonSpan& t : p.tokens) t.at += uint32_t(prefix.size());
    }
    if (!suffix.empty() && v.next.empty()) {
      if (v.parts.back().kind != Kind::Literal) v.parts.push_back(JsonPart{Kind::Literal, "", 0, {}, false, {}});
      v.parts.back().text += suffix;
    }
  }
}

void JsonGrammar::force_token(std::string_view text, int32_t id) {
  if (text.empty()) return;
  for (JsonVariant& v : variants_)
    for (JsonPart& p : v.parts) {
      if (p.kind != JsonPart::Kind::Literal) continue;
      for (size_t at = p.text.find(text); at != std::string::npos; at = p.text.find(text, at + text.size()))
        p.tokens.push_back(JsonSpan{uint32_t(at), uint32_t(text.size()), id});
      std::sort(p.tokens.begin(), p.tokens.end(), [](const JsonSpan& a, const JsonSpan& b) { return a.at < b.at; });
    }
}

}  // namespace deltafin
