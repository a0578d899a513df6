#include "server/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "tokenizer/unicode.h"

namespace deltafin::server {

json ApiError::body() const {
  json e;
  e["message"] = unicode::sanitize_utf8(message);  // it may quote a request's bytes
  e["type"] = type;
  e["param"] = param.empty() ? json(nullptr) : json(unicode::sanitize_utf8(param));
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return json{{"error", e}};
}

std::string make_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  const auto t = std::chrono::system_clock::now().time_since_epoch().count();
  // OpenAI's forms: chatcmpl-..., cmpl-..., and call_..., resp_..., msg_... (the others)
  const std::string_view p(prefix);
  return fmt::format("{}{}{:x}{:04x}", prefix, p == "chatcmpl" || p == "cmpl" ? "-" : "_",
                     uint64_t(t) & 0xffffffffffULL, counter++ & 0xffff);
}

json usage_json(int n_prompt, int n_generated, int n_cached) {
  return json{{"prompt_tokens", n_prompt},
              {"completion_tokens", n_generated},
              {"total_tokens", n_prompt + n_generated},
              {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
}

namespace {
// The token's text as a JSON string: its bytes as UTF-8, U+FFFD for bytes that are
// only part of a character (the exact bytes go in "bytes").
json token_text(const std::string& piece) { return unicode::sanitize_utf8(piece); }
json byte_list(const std::string& piece) {
  json b = json::array();
  for (char c : piece) b.push_back(int(uint8_t(c)));
  return b;
}
}  // namespace

json chat_logprobs_json(const std::vector<TokenLogprob>& lps, const PieceFn& piece) {
  json content = json::array();
  for (const TokenLogprob& t : lps) {
    const std::string p = piece(t.id);
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string q = piece(id);
      top.push_back(json{{"token", token_text(q)}, {"logprob", lp}, {"bytes", byte_list(q)}});
    }
    content.push_back(json{{"token", token_text(p)}, {"logprob", t.logprob}, {"bytes", byte_list(p)}, {"top_logprobs", top}});
  }
  return json{{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<TokenLogprob>& lps, const PieceFn& piece) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(token_text(piece(t.id)));
    const bool none = std::isnan(t.logprob);
    token_lps.push_back(none ? json(nullptr) : json(t.logprob));
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_text(piece(id)).get<std::string>()] = lp;
    tops.push_back(none ? json(nullptr) : top);
    offsets.push_back(t.offset);
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::string openai_finish_reason(const std::string& reason) { return reason == "length" ? "length" : "stop"; }

ApiError bad_request(const std::string& param, const std::string& message) {
  ApiError e;
  e.status = 400;
  e.param = param;
  e.message = message;
  return e;
}

namespace {

using Err = std::optional<ApiError>;

ApiError bad(const std::string& param, const std::string& message) { return bad_request(param, message); }

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

// A number in [lo, hi] under `key`, if present and not null.
Err number(const json& j, const char* key, double lo, double hi, float* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number()) return bad(key, fmt::format("'{}' must be a number, not {}", key, type_name(*it)));
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) return bad(key, fmt::format("'{}' is {} but must be between {} and {}", key, v, lo, hi));
  *out = float(v);
  return {};
}

Err integer(const json& j, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number_integer() && !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()))
    return bad(key, fmt::format("'{}' must be an integer, not {}", key, it->is_number() ? it->dump() : type_name(*it)));
  const double d = it->get<double>();
  if (d < double(lo) || d > double(hi) || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(hi)))
    return bad(key, fmt::format("'{}' is {} but must be between {} and {}", key, d, lo, hi));
  *out = it->is_number_unsigned() ? int64_t(it->get<uint64_t>()) : it->get<int64_t>();
  return {};
}

Err boolean(const json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_boolean()) return bad(key, fmt::format("'{}' must be a boolean, not {}", key, type_name(*it)));
  *out = it->get<bool>();
  return {};
}

#define API_TRY(expr)          \
  do {                         \
    if (Err e_ = (expr)) return e_; \
  } while (0)

Err parse_body(const std::string& body, json* out) { return parse_json_body(body, out); }

