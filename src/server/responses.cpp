#include "server/responses.h"

#include <fmt/format.h>

namespace deltafin::server {

namespace {

bool given(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A content's text: a string, or an array of text parts (input_text, output_text or
// text) joined. Images and files are not supported.
std::optional<ApiError> content_text(const json& c, const std::string& param, std::string* out) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return {};
  }
  if (!c.is_array()) return bad_request(param, fmt::format("'{}' must be a string or an array of text parts", param));
  out->clear();
  for (size_t k = 0; k < c.size(); ++k) {
    const json& p = c[k];
    const std::string type = p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>() : "";
    if (type != "input_text" && type != "output_text" && type != "text")
      return bad_request(param, fmt::format("'{}[{}]': part type '{}' is not supported (only input_text and output_text)",
                                    param, k, type));
    if (!p.contains("text") || !p["text"].is_string())
      return bad_request(param, fmt::format("'{}[{}].text' must be a string", param, k));
    *out += p["text"].get<std::string>();
  }
  return {};
}

std::optional<ApiError> string_field(const json& it, const char* key, const std::string& param, std::string* out) {
  if (!it.contains(key) || !it[key].is_string())
    return bad_request(param + "." + key, fmt::format("'{}.{}' must be a string", param, key));
  *out = it[key].get<std::string>();
  return {};
}

// The input items -> chat messages. Calls join the assistant message before them (or
// start one); their outputs become tool messages.
std::optional<ApiError> input_messages(const json& input, json* msgs) {
  if (input.is_string()) {
    msgs->push_back(json{{"role", "user"}, {"content", input}});
    return {};
  }
  if (!input.is_array() || input.empty())
    return bad_request("input", "'input' must be a string or a non-empty array of items");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    const std::string p = fmt::format("input[{}]", i);
    if (!it.is_object()) return bad_request(p, fmt::format("'{}' must be an object", p));
    const std::string type = it.contains("type") && it["type"].is_string() ? it["type"].get<std::string>() : "message";
    if (type == "message") {
      std::string role, text;
      if (auto e = string_field(it, "role", p, &role)) return e;
      if (!it.contains("content")) return bad_request(p + ".content", fmt::format("'{}.content' is required", p));
      if (auto e = content_text(it["content"], p + ".content", &text)) return e;
      msgs->push_back(json{{"role", role}, {"content", text}});
    } else if (type == "function_call") {
      std::string call_id, name, args;
      if (auto e = string_field(it, "call_id", p, &call_id)) return e;
      if (auto e = string_field(it, "name", p, &name)) return e;
      if (auto e = string_field(it, "arguments", p, &args)) return e;
      json call{{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
      if (msgs->empty() || msgs->back()["role"] != "assistant")
        msgs->push_back(json{{"role", "assistant"}, {"content", nullptr}});
      (*msgs).back()["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      std::string call_id, text;
      if (auto e = string_field(it, "call_id", p, &call_id)) return e;
      if (!it.contains("output")) return bad_request(p + ".output", fmt::format("'{}.output' is required", p));
      if (auto e = content_text(it["output"], p + ".output", &text)) return e;
      msgs->push_back(json{{"role", "tool"}, {"tool_call_id", call_id}, {"content", text}});
    } else if (type != "reasoning") {  // earlier reasoning is not shown to the model again
      return bad_request(p + ".type", fmt::format("input item type '{}' is not supported (message, function_call, "
                                          "function_call_output, reasoning)", type));
    }
  }
  return {};
}

// Responses' flat function tools -> chat's {"type": "function", "function": {...}}.
std::optional<ApiError> chat_tools(const json& tools, json* out) {
  if (!tools.is_array()) return bad_request("tools", "'tools' must be an array");
  *out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    if (!t.is_object() || t.value("type", json()) != "function")
      return bad_request("tools", fmt::format("tools[{}]: only function tools are supported ({{\"type\": \"function\", "
                                      "\"name\": ..., \"parameters\": ...}})", i));
    json f = json::object();
    for (const char* k : {"name", "description", "parameters", "strict"})
      if (t.contains(k)) f[k] = t[k];
    out->push_back(json{{"type", "function"}, {"function", f}});
  }
  return {};
}

}  // namespace

std::optional<ApiError> responses_to_chat(const std::string& body, const EarlierResponse& earlier, json* chat,
                                          json* echo, json* history) {
  json j;
  if (auto e = parse_json_body(body, &j)) return e;
  if (given(j, "conversation"))
    return bad_request("conversation", "'conversation' is not supported; use previous_response_id or send the "
                                       "whole conversation in 'input'");
  if (j.value("background", json()) == true) return bad_request("background", "'background' is not supported");
  *chat = json::object();
  *history = json::array();
  if (given(j, "previous_response_id")) {
    const json& prev = j["previous_response_id"];
    std::optional<json> before = prev.is_string() ? earlier(prev.get<std::string>()) : std::nullopt;
    if (!before)
      return bad_request("previous_response_id",
                         fmt::format("no stored response {} (the server keeps recent responses in memory until "
                                     "it restarts, those made with store false not at all); send the whole "
                                     "conversation in 'input'", prev.dump()));
    *history = std::move(*before);
  }
  if (!given(j, "input")) return bad_request("input", "'input' is required");
  if (auto e = input_messages(j["input"], history)) return e;
  json msgs = json::array();  // the instructions are the request's own, never carried over
  if (given(j, "instructions")) {
    if (!j["instructions"].is_string()) return bad_request("instructions", "'instructions' must be a string");
    msgs.push_back(json{{"role", "system"}, {"content", j["instructions"]}});
  }
  msgs.insert(msgs.end(), history->begin(), history->end());
  (*chat)["messages"] = std::move(msgs);
  if (given(j, "tools")) {
    json tools;
    if (auto e = chat_tools(j["tools"], &tools)) return e;
    (*chat)["tools"] = std::move(tools);
  }
  if (given(j, "tool_choice")) {
    const json& tc = j["tool_choice"];
    (*chat)["tool_choice"] = tc.is_object() && tc.value("type", json()) == "function" && tc.contains("name")
                                 ? json{{"type", "function"}, {"function", {{"name", tc["name"]}}}}
                                 : tc;
  }
  if (given(j, "text") && j["text"].is_object() && given(j["text"], "format")) {
    const json& f = j["text"]["format"];
    if (!f.is_object() || !f.contains("type")) return bad_request("text.format", "'text.format' must be an object with a 'type'");
    if (f["type"] == "json_schema") {
      json s = json::object();
      for (const char* k : {"name", "schema", "strict", "description"})
        if (f.contains(k)) s[k] = f[k];
      (*chat)["response_format"] = json{{"type", "json_schema"}, {"json_schema", s}};
    } else {
      (*chat)["response_format"] = json{{"type", f["type"]}};
    }
  }
  if (given(j, "reasoning")) {
    if (!j["reasoning"].is_object()) return bad_request("reasoning", "'reasoning' must be an object");
    if (given(j["reasoning"], "effort")) (*chat)["reasoning_effort"] = j["reasoning"]["effort"];
  }
  if (given(j, "max_output_tokens")) (*chat)["max_tokens"] = j["max_output_tokens"];
  // The fields of the chat path under the same names (deltafin's extensions among them).
  for (const char* k : {"model", "temperature", "top_p", "stream", "parallel_tool_calls", "seed", "stop", "top_k",
                        "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty", "logit_bias",
                        "ignore_eos", "chat_template_kwargs"})
    if (j.contains(k)) (*chat)[k] = j[k];
  // What the response object repeats, with the API's defaults.
  auto or_default = [&j](const char* k, json d) { return given(j, k) ? j[k] : d; };
  const json effort = given(j, "reasoning") ? j["reasoning"].value("effort", json()) : json();
  *echo = json{{"instructions", or_default("instructions", nullptr)},
               {"max_output_tokens", or_default("max_output_tokens", nullptr)},
               {"parallel_tool_calls", or_default("parallel_tool_calls", true)},
               {"previous_response_id", or_default("previous_response_id", nullptr)},
               {"reasoning", json{{"effort", effort}, {"summary", nullptr}}},
               {"store", or_default("store", true)},
               {"temperature", or_default("temperature", 1.0)},
               {"text", or_default("text", json{{"format", {{"type", "text"}}}})},
               {"tool_choice", or_default("tool_choice", "auto")},
               {"tools", or_default("tools", json::array())},
               {"top_p", or_default("top_p", 1.0)},
               {"truncation", "disabled"},
               {"metadata", or_default("metadata", json::object())},
               {"user", or_default("user", nullptr)}};
  return {};
}

ApiError responses_error(ApiError e) {
  static const std::pair<const char*, const char*> kNames[] = {{"messages", "input"},
                                                               {"max_tokens", "max_output_tokens"},
                                                               {"response_format", "text.format"},
                                                               {"reasoning_effort", "reasoning.effort"}};
  for (const auto& [chat, resp] : kNames)
    if (e.param.rfind(chat, 0) == 0) {
      e.message = "(as a chat request) " + e.message;
      e.param = resp;
    }
  return e;
}

json responses_usage(const json& u) {
  return json{{"input_tokens", u["prompt_tokens"]},
              {"input_tokens_details", {{"cached_tokens", u["prompt_tokens_details"]["cached_tokens"]}}},
              {"output_tokens", u["completion_tokens"]},
              {"output_tokens_details", {{"reasoning_tokens", 0}}},
              {"total_tokens", u["total_tokens"]}};
}

ResponseWriter::ResponseWriter(std::string id, std::string model, int64_t created, json echo) {
  resp_ = json{{"id", std::move(id)},
               {"object", "response"},
               {"created_at", created},
               {"status", "in_progress"},
               {"error", nullptr},
               {"incomplete_details", nullptr},
               {"model", std::move(model)},
               {"output", json::array()},
               {"usage", nullptr}};
  for (auto& [k, v] : echo.items()) resp_[k] = v;
}

std::string ResponseWriter::event(const std::string& type, json data) {
  data["type"] = type;
  data["sequence_number"] = seq_++;
  return "event: " + type + "\ndata: " + data.dump() + "\n\n";
}

std::string ResponseWriter::start() {
  std::string out = event("response.created", json{{"response", resp_}});
  return out + event("response.in_progress", json{{"response", resp_}});
}

std::string ResponseWriter::open(ReplyBlocks::Kind kind, const std::string& call_name) {
  using K = ReplyBlocks::Kind;
  json it;
  if (kind == K::Reasoning) {
    it = json{{"type", "reasoning"}, {"id", make_id("rs")}, {"summary", json::array()}, {"content", json::array()}};
  } else if (kind == K::Text) {
    it = json{{"type", "message"}, {"id", make_id("msg")}, {"status", "in_progress"}, {"role", "assistant"},
              {"content", json::array()}};
  } else {
    it = json{{"type", "function_call"}, {"id", make_id("fc")},  {"call_id", make_id("call")},
              {"name", call_name},       {"arguments", ""},      {"status", "in_progress"}};
  }
  resp_["output"].push_back(it);
  std::string out = event("response.output_item.added", json{{"output_index", resp_["output"].size() - 1}, {"item", it}});
  if (kind == K::Call) return out;
  const json part = kind == K::Text ? json{{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}
                                    : json{{"type", "reasoning_text"}, {"text", ""}};
  item()["content"].push_back(part);
  if (kind == K::Text) {
    json d = where();
    d["content_index"] = 0;
    d["part"] = part;
    out += event("response.content_part.added", std::move(d));
  }
  return out;
}

std::string ResponseWriter::delta(const std::string& text) {
  using K = ReplyBlocks::Kind;
  const K kind = blocks_.open_kind();
  json d = where();
  d["delta"] = text;
  if (kind == K::Call) {
    item()["arguments"] = item()["arguments"].get<std::string>() + text;
    return event("response.function_call_arguments.delta", std::move(d));
  }
  json& part = item()["content"][0];
  part["text"] = part["text"].get<std::string>() + text;
  d["content_index"] = 0;
  return event(kind == K::Text ? "response.output_text.delta" : "response.reasoning_text.delta", std::move(d));
}

std::string ResponseWriter::close() {
  using K = ReplyBlocks::Kind;
  const K kind = blocks_.open_kind();
  json& it = item();
  json d = where();
  std::string out;
  const bool cut = resp_["status"] == "incomplete";
  if (kind == K::Call) {
    d["arguments"] = it["arguments"];
    out += event("response.function_call_arguments.done", d);
    it["status"] = cut ? "incomplete" : "completed";
  } else {
    d["content_index"] = 0;
    d["text"] = it["content"][0]["text"];
    out += event(kind == K::Text ? "response.output_text.done" : "response.reasoning_text.done", d);
    if (kind == K::Text) {
      d.erase("text");
      d["part"] = it["content"][0];
      out += event("response.content_part.done", d);
      it["status"] = cut ? "incomplete" : "completed";
    }
  }
  out += event("response.output_item.done", json{{"output_index", resp_["output"].size() - 1}, {"item", it}});
  return out;
}

std::string ResponseWriter::finish(const std::string& finish_reason, const std::string&, const json& usage) {
  const bool cut = finish_reason == "length";
  resp_["status"] = cut ? "incomplete" : "completed";
  std::string out = blocks_.close();
  if (cut) resp_["incomplete_details"] = json{{"reason", "max_output_tokens"}};
  resp_["usage"] = responses_usage(usage);
  return out + event(cut ? "response.incomplete" : "response.completed", json{{"response", resp_}});
}

std::string ResponseWriter::fail(const std::string& message) {
  resp_["status"] = "failed";
  resp_["error"] = json{{"code", "server_error"}, {"message", message}};
  return event("response.failed", json{{"response", resp_}});
}

json output_messages(const json& response) {
  std::string text, reasoning;
  json calls = json::array();
  for (const json& o : response["output"]) {
    if (o["type"] == "message") text += o["content"][0]["text"].get<std::string>();
    else if (o["type"] == "reasoning") reasoning += o["content"][0]["text"].get<std::string>();
    else if (o["type"] == "function_call")
      calls.push_back(json{{"id", o["call_id"]}, {"type", "function"},
                           {"function", {{"name", o["name"]}, {"arguments", o["arguments"]}}}});
  }
  if (text.empty() && reasoning.empty() && calls.empty()) return json::array();
  json m{{"role", "assistant"}, {"content", text.empty() && !calls.empty() ? json(nullptr) : json(text)}};
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  return json::array({std::move(m)});
}

void ResponseStore::put(const std::string& id, json messages, json response) {
  const size_t bytes = messages.dump().size() + response.dump().size();
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
  }
  lru_.push_front(Entry{id, std::move(messages), std::move(response), bytes});
  index_[id] = lru_.begin();
  bytes_ += bytes;
  while (lru_.size() > 1 && (lru_.size() > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::list<ResponseStore::Entry>::iterator ResponseStore::find(const std::string& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return lru_.end();
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second;
}

std::optional<json> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = find(id);
  if (it == lru_.end()) return std::nullopt;
  return it->messages;
}

std::optional<json> ResponseStore::get_response(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = find(id);
  if (it == lru_.end() || it->response.is_null()) return std::nullopt;
  return it->response;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

}  // namespace deltafin::server
