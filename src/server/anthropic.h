// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) over the chat
// path, for clients that speak it (Claude Code, the Anthropic SDKs): a request's
// system prompt, messages of content blocks (text, thinking, tool_use, tool_result)
// and custom tools become a chat completions body validated by parse_chat_request;
// the reply's thinking, text and calls become content blocks, whole or as the API's
// stream of events. No HTTP and no model here.
#pragma once

#include <optional>
#include <string>

#include "chat/reply_parser.h"
#include "server/api.h"
#include "server/reply_blocks.h"

namespace deltafin::server {

// The body of /v1/messages -> a /v1/chat/completions body in *chat.
std::optional<ApiError> messages_to_chat(const std::string& body, json* chat);

// An error of the chat parser named by the Messages field it came from ("stop" ->
// "stop_sequences"); the others keep their names.
ApiError messages_error(ApiError e);

// Anthropic's error body: {"type": "error", "error": {"type", "message"}}, its type
// from the HTTP status (invalid_request_error, authentication_error, not_found_error, ...).
json anthropic_error_body(const ApiError& e);

// One message while it is generated: its content blocks from the reply's pieces, and
// the events that stream them ("event: TYPE\ndata: {...}\n\n").
class MessageWriter : public BlockReplyWriter, private ReplyBlocks::Sink {
 public:
  MessageWriter(std::string id, std::string model, int input_tokens);
  std::string start() override;  // message_start
  std::string push(const ReplyPiece& piece) override { return blocks_.push(piece); }
  // The end: the open block closed, message_delta (stop_reason: end_turn, max_tokens,
  // stop_sequence or tool_use; usage) and message_stop.
  std::string finish(const std::string& finish_reason, const std::string& stop_string, const json& usage) override;
  std::string fail(const std::string& message) override;  // an error event (and whole() the error body)
  std::string whole() const override { return failed_.is_null() ? msg_.dump() : failed_.dump(); }
  std::string keepalive() const override { return event("ping", json::object()); }
  size_t n_calls() const override { return blocks_.n_calls(); }
  // The whole message: push() the pieces, finish(), then this.
  const json& message() const { return msg_; }

 private:
  std::string open(ReplyBlocks::Kind kind, const std::string& call_name) override;
  std::string delta(const std::string& text) override;
  std::string close() override;
  static std::string event(const std::string& type, json data);
  size_t index() const { return msg_["content"].size() - 1; }

  json msg_;
  json failed_;       // the error body, once generation failed
  std::string args_;  // the open tool_use block's input as JSON text so far
  ReplyBlocks blocks_{*this};
};

}  // namespace deltafin::server