// Token ids in 0..n_vocab-1 from a JSON array under `param`.
Err token_ids(const json& arr, const char* param, const char* not_ids, int64_t n_vocab, std::vector<int32_t>* out) {
  for (const json& t : arr) {
    if (!t.is_number_integer()) return bad(param, not_ids);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      return bad(param, fmt::format("{} token id {} is out of range (the vocabulary has {} tokens)", param, id, n_vocab));
    out->push_back(int32_t(id));
  }
  return {};
}

// response_format: {"type": "text"}, {"type": "json_object"} or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict", "description"}}. The schema's subset is
// JsonGrammar's; "strict" changes nothing (undeclared properties are never generated).
Err response_format(const json& rf, GenParams* g) {
  const std::string p = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return bad(p, "'response_format' must be an object with a string 'type' (text, json_object or json_schema)");
  const std::string type = rf["type"].get<std::string>();
  if (type == "json_object") {
    g->json_grammar = std::make_shared<const JsonGrammar>(JsonGrammar::any_object());
  } else if (type == "json_schema") {
    const std::string pj = p + ".json_schema", ps = pj + ".schema";
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object())
      return bad(pj, fmt::format("'{}' must be an object with a 'schema' (and a 'name')", pj));
    for (const char* key : {"name", "description"})
      if (js->contains(key) && !(*js)[key].is_string())
        return bad(pj + "." + key, fmt::format("'{}.{}' must be a string", pj, key));
    if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null())
      return bad(pj + ".strict", fmt::format("'{}.strict' must be a boolean", pj));
    auto schema = js->find("schema");
    if (schema == js->end() || !(schema->is_object() || schema->is_boolean()))
      return bad(ps, fmt::format("'{}' must be a JSON Schema object", ps));
    Result<JsonGrammar> grammar = JsonGrammar::from_schema(*schema);
    if (!grammar.ok()) return bad(ps, fmt::format("'{}': {}", ps, grammar.error().message));
    g->json_grammar = std::make_shared<const JsonGrammar>(std::move(grammar).value());
  } else if (type != "text") {
    return bad(p, fmt::format("response_format type '{}' is not supported (text, json_object or json_schema)", type));
  }
  g->response_format = rf;
  return {};
}

