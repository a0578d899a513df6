#include "server/anthropic.h"

#include <fmt/format.h>

namespace deltafin::server {

namespace {

std::string block_type(const json& b) {
  return b.is_object() && b.contains("type") && b["type"].is_string() ? b["type"].get<std::string>() : "";
}

// A content that must be text: a string, or text blocks (joined). With `images`, an
// image block becomes a note saying it is not shown (a tool's screenshot or a file it
// read must not end the conversation) instead of an error.
std::optional<ApiError> text_of(const json& c, const std::string& param, std::string* out, bool images = false) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return {};
  }
  if (!c.is_array()) return bad_request(param, fmt::format("'{}' must be a string or an array of content blocks", param));
  out->clear();
  for (size_t k = 0; k < c.size(); ++k) {
    if (images && block_type(c[k]) == "image") {
      *out += "[an image, not shown: this model reads text only]";
      continue;
    }
    if (block_type(c[k]) != "text" || !c[k].contains("text") || !c[k]["text"].is_string())
      return bad_request(param, fmt::format("'{}[{}]': only text blocks are supported here (got '{}')", param, k,
                                    block_type(c[k])));
    *out += c[k]["text"].get<std::string>();
  }
  return {};
}

// One user message's blocks: tool results become tool messages (first, as the API
// orders them), the text one user message after them.
std::optional<ApiError> user_message(const json& content, const std::string& p, json* msgs) {
  if (content.is_string()) {
    msgs->push_back(json{{"role", "user"}, {"content", content}});
    return {};
  }
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& b = content[k];
    const std::string bp = fmt::format("{}[{}]", p, k), type = block_type(b);
    if (type == "text" && b.contains("text") && b["text"].is_string()) {
      text += b["text"].get<std::string>();
    } else if (type == "tool_result") {
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
        return bad_request(bp + ".tool_use_id", fmt::format("'{}.tool_use_id' must be a string", bp));
      std::string out;
      if (b.contains("content") && !b["content"].is_null())
        if (auto e = text_of(b["content"], bp + ".content", &out, true)) return e;
      if (b.value("is_error", json()) == true) out = "Error: " + out;
      msgs->push_back(json{{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", out}});
    } else {
      return bad_request(bp, fmt::format("'{}': block type '{}' is not supported in a user message (text, tool_result)", bp, type));
    }
  }
  if (!text.empty() || msgs->empty() || msgs->back()["role"] != "tool")
    msgs->push_back(json{{"role", "user"}, {"content", text}});
  return {};
}

// An assistant message's blocks: text, thinking (as reasoning_content, which templates
// read) and tool_use calls.
std::optional<ApiError> assistant_message(const json& content, const std::string& p, json* msgs) {
  if (content.is_string()) {
    msgs->push_back(json{{"role", "assistant"}, {"content", content}});
    return {};
  }
  std::string text, thinking;
  json calls = json::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const json& b = content[k];
    const std::string bp = fmt::format("{}[{}]", p, k), type = block_type(b);
    if (type == "text" && b.contains("text") && b["text"].is_string()) {
      text += b["text"].get<std::string>();
    } else if (type == "thinking" && b.contains("thinking") && b["thinking"].is_string()) {
      thinking += b["thinking"].get<std::string>();
    } else if (type == "tool_use") {
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
        return bad_request(bp, fmt::format("'{}': a tool_use block needs a string 'id' and 'name'", bp));
      const json input = b.contains("input") ? b["input"] : json::object();
      calls.push_back(json{{"id", b["id"]}, {"type", "function"},
                           {"function", {{"name", b["name"]}, {"arguments", input.dump()}}}});
    } else if (type != "redacted_thinking") {
      return bad_request(bp, fmt::format("'{}': block type '{}' is not supported in an assistant message (text, "
                                 "thinking, tool_use)", bp, type));
    }
  }
  json m{{"role", "assistant"}, {"content", text.empty() && !calls.empty() ? json(nullptr) : json(text)}};
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  if (!thinking.empty()) m["reasoning_content"] = thinking;
  msgs->push_back(std::move(m));
  return {};
}

std::optional<ApiError> chat_tools(const json& tools, json* out) {
  if (!tools.is_array()) return bad_request("tools", "'tools' must be an array");
  *out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string type = t.is_object() && t.contains("type") ? block_type(t) : "custom";
    if (!t.is_object() || type != "custom")
      return bad_request("tools", fmt::format("tools[{}]: tool type '{}' is not supported (only custom tools: name, "
                                      "description, input_schema)", i, type));
    json f = json::object();
    if (t.contains("name")) f["name"] = t["name"];
    if (t.contains("description")) f["description"] = t["description"];
    f["parameters"] = t.contains("input_schema") ? t["input_schema"] : json{{"type", "object"}};
    out->push_back(json{{"type", "function"}, {"function", f}});
  }
  return {};
}

}  // namespace

