// Structured output: the JSON a constrained request may produce, as a small grammar
// of nodes that JsonState (json_constraint.h) walks byte by byte. Two sources:
//
//   JsonGrammar::any_object()        any JSON object (response_format json_object)
//   JsonGrammar::from_schema(schema) a subset of JSON Schema (json_schema)
//
// The schema subset: `type` (object, array, string, number, integer, boolean, null,
// or a list of these), `properties` + `required` (properties are generated in the
// schema's order; required ones always, optional ones may be skipped),
// `additionalProperties` (a boolean: undeclared properties are never generated, which
// every such schema allows), `enum` and `const` of scalars, `items`,
// `minItems`/`maxItems`, nested objects and arrays, and `anyOf` whose alternatives
// begin with different characters (an object and an array, a string and null; two
// objects cannot be told apart at their first byte and are refused). An object
// without `properties` is any object, an array without `items` holds any values, a
// schema without `type` is any value. Annotations (title, description, $schema,
// default, examples, ...) are ignored; any other keyword (pattern, format, $ref,
// minLength, oneOf, ...) is an error naming it and where it is.
//
// A grammar may also frame its document in literal text (a tool call's tags) and hold
// several framed documents, one of which the reply is (a call of any of several tools,
// each with its own arguments): the literal text decides which. More generally it is a
// graph of segments (JsonGrammar::graph): each a run of parts, then one of its
// successors (again told apart by their first literal text) or the end, which makes
// optional pieces and repeats (a call's optional parameters, several calls) possible.
//
// Immutable once built: one grammar serves every choice of a request, from any thread.
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deltafin {

struct JsonNode {
  enum class Kind : uint8_t { Object, Array, String, Number, Integer, Literal, AnyOf };
  Kind kind = Kind::String;

  // Object: the declared properties in generation order. A key is the property name
  // as JSON text, quotes included; first_required[i] is the first required property
  // at index >= i (props.size() when none), so size() == props.size() + 1.
  struct Prop {
    std::string key;
    uint32_t node = 0;
    bool required = false;
  };
  std::vector<Prop> props;
  std::vector<uint32_t> first_required;
  bool free = false;  // Object: any keys, any values (no properties declared)
  uint32_t any = 0;   // free Object: the node of its values

  // Array.
  uint32_t items = 0;
  uint32_t min_items = 0, max_items = UINT32_MAX;

  // Literal: the allowed values as compact JSON text ("\"red\"", "1", "true", ...).
  std::vector<std::string> literals;

  // AnyOf: the alternative that begins with a byte (kNoNode: none does).
  std::array<uint32_t, 256> dispatch{};
};

// Bytes [at, at + len) of a literal text that must come as the single token `id` (a
// control token such as <|tool_call_begin|>, which spelling it out byte by byte is not).
struct JsonSpan {
  uint32_t at = 0, len = 0;
  int32_t id = -1;
};

// A piece of what the grammar allows, in order: literal text (a tool call's tags), a
// JSON value (a node), or free text that ends with `text` (a parameter's value and the
// tag that closes it: the first occurrence ends it, and is part of it).
struct JsonPart {
  enum class Kind : uint8_t { Literal, Json, Text };
  Kind kind = Kind::Json;
  std::string text;              // Literal: the bytes; Text: its ending
  uint32_t root = 0;             // Json
  std::vector<JsonSpan> tokens;  // Literal: where whole tokens must come, by position
  bool bare = false;             // Json: no whitespace before the value (words as written)
  std::vector<uint32_t> border;  // Text: border[k], the longest proper border of text[0, k)
};

// A segment of what the grammar allows: its parts in order, then one of the segments
// `next` or, where `end`, nothing (the document may end there).
struct JsonVariant {
  std::vector<JsonPart> parts;
  std::vector<uint32_t> next;
  bool end = true;
};

// A document to compile into a grammar of several (JsonGrammar::one_of): a JSON value
// between literal text.
struct JsonFramed {
  std::string prefix;
  nlohmann::ordered_json schema;
  std::string suffix;
};

// A piece of a document to compile (JsonGrammar::one_of): literal text, a value
// following a JSON schema (or, with `words`, one of these texts as they are: an enum
// a format writes unquoted), or free text with its ending.
struct JsonPiece {
  JsonPart::Kind kind = JsonPart::Kind::Literal;
  std::string text;
  nlohmann::ordered_json schema;
  std::vector<std::string> words;
};

// A segment to compile (JsonGrammar::graph): its pieces, then one of the segments
// `next` (by index) or, where `end`, the end of the document.
struct JsonSegment {
  std::vector<JsonPiece> pieces;
  std::vector<uint32_t> next;
  bool end = false;
};

class JsonGrammar {
 public:
  static constexpr uint32_t kNoNode = UINT32_MAX;
  // Literal sets and objects hold at most this many candidates (a 64-bit mask).
  static constexpr size_t kMaxCandidates = 64;
  // A choice between segments (or documents) has at most this many.
  static constexpr size_t kMaxChoices = 256;
  // Schemas nest at most this deep (JsonState caps documents at kMaxDepth).
  static constexpr int kMaxSchemaDepth = 32;

  static JsonGrammar any_object();
  // Errors name the keyword and the schema path, e.g. "keyword 'pattern' (at
  // /properties/id) is not supported".
  static Result<JsonGrammar> from_schema(const nlohmann::ordered_json& schema);
  // Any one of `docs` (at most kMaxChoices). With several, each begins with literal
  // text and none of those is a prefix of another's (the text decides the document).
  // A value must be followed by literal text or nothing, and that text may not begin
  // with a byte that could go on a number (its end must be unambiguous). Errors name
  // the document.
  static Result<JsonGrammar> one_of(const std::vector<std::vector<JsonPiece>>& docs);
  static Result<JsonGrammar> one_of(const std::vector<JsonFramed>& docs);
  // A document is one of the segments `starts`, then one of its successors, and so on
  // until one that may end does. Where a choice is open (several candidates, or one
  // and the end) each candidate begins with literal text that is no prefix of
  // another's; a segment followed by another ends with literal or free text (never a
  // value, whose end would be ambiguous); one that has no successor may end. At most
  // kMaxChoices candidates per choice. Schemas that are the same JSON compile once.
  static Result<JsonGrammar> graph(const std::vector<JsonSegment>& segs, const std::vector<uint32_t>& starts);

  // Puts literal text around every document (before each start segment, after each
  // segment that ends without successors; a tool call's tags). For tests and
  // one-document grammars.
  void wrap(std::string prefix, std::string suffix);
  // Where `text` occurs in the literal text, it must come as the single token `id`.
  void force_token(std::string_view text, int32_t id);

  size_t n_variants() const { return variants_.size(); }
  const JsonVariant& variant(size_t i) const { return variants_[i]; }
  const std::vector<uint32_t>& starts() const { return starts_; }
  const JsonNode& node(uint32_t i) const { return nodes_[i]; }
  size_t size() const { return nodes_.size(); }

 private:
  friend class SchemaCompiler;
  uint32_t add(JsonNode n);
  uint32_t add_any();  // the "any value" node and its children
  // graph() with errors naming a segment `noun` (one_of: "document").
  static Result<JsonGrammar> build(const std::vector<JsonSegment>& segs, const std::vector<uint32_t>& starts,
                                   std::string_view noun);
  Status check_choice(const std::vector<uint32_t>& cands, bool end_ok, const std::string& where,
                      std::string_view noun) const;

  std::vector<JsonNode> nodes_;
  std::vector<JsonVariant> variants_;
  std::vector<uint32_t> starts_;
  uint32_t any_ = kNoNode;  // built on first use
};

}  // namespace deltafin