// Fields both endpoints take.
Err parse_common(const json& j, int64_t n_vocab, bool chat, const SamplingParams& base, GenParams* g) {
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return bad("model", fmt::format("'model' must be a string, not {}", type_name(*it)));
    g->model = it->get<std::string>();
  }
  std::optional<int64_t> mt;
  API_TRY(integer(j, "max_tokens", chat ? 1 : 0, 1 << 30, &mt));  // completions: 0 with echo
  if (chat) API_TRY(integer(j, "max_completion_tokens", 1, 1 << 30, &mt));
  if (mt) g->max_tokens = int(*mt);
  SamplingParams& sp = g->sampling;
  sp = base;
  API_TRY(number(j, "temperature", 0.0, 2.0, &sp.temperature));
  API_TRY(number(j, "top_p", 0.0, 1.0, &sp.top_p));
  API_TRY(number(j, "min_p", 0.0, 1.0, &sp.min_p));
  API_TRY(number(j, "presence_penalty", -2.0, 2.0, &sp.presence_penalty));
  API_TRY(number(j, "frequency_penalty", -2.0, 2.0, &sp.frequency_penalty));
  API_TRY(number(j, "repeat_penalty", 0.0, 10.0, &sp.repeat_penalty));
  std::optional<int64_t> v;
  API_TRY(integer(j, "top_k", 0, 1 << 30, &v));
  if (v) sp.top_k = int(*v);
  v.reset();
  API_TRY(integer(j, "seed", INT64_MIN, INT64_MAX, &v));
  if (v) sp.seed = *v == -1 ? SamplingParams::kRandomSeed : uint64_t(*v);  // -1: random, as llama.cpp's server takes it
  v.reset();
  API_TRY(integer(j, "n", 1, 128, &v));
  if (v) g->n = int(*v);
  if (auto it = j.find("logit_bias"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("logit_bias", "'logit_bias' must be an object mapping token ids to biases");
    for (auto& [k, b] : it->items()) {
      char* end = nullptr;
      const long long id = std::strtoll(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || id >= n_vocab)
        return bad("logit_bias", fmt::format("logit_bias key '{}' is not a token id (0..{})", k, n_vocab - 1));
      if (!b.is_number() || b.get<double>() < -100 || b.get<double>() > 100)
        return bad("logit_bias", fmt::format("logit_bias for token {} must be a number in -100..100", k));
      sp.logit_bias[int32_t(id)] = b.get<float>();
    }
  }
  // What the command line checks too (top_p 0, repeat_penalty 0, NaN).
  if (auto problem = check_sampling(sp))
    return bad(problem->field, fmt::format("'{}' {}", problem->field, problem->problem));
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      g->stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 16) return bad("stop", fmt::format("'stop' has {} strings; at most 16 are allowed", it->size()));
      for (auto& s : *it) {
        if (!s.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
        g->stop.push_back(s.get<std::string>());
      }
    } else {
      return bad("stop", fmt::format("'stop' must be a string or an array of strings, not {}", type_name(*it)));
    }
    for (auto& s : g->stop)
      if (s.empty()) return bad("stop", "stop strings must not be empty");
  }
  API_TRY(boolean(j, "stream", &g->stream));
  API_TRY(boolean(j, "ignore_eos", &g->ignore_eos));
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("stream_options", "'stream_options' must be an object");
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null() && !u->is_boolean())
      return bad("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
    API_TRY(boolean(*it, "include_usage", &g->include_usage));
  }
  if (chat) {
    // logprobs: true, and top_logprobs: how many alternatives per token.
    bool want = false;
    API_TRY(boolean(j, "logprobs", &want));
    std::optional<int64_t> top;
    API_TRY(integer(j, "top_logprobs", 0, kMaxTopLogprobs, &top));
    if (top && !want) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (want) g->logprobs = top ? int(*top) : 0;
  } else {
    // logprobs: how many alternatives per token (0: the chosen token's alone).
    std::optional<int64_t> top;
    API_TRY(integer(j, "logprobs", 0, kMaxTopLogprobs, &top));
    if (top) g->logprobs = int(*top);
  }
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) API_TRY(response_format(*it, g));
  return {};
}

// OpenAI content (string, null, or an array of text parts) -> string or null.
Err message_content(const json& c, size_t i, json* out) {
  const std::string param = fmt::format("messages[{}].content", i);
  if (c.is_null() || c.is_string()) {
    *out = c;
    return {};
  }
  if (!c.is_array()) return bad(param, fmt::format("'{}' must be a string or an array of parts, not {}", param, type_name(c)));
  std::string text;
  for (auto& part : c) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return bad(param, fmt::format("each part of '{}' must be an object with a 'type'", param));
    if (part["type"] != "text")
      return bad(param, fmt::format("content parts of type '{}' are not supported (only 'text')",
                                    part["type"].get<std::string>()));
    if (!part.contains("text") || !part["text"].is_string())
      return bad(param, fmt::format("a text part of '{}' needs a string 'text'", param));
    text += part["text"].get<std::string>();
  }
  *out = text;
  return {};
}

}  // namespace

SamplingParams api_default_sampling() {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 1.0f;
  sp.top_k = 0;
  sp.min_p = 0.0f;
  return sp;
}

