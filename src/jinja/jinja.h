// A Jinja2 template engine that renders chat templates byte-exactly as the Hugging
// Face JS reference renderer (npm @huggingface/jinja, used by transformers.js)
// does, quirks included: it is checked against that renderer's output on real
// templates (tests/templates/). Constructs the reference does not support fail with
// an error naming the template line instead of rendering something else.
//
//   auto t = jinja::Template::parse(source);           // lex + parse once
//   auto text = t->render(context_json);               // render many times
//
// Layout: jinja_lexer (tokens, whitespace control), jinja_parser (AST),
// jinja_interp (statements, operators, macros), jinja_filters, jinja_builtins
// (tests, methods, globals), jinja_value (runtime values, JSON), jinja_text
// (UTF-8/UTF-16 and JS string/number semantics).
//
// Thread safety: a parsed Template is immutable; render() may run concurrently.
#pragma once
#include <nlohmann/json.hpp>

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace deltafin::jinja {

struct Node;

struct RenderOptions {
  // The local time strftime_now() formats; default: the system clock, local zone.
  std::function<std::tm()> now;
};

class Template {
 public:
  // Errors read "line N: <message>".
  static Result<Template> parse(const std::string& source);

  // Renders with `context` (a JSON object) as the global variables. Keys of
  // objects keep their order (use ordered_json; a plain nlohmann::json converts,
  // with its keys sorted).
  Result<std::string> render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> program_;
};

}  // namespace deltafin::jinja
