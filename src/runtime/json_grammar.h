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
// Immutable once built: one grammar serves every choice of a request, from any thread.
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
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

class JsonGrammar {
 public:
  static constexpr uint32_t kNoNode = UINT32_MAX;
  // Literal sets and objects hold at most this many candidates (a 64-bit mask).
  static constexpr size_t kMaxCandidates = 64;
  // Schemas nest at most this deep (JsonState caps documents at kMaxDepth).
  static constexpr int kMaxSchemaDepth = 32;

  static JsonGrammar any_object();
  // Errors name the keyword and the schema path, e.g. "keyword 'pattern' (at
  // /properties/id) is not supported".
  static Result<JsonGrammar> from_schema(const nlohmann::ordered_json& schema);

  uint32_t root() const { return root_; }
  // Literal text around the document: bytes before it and after it (a tool call's
  // tags, "<tool_call>\n" and "\n</tool_call>"). Empty for response_format. With a
  // suffix the root must be an object or an array (its end is then unambiguous).
  std::string prefix, suffix;
  const JsonNode& node(uint32_t i) const { return nodes_[i]; }
  size_t size() const { return nodes_.size(); }

 private:
  friend class SchemaCompiler;
  uint32_t add(JsonNode n);
  uint32_t add_any();  // the "any value" node and its children

  std::vector<JsonNode> nodes_;
  uint32_t root_ = 0;
  uint32_t any_ = kNoNode;  // built on first use
};

}  // namespace deltafin