std::optional<ApiError> parse_chat_request(const std::string& body, int64_t n_vocab, ChatRequest* out,
                                           const SamplingParams& base) {
  json j;
  API_TRY(parse_body(body, &j));
  API_TRY(parse_common(j, n_vocab, true, base, &out->gen));
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return bad("messages", "'messages' is required");
  if (!it->is_array()) return bad("messages", fmt::format("'messages' must be an array, not {}", type_name(*it)));
  if (it->empty()) return bad("messages", "'messages' must not be empty");
  out->messages = json::array();
  static const char* roles[] = {"system", "developer", "user", "assistant", "tool"};
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object()) return bad(fmt::format("messages[{}]", i), fmt::format("messages[{}] must be an object", i));
    if (!m.contains("role") || !m["role"].is_string())
      return bad(fmt::format("messages[{}].role", i), fmt::format("messages[{}] needs a string 'role'", i));
    const std::string role = m["role"].get<std::string>();
    if (std::find(std::begin(roles), std::end(roles), role) == std::end(roles))
      return bad(fmt::format("messages[{}].role", i),
                 fmt::format("messages[{}].role '{}' is not one of system, developer, user, assistant, tool", i, role));
    json msg = m;
    json content = nullptr;
    if (m.contains("content")) API_TRY(message_content(m["content"], i, &content));
    if (content.is_null() && !(role == "assistant" && m.contains("tool_calls")))
      return bad(fmt::format("messages[{}].content", i), fmt::format("messages[{}] needs a 'content'", i));
    // An assistant's tool calls come with content null (as OpenAI clients send them
    // back): "" for the templates, many of which test or concatenate it as a string.
    msg["content"] = content.is_null() ? json("") : content;
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!tc->is_array()) return bad(fmt::format("messages[{}].tool_calls", i), "'tool_calls' must be an array");
      json calls = *tc;
      for (auto& c : calls) {
        // Templates want the arguments as an object; OpenAI sends a JSON string.
        if (c.is_object() && c.contains("function") && c["function"].is_object() &&
            c["function"].contains("arguments") && c["function"]["arguments"].is_string()) {
          // Within the body's limits (a string may hold JSON nested deeper than the body);
          // what does not parse stays the string.
          json args;
          if (!parse_json_bounded(c["function"]["arguments"].get<std::string>(), &args))
            c["function"]["arguments"] = std::move(args);
        }
      }
      msg["tool_calls"] = calls;
    }
    out->messages.push_back(std::move(msg));
  }
  out->tools = nullptr;
  if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
    if (!t->is_array()) return bad("tools", fmt::format("'tools' must be an array, not {}", type_name(*t)));
    // OpenAI's shape, {"type": "function", "function": {"name", "parameters"?, ...}}: a
    // call names its tool, so the names must be there and tell the tools apart.
    std::set<std::string> names;
    for (size_t i = 0; i < t->size(); ++i) {
      const json& tool = (*t)[i];
      if (!tool.is_object()) return bad("tools", fmt::format("tools[{}] must be an object", i));
      if (tool.value("type", json()) != "function")
        return bad("tools", fmt::format("tools[{}].type must be \"function\"", i));
      const auto fn = tool.find("function");
      if (fn == tool.end() || !fn->is_object())
        return bad("tools", fmt::format("tools[{}].function must be an object", i));
      const auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
        return bad("tools", fmt::format("tools[{}].function.name must be a non-empty string", i));
      if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null() && !p->is_object())
        return bad("tools", fmt::format("tools[{}].function.parameters must be an object (a JSON schema)", i));
      if (!names.insert(name->get<std::string>()).second)
        return bad("tools", fmt::format("tools[{}]: the function name '{}' is given twice", i, name->get<std::string>()));
    }
    if (!t->empty()) out->tools = *t;
  }
  out->tool_choice = nullptr;
  if (auto c = j.find("tool_choice"); c != j.end() && !c->is_null()) {
    const bool named = c->is_object() && c->value("type", json()) == "function" && c->contains("function") &&
                       (*c)["function"].is_object() && (*c)["function"].contains("name") &&
                       (*c)["function"]["name"].is_string();
    if (!named && !(c->is_string() && (*c == "none" || *c == "auto" || *c == "required")))
      return bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (*c != "none" && out->tools.is_null())
      return bad("tool_choice", "'tool_choice' needs 'tools' (there are no tools to choose from)");
    if (named) {
      const json& name = (*c)["function"]["name"];
      const bool known = std::any_of(out->tools.begin(), out->tools.end(), [&](const json& t) {
        return t.contains("function") && t["function"].is_object() && t["function"].value("name", json()) == name;
      });
      if (!known)
        return bad("tool_choice", fmt::format("tool_choice names the function '{}', which is not in 'tools'",
                                              name.get<std::string>()));
    }
    out->tool_choice = *c;
    if ((*c == "required" || named) && out->gen.json_grammar)
      return bad("tool_choice", "'tool_choice' \"required\" or a named function and a JSON 'response_format' cannot "
                                "both decide the reply");
  }
  if (auto p = j.find("parallel_tool_calls"); p != j.end() && !p->is_null()) {
    if (!p->is_boolean()) return bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    out->parallel_tool_calls = p->get<bool>();
  }
  out->reasoning_effort = nullptr;
  if (auto r = j.find("reasoning_effort"); r != j.end() && !r->is_null()) {
    if (!r->is_string() || r->get<std::string>().empty())
      return bad("reasoning_effort", "'reasoning_effort' must be a string such as \"low\", \"medium\" or \"high\"");
    out->reasoning_effort = *r;
  }
  out->template_kwargs = nullptr;
  if (auto k = j.find("chat_template_kwargs"); k != j.end() && !k->is_null()) {
    if (!k->is_object()) return bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    out->template_kwargs = *k;
  }
  return {};
}

