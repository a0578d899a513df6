// The OpenAI-compatible HTTP server: /v1/chat/completions and /v1/completions (SSE
// streaming and not), /v1/models, /health and /metrics, over a Scheduler that
// batches every running request into one forward pass per step.
//
// Robustness: bad JSON or fields get 400 with an OpenAI error body naming the
// field; an unknown model 404; a prompt longer than the context 400 with both
// numbers; with an API key, a missing or wrong key 401; bodies over the limit 413; a
// full queue 503. A client that disconnects cancels its generation (non-streaming
// responses send a space every heartbeat while they wait, which is how a gone client
// is noticed; JSON allows leading whitespace). Request JSON is parsed within a depth
// and a key count (api.h), and connections within caps and a deadline (connections.h).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "model/model.h"
#include "runtime/memory_budget.h"
#include "runtime/sampler.h"
#include "server/api.h"
#include "runtime/scheduler.h"
#include "store/streaming_store.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (see bind())
  std::string api_key;           // empty: no authentication
  // Origins whose pages may call the server from a browser (CORS); "*": any. Empty: none.
  std::vector<std::string> cors_origins;
  std::string model_id;          // the name /v1/models lists and requests must use
  std::vector<std::string> model_aliases;  // other names requests may use
  bool any_model_name = false;  // requests may name any model (--alias '*', as llama-server)
  size_t max_body_bytes = 4u << 20;
  // Connections (connections.h): open at once in total and from one client address
  // (more get 503), and the seconds a request's head and body may take to arrive (408).
  int max_connections = 512;
  int max_client_connections = 128;
  double request_timeout_s = 30;
  std::string chat_template;     // Jinja source; empty: kFallbackChatTemplate (ChatML)
  // Tokens a reply may take when the request sets no limit (-1: until the context
  // is full); serve passes the model's trained context length, so that a base
  // model that never ends its text stops there.
  int default_max_tokens = -1;
  // The sampling a request gets for the fields it leaves out: the APIs' defaults, and
  // serve lays the model's recommended ones (GGUF general.sampling.*) over them.
  SamplingParams sampling = api_default_sampling();
  bool reasoning = true;         // split <think> text into reasoning_content when the template uses it
  // Variables every chat request's template gets (--chat-template-kwargs), e.g.
  // {"thinking": false} for Kimi K3; a request's chat_template_kwargs override them.
  nlohmann::json template_kwargs = nlohmann::json::object();
  std::chrono::milliseconds heartbeat{1000};
  bool batched = true;  // the model decodes the batch in one pass (/v1/models says so)
  // The engine's memory plan, whose numbers /metrics shows as gauges; null: none. Must outlive the server.
  const MemoryPlan* memory_plan = nullptr;
};

class Server {
 public:
  // `store` may be null. Everything passed in must outlive the server.
  Server(Scheduler& sched, const Tokenizer& tok, const ModelInfo& info, const StreamingExpertStore* store,
         ServerOptions opts);
  ~Server();
  // Parses the chat template and binds the socket; returns the port.
  Result<int> bind();
  // Serves until stop(); returns when the listener has closed and in-flight
  // responses are written.
  void run();
  // Marks the server as going down (/health answers 503) before the scheduler drains.
  void set_draining();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deltafin::server
