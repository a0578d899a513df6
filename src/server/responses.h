// OpenAI's Responses API (/v1/responses) over the chat path: a request's `input`
// items, `instructions`, function tools and `text.format` become a chat completions
// body (validated by parse_chat_request like any other), and the reply's reasoning,
// text and calls become the response's output items, whole or as the API's stream of
// typed events. The server keeps no responses: `previous_response_id` is refused
// (send the conversation in `input`). No HTTP and no model here.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "runtime/reply_parser.h"
#include "server/api.h"
#include "server/reply_blocks.h"

namespace deltafin::server {

// The body of /v1/responses -> a /v1/chat/completions body in *chat, and in *echo the
// request's fields that the response object repeats (instructions, tools, ...).
std::optional<ApiError> responses_to_chat(const std::string& body, json* chat, json* echo);

// An error of the chat parser, its param renamed to the Responses field it came from
// ("messages[2].content" -> "input", "max_tokens" -> "max_output_tokens", ...).
ApiError responses_error(ApiError e);

// Usage in the Responses shape from the chat shape (usage_json).
json responses_usage(const json& chat_usage);

// One response while it is generated: its output items from the reply's pieces, and
// the events that stream them (each "event: TYPE\ndata: {...}\n\n", numbered).
class ResponseWriter : public ReplyWriter, private ReplyBlocks::Sink {
 public:
  ResponseWriter(std::string id, std::string model, int64_t created, json echo);
  std::string start() override;  // response.created, .in_progress
  std::string push(const ReplyPiece& piece) override { return blocks_.push(piece); }
  // The end: the open item closed, then response.completed (or .incomplete when the
  // reply hit max_output_tokens).
  std::string finish(const std::string& finish_reason, const std::string& stop_string, const json& usage) override;
  std::string fail(const std::string& message) override;  // response.failed
  std::string whole() const override { return resp_.dump(); }
  std::string keepalive() const override { return ": keep-alive\n\n"; }
  size_t n_calls() const override { return blocks_.n_calls(); }
  // The whole response object: push() the pieces, finish(), then this.
  const json& response() const { return resp_; }

 private:
  std::string open(ReplyBlocks::Kind kind, const std::string& call_name) override;
  std::string delta(const std::string& text) override;
  std::string close() override;
  std::string event(const std::string& type, json data);
  json& item() { return resp_["output"].back(); }
  json where() { return json{{"item_id", item()["id"]}, {"output_index", resp_["output"].size() - 1}}; }

  json resp_;
  int64_t seq_ = 0;
  ReplyBlocks blocks_{*this};
};

}  // namespace deltafin::server