std::optional<ApiError> parse_completion_request(const std::string& body, int64_t n_vocab, CompletionRequest* out,
                                                 const SamplingParams& base) {
  json j;
  API_TRY(parse_body(body, &j));
  API_TRY(parse_common(j, n_vocab, false, base, &out->gen));
  if (!out->gen.max_tokens) out->gen.max_tokens = 16;  // the OpenAI default for completions
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return bad("prompt", "'prompt' is required");
  json p = *it;
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = p[0];
  if (p.is_string()) {
    out->prompt = p.get<std::string>();
    if (out->prompt.empty()) return bad("prompt", "'prompt' must not be empty");
  } else if (p.is_array() && !p.empty()) {
    API_TRY(token_ids(p, "prompt", "'prompt' must be a string, an array of one string, or an array of token ids",
                      n_vocab, &out->prompt_tokens));
  } else {
    return bad("prompt", "'prompt' must be a non-empty string, an array of one string, or an array of token ids "
                         "(several prompts in one request are not supported)");
  }
  GenParams& g = out->gen;
  API_TRY(boolean(j, "echo", &g.echo));
  if (*g.max_tokens == 0 && !g.echo)
    return bad("max_tokens", "'max_tokens' is 0 but must be at least 1 (0 only with 'echo': the prompt's logprobs)");
  if (g.echo && g.n > 1) return bad("echo", "'echo' is supported with one choice only (n = 1)");
  if (auto s = j.find("suffix"); s != j.end() && !s->is_null()) return bad("suffix", "'suffix' is not supported");
  std::optional<int64_t> best_of;
  API_TRY(integer(j, "best_of", 1, 1 << 30, &best_of));
  if (best_of && *best_of != 1) return bad("best_of", "only best_of = 1 is supported");
  return {};
}

std::optional<ApiError> parse_tokenize_request(const std::string& body, TokenizeRequest* out) {
  json j;
  API_TRY(parse_body(body, &j));
  auto it = j.find("content");
  if (it == j.end() || it->is_null()) return bad("content", "'content' is required: the text to tokenize");
  if (!it->is_string()) return bad("content", fmt::format("'content' must be a string, not {}", type_name(*it)));
  out->content = it->get<std::string>();
  API_TRY(boolean(j, "add_special", &out->add_special));
  API_TRY(boolean(j, "parse_special", &out->parse_special));
  API_TRY(boolean(j, "with_pieces", &out->with_pieces));
  return {};
}

std::optional<ApiError> parse_detokenize_request(const std::string& body, int64_t n_vocab, std::vector<int32_t>* out) {
  json j;
  API_TRY(parse_body(body, &j));
  auto it = j.find("tokens");
  if (it == j.end() || it->is_null()) return bad("tokens", "'tokens' is required: an array of token ids");
  if (!it->is_array()) return bad("tokens", fmt::format("'tokens' must be an array of token ids, not {}", type_name(*it)));
  return token_ids(*it, "tokens", "'tokens' must be an array of token ids (integers)", n_vocab, out);
}

json tokenize_json(const std::vector<int32_t>& ids, bool with_pieces, const PieceFn& piece) {
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string p = piece(id);
    tokens.push_back(json{{"id", id}, {"piece", unicode::is_valid_utf8(p) ? json(p) : byte_list(p)}});
  }
  return json{{"tokens", tokens}};
}

