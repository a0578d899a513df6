#include "jinja/jinja.h"

#include "jinja/jinja_interp.h"
#include "jinja/jinja_lexer.h"
#include "jinja/jinja_parser.h"

namespace deltafin::jinja {

namespace {

Error to_error(const JinjaError& e) {
  if (e.line > 0) return make_error("line {}: {}", e.line, e.message);
  return Error{e.message};
}

std::tm local_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

Result<Template> Template::parse(const std::string& source) {
  try {
    Template t;
    t.program_ = std::make_shared<const std::vector<NodePtr>>(jinja::parse(tokenize(source)));
    return t;
  } catch (const JinjaError& e) {
    return to_error(e);
  }
}

Result<std::string> Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object() && !context.is_null()) return Error{"template context must be a JSON object"};
  try {
    Interpreter interp(options.now ? options.now : Clock(local_now));
    auto env = std::make_shared<Env>();
    interp.setup_globals(*env);
    if (context.is_object()) {
      for (const auto& [key, value] : context.items()) {
        if (env->has_own(key)) return make_error("Variable already declared: {}", key);
        env->set(key, from_json(value));
      }
    }
    return interp.run(*program_, env);
  } catch (const JinjaError& e) {
    return to_error(e);
  }
}

}  // namespace deltafin::jinja
