// OpenAI's Responses API (/v1/responses) over the chat path: a request's `input`
// items, `instructions`, function tools and `text.format` become a chat completions
// body (validated by parse_chat_request like any other), and the reply's reasoning,
// text and calls become the response's output items, whole or as the API's stream of
// typed events. Recent conversations are kept in memory for `previous_response_id`
// (ResponseStore). No HTTP and no model here.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "chat/reply_parser.h"
#include "server/api.h"
#include "server/reply_blocks.h"

namespace deltafin::server {

// The chat messages of a stored response's conversation, if it is still kept.
using EarlierResponse = std::function<std::optional<json>(const std::string& id)>;

// The body of /v1/responses -> a /v1/chat/completions body in *chat, in *echo the
// request's fields that the response object repeats (instructions, tools, ...), and in
// *history the conversation so far without the instructions (what previous_response_id
// names, then the input), which the response's output extends for the store.
std::optional<ApiError> responses_to_chat(const std::string& body, const EarlierResponse& earlier, json* chat,
                                          json* echo, json* history);

// A response's output items as chat messages: one assistant message with its text,
// reasoning (reasoning_content) and calls (tool_calls under their call ids); none if
// the output is empty.
json output_messages(const json& response);

// Recent responses: each one's conversation (its input without instructions, and its
// output, as chat messages) for previous_response_id, and the response object itself
// for GET /v1/responses/{id}. Bounded in count and bytes; the least recently used go
// first. Thread-safe.
class ResponseStore {
 public:
  explicit ResponseStore(size_t max_entries = 512, size_t max_bytes = size_t(64) << 20)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}
  void put(const std::string& id, json messages, json response = nullptr);
  std::optional<json> get(const std::string& id);           // the conversation
  std::optional<json> get_response(const std::string& id);  // the response object
  bool erase(const std::string& id);                        // false if not kept

 private:
  struct Entry {
    std::string id;
    json messages, response;
    size_t bytes;
  };
  std::list<struct Entry>::iterator find(const std::string& id);  // moved to the front; end() if not kept
  std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0, max_entries_, max_bytes_;
};

// An error of the chat parser, its param renamed to the Responses field it came from
// ("messages[2].content" -> "input", "max_tokens" -> "max_output_tokens", ...).
ApiError responses_error(ApiError e);

// Usage in the Responses shape from the chat shape (usage_json).
json responses_usage(const json& chat_usage);

// One response while it is generated: its output items from the reply's pieces, and
// the events that stream them (each "event: TYPE\ndata: {...}\n\n", numbered).
class ResponseWriter : public BlockReplyWriter, private ReplyBlocks::Sink {
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