std::optional<ApiError> messages_to_chat(const std::string& body, json* chat) {
  json j;
  if (auto e = parse_json_body(body, &j)) return e;
  json msgs = json::array();
  if (j.contains("system") && !j["system"].is_null()) {
    std::string system;
    if (auto e = text_of(j["system"], "system", &system)) return e;
    msgs.push_back(json{{"role", "system"}, {"content", system}});
  }
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
    return bad_request("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < j["messages"].size(); ++i) {
    const json& m = j["messages"][i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object() || !m.contains("content") || !(m["content"].is_string() || m["content"].is_array()))
      return bad_request(p, fmt::format("'{}' must be an object with 'role' and 'content' (a string or blocks)", p));
    const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
    std::optional<ApiError> e;
    if (role == "user") e = user_message(m["content"], p + ".content", &msgs);
    else if (role == "assistant") e = assistant_message(m["content"], p + ".content", &msgs);
    else return bad_request(p + ".role", fmt::format("'{}.role' must be 'user' or 'assistant', not '{}'", p, role));
    if (e) return e;
  }
  *chat = json{{"messages", std::move(msgs)}};
  if (j.contains("tools") && !j["tools"].is_null()) {
    json tools;
    if (auto e = chat_tools(j["tools"], &tools)) return e;
    (*chat)["tools"] = std::move(tools);
  }
  if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
    const json& tc = j["tool_choice"];
    const std::string type = block_type(tc);
    if (type == "auto" || type == "none") (*chat)["tool_choice"] = type;
    else if (type == "any") (*chat)["tool_choice"] = "required";
    else if (type == "tool" && tc.contains("name")) (*chat)["tool_choice"] = json{{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    else return bad_request("tool_choice", "'tool_choice' must be {\"type\": \"auto\"}, \"any\", \"none\" or \"tool\" with a name");
    if (tc.value("disable_parallel_tool_use", json()) == true) (*chat)["parallel_tool_calls"] = false;
  }
  if (j.contains("stop_sequences")) (*chat)["stop"] = j["stop_sequences"];
  json kwargs = j.contains("chat_template_kwargs") && j["chat_template_kwargs"].is_object() ? j["chat_template_kwargs"]
                                                                                             : json::object();
  if (j.contains("thinking") && j["thinking"].is_object()) {
    const bool on = j["thinking"].value("type", json()) == "enabled";
    for (const char* k : {"thinking", "enable_thinking"})
      if (!kwargs.contains(k)) kwargs[k] = on;
  }
  if (!kwargs.empty()) (*chat)["chat_template_kwargs"] = std::move(kwargs);
  for (const char* k : {"model", "max_tokens", "temperature", "top_p", "top_k", "stream", "seed", "min_p",
                        "repeat_penalty", "presence_penalty", "frequency_penalty", "logit_bias", "ignore_eos"})
    if (j.contains(k)) (*chat)[k] = j[k];
  return {};
}

ApiError messages_error(ApiError e) {
  if (e.param == "stop") e.param = "stop_sequences";
  return e;
}

json anthropic_error_body(const ApiError& e) {
  const char* type = e.status == 401   ? "authentication_error"
                     : e.status == 403 ? "permission_error"
                     : e.status == 404 ? "not_found_error"
                     : e.status == 413 ? "request_too_large"
                     : e.status == 503 ? "overloaded_error"
                     : e.status >= 500 ? "api_error"
                                       : "invalid_request_error";
  const std::string msg = e.param.empty() ? e.message : fmt::format("{}: {}", e.param, e.message);
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", msg}}}};
}

MessageWriter::MessageWriter(std::string id, std::string model, int input_tokens) {
  msg_ = json{{"id", std::move(id)},
              {"type", "message"},
              {"role", "assistant"},
              {"model", std::move(model)},
              {"content", json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", {{"input_tokens", input_tokens}, {"output_tokens", 0}}}};
}

std::string MessageWriter::event(const std::string& type, json data) {
  json d{{"type", type}};
  for (auto& [k, v] : data.items()) d[k] = v;
  return "event: " + type + "\ndata: " + d.dump() + "\n\n";
}

std::string MessageWriter::start() { return event("message_start", json{{"message", msg_}}); }

std::string MessageWriter::open(ReplyBlocks::Kind kind, const std::string& call_name) {
  using K = ReplyBlocks::Kind;
  json b = kind == K::Text        ? json{{"type", "text"}, {"text", ""}}
           : kind == K::Reasoning ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                  : json{{"type", "tool_use"}, {"id", make_id("toolu")}, {"name", call_name},
                                         {"input", json::object()}};
  msg_["content"].push_back(b);
  args_.clear();
  return event("content_block_start", json{{"index", index()}, {"content_block", b}});
}

std::string MessageWriter::delta(const std::string& text) {
  using K = ReplyBlocks::Kind;
  json& b = msg_["content"].back();
  json d;
  switch (blocks_.open_kind()) {
    case K::Text:
      b["text"] = b["text"].get<std::string>() + text;
      d = json{{"type", "text_delta"}, {"text", text}};
      break;
    case K::Reasoning:
      b["thinking"] = b["thinking"].get<std::string>() + text;
      d = json{{"type", "thinking_delta"}, {"thinking", text}};
      break;
    default:
      args_ += text;
      d = json{{"type", "input_json_delta"}, {"partial_json", text}};
  }
  return event("content_block_delta", json{{"index", index()}, {"delta", d}});
}

std::string MessageWriter::close() {
  if (blocks_.open_kind() == ReplyBlocks::Kind::Call) {
    // The input as an object; arguments cut short (max_tokens) leave it empty.
    json input;
    const bool parsed = !parse_json_bounded(args_, &input);  // the model's text: bounded like a request's
    msg_["content"].back()["input"] = parsed && input.is_object() ? input : json::object();
  }
  return event("content_block_stop", json{{"index", index()}});
}

std::string MessageWriter::finish(const std::string& finish_reason, const std::string& stop_string, const json& usage) {
  std::string out = blocks_.close();
  const char* reason = finish_reason == "length" ? "max_tokens"
                       : n_calls() > 0           ? "tool_use"
                       : !stop_string.empty()    ? "stop_sequence"
                                                 : "end_turn";
  msg_["stop_reason"] = reason;
  msg_["stop_sequence"] = stop_string.empty() ? json(nullptr) : json(stop_string);
  const int cached = usage["prompt_tokens_details"]["cached_tokens"].get<int>();
  msg_["usage"] = json{{"input_tokens", usage["prompt_tokens"].get<int>() - cached},
                       {"cache_creation_input_tokens", 0},
                       {"cache_read_input_tokens", cached},
                       {"output_tokens", usage["completion_tokens"]}};
  out += event("message_delta", json{{"delta", {{"stop_reason", reason}, {"stop_sequence", msg_["stop_sequence"]}}},
                                     {"usage", msg_["usage"]}});
  return out + event("message_stop", json::object());
}

std::string MessageWriter::fail(const std::string& message) {
  ApiError e;
  e.status = 500;
  e.message = message;
  failed_ = anthropic_error_body(e);
  return event("error", json{{"error", failed_["error"]}});
}

}  // namespace deltafin::server