namespace {

// Builds the document from the parser's events, in time linear in the text: nlohmann's
// own builder inserts each key of an ordered object with a linear search (quadratic in
// the keys); this one indexes an object's keys once it has more than a few. Refuses
// nesting past kMaxJsonDepth and objects past kMaxJsonKeys.
class BoundedBuilder final : public nlohmann::json_sax<json> {
 public:
  explicit BoundedBuilder(json* root) : root_(root) {}
  std::string why;     // set when it stops
  bool limit = false;  // at a limit (else the text is not JSON)

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t v, const string_t&) override { return put(v); }
  bool string(string_t& v) override { return put(std::move(v)); }
  bool binary(binary_t& v) override { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (++open_.back().keys > kMaxJsonKeys) {
      why = fmt::format("an object has more than {} keys (the limit)", kMaxJsonKeys);
      limit = true;
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    why = unicode::sanitize_utf8(e.what());  // it quotes the bytes last read: they need not be UTF-8
    return false;
  }

 private:
  static constexpr size_t kIndexFrom = 16;  // keys an object is searched linearly up to
  struct Open {
    json* value;
    size_t keys = 0;
    std::unique_ptr<std::unordered_map<std::string, size_t>> index;  // key -> position
  };

  // The value into its place: the root, the array's end, or under the pending key (a
  // key given twice keeps its first place and takes the last value, as nlohmann's).
  template <class V>
  bool put(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  template <class V>
  json* place(V&& v) {
    if (open_.empty()) {
      *root_ = json(std::forward<V>(v));
      return root_;
    }
    Open& top = open_.back();
    if (top.value->is_array()) {
      json::array_t& a = top.value->get_ref<json::array_t&>();
      a.emplace_back(std::forward<V>(v));
      return &a.back();
    }
    // The ordered object as the vector it is (its own operator[] and emplace search).
    json::object_t::Container& o = top.value->get_ref<json::object_t&>();
    size_t at = o.size();
    if (top.index) {
      if (auto it = top.index->find(key_); it != top.index->end()) at = it->second;
    } else {
      for (size_t i = 0; i < o.size(); ++i)
        if (o[i].first == key_) {
          at = i;
          break;
        }
    }
    if (at < o.size()) {
      o[at].second = json(std::forward<V>(v));
      return &o[at].second;
    }
    o.emplace_back(key_, json(std::forward<V>(v)));
    if (top.index) {
      top.index->emplace(std::move(key_), at);
    } else if (o.size() > kIndexFrom) {
      top.index = std::make_unique<std::unordered_map<std::string, size_t>>();
      for (size_t i = 0; i < o.size(); ++i) top.index->emplace(o[i].first, i);
    }
    return &o[at].second;
  }
  bool open(json&& empty) {
    if (open_.size() >= size_t(kMaxJsonDepth)) {
      why = fmt::format("arrays and objects are nested more than {} deep (the limit)", kMaxJsonDepth);
      limit = true;
      return false;
    }
    json* v = place(std::move(empty));
    open_.push_back(Open{v, 0, nullptr});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  json* root_;
  std::string key_;
  std::vector<Open> open_;
};

}  // namespace

std::optional<std::string> parse_json_bounded(std::string_view text, json* out, bool* over_limit) {
  *out = nullptr;
  BoundedBuilder b(out);
  if (over_limit) *over_limit = false;
  if (!json::sax_parse(text, &b)) {
    *out = nullptr;
    if (over_limit) *over_limit = b.limit;
    return b.why.empty() ? std::string("the JSON is malformed") : b.why;
  }
  return {};
}

std::optional<ApiError> parse_json_body(const std::string& body, json* out) {
  if (body.empty()) return bad("", "the request body is empty; send a JSON object");
  bool limit = false;
  if (std::optional<std::string> why = parse_json_bounded(body, out, &limit))
    return bad("", limit ? fmt::format("the request body's JSON is over a limit: {}", *why)
                         : fmt::format("the request body is not valid JSON: {}", *why));
  if (!out->is_object()) return bad("", fmt::format("the request body must be a JSON object, not {}", type_name(*out)));
  return {};
}

}  // namespace deltafin::server
