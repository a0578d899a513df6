// The HTTP server's routes, authentication and CORS (server.h). What a route does
// lives beside it: api.h validates OpenAI bodies, chat_prompt.h renders a chat request
// into a prompt, responses.h and anthropic.h translate their APIs to chat, and every
// reply is written through replies.h's write_reply by an API's writer
// (openai_writer.h, responses.h, anthropic.h).
#include "server/server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <ctime>

#include "core/log.h"
#include "server/anthropic.h"
#include "server/api.h"
#include "server/chat_prompt.h"
#include "server/connections.h"
#include "server/metrics.h"
#include "server/openai_writer.h"
#include "server/replies.h"
#include "server/responses.h"
#include "chat/reply_parser.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/unicode.h"

namespace deltafin::server {

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body().dump(), "application/json");
}

ApiError error(int status, const std::string& message, const std::string& type = "invalid_request_error",
               const std::string& param = {}, const std::string& code = {}) {
  ApiError e;
  e.status = status;
  e.message = message;
  e.type = type;
  e.param = param;
  e.code = code;
  return e;
}

// Constant-time comparison (the key's length is not secret).
bool same_key(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= uint8_t(a[i] ^ b[i]);
  return d == 0;
}

}  // namespace

struct Server::Impl {
  Scheduler& sched;
  const Tokenizer& tok;
  const ModelInfo& info;
  const StreamingExpertStore* store;
  ServerOptions opts;
  std::optional<ChatPrompter> prompter;  // chat requests -> prompts (the model's chat template)
  Metrics metrics;
  ResponseStore stored_responses;  // /v1/responses conversations, for previous_response_id
  GuardedServer http;
  std::atomic<bool> stopping{false};
  int64_t created = std::time(nullptr);

  Impl(Scheduler& s, const Tokenizer& t, const ModelInfo& i, const StreamingExpertStore* st, ServerOptions o)
      : sched(s), tok(t), info(i), store(st), opts(std::move(o)), http(limits(opts)) {}

  static ConnectionLimits limits(const ServerOptions& o) {
    ConnectionLimits l;
    l.max_connections = o.max_connections;
    l.max_client_connections = o.max_client_connections;
    l.request_timeout = std::chrono::milliseconds(int64_t(o.request_timeout_s * 1000));
    return l;
  }

  // --- generation -------------------------------------------------------------

  enum class Kind { Chat, Completion, Response, Message };

  // Validated prompt + parameters -> queued request (g.n choices); null when refused,
  // with the reason in *refused.
  std::shared_ptr<Replies> submit(Kind kind, std::vector<int32_t> prompt, const GenParams& g,
                                  const std::string& prompt_param, const ReplyFormat& format, ApiError* refused) {
    const int n_ctx = sched.options().n_ctx;
    if (int64_t(prompt.size()) > n_ctx) {
      *refused = error(400,
                       fmt::format("the prompt has {} tokens but the context holds {} tokens; shorten the "
                                   "prompt (or start the server with a larger -c)",
                                   prompt.size(), n_ctx),
                       "invalid_request_error", prompt_param, "context_length_exceeded");
      return nullptr;
    }
    GenRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = g.max_tokens ? *g.max_tokens : opts.default_max_tokens;
    r.sampling = g.sampling;
    r.stop = g.stop;
    r.ignore_eos = g.ignore_eos;
    r.logprobs = g.logprobs;
    r.prompt_logprobs = g.echo && g.logprobs >= 0;
    r.shown_tokens = marker_tokens(tok, format);
    r.json = g.json_grammar;
    std::string echo_text;
    std::vector<size_t> echo_offsets;
    if (g.echo) {
      StreamDecoder dec(tok);
      for (int32_t id : r.prompt) {
        echo_offsets.push_back(echo_text.size());
        echo_text += dec.push(id);
      }
      echo_text += dec.flush();
    }
    SubmitError err;
    std::string msg;
    std::vector<std::shared_ptr<GenHandle>> hs = sched.submit_choices(std::move(r), g.n, &err, &msg);
    if (hs.empty()) {
      const bool busy = err == SubmitError::Busy || err == SubmitError::ShuttingDown;
      *refused = error(busy ? 503 : 400, msg, busy ? "server_error" : "invalid_request_error",
                       busy ? "" : (g.n > 1 ? "n" : prompt_param));
      return nullptr;
    }
    const char* prefix = kind == Kind::Chat         ? "chatcmpl"
                         : kind == Kind::Completion ? "cmpl"
                         : kind == Kind::Response   ? "resp"
                                                    : "msg";
    auto ctx = std::make_shared<Replies>(std::move(hs), format, make_id(prefix));
    if (g.json_grammar) metrics.count_structured();
    ctx->echo_text = std::move(echo_text);
    ctx->echo_offsets = std::move(echo_offsets);
    return ctx;
  }

  // A chat or text completion, written by OpenAIWriter.
  void generate(httplib::Response& res, Kind kind, std::vector<int32_t> prompt, const GenParams& g,
                const std::string& prompt_param, const ReplyFormat& format = {}) {
    ApiError refused;
    std::shared_ptr<Replies> ctx = submit(kind, std::move(prompt), g, prompt_param, format, &refused);
    if (!ctx) return send_error(res, refused);
    OpenAIWriter::Options o;
    o.chat = kind == Kind::Chat;
    o.stream = g.stream;
    o.include_usage = g.include_usage;
    o.echo = g.echo;
    o.logprobs = g.logprobs >= 0;
    PieceFn piece = [t = &tok](int32_t id) { return t->piece(id, false); };
    auto w = std::make_shared<OpenAIWriter>(ctx->id, opts.model_id, ctx->created, ctx->choices.size(), o,
                                            std::move(piece), &metrics);
    write_reply(res, ctx, w, g.stream, opts.heartbeat, &metrics);
  }

  bool serves(const std::string& name) const {
    return opts.any_model_name || name == opts.model_id ||
           std::find(opts.model_aliases.begin(), opts.model_aliases.end(), name) != opts.model_aliases.end();
  }

  std::optional<ApiError> check_model(const GenParams& g) const {
    if (!g.model.empty() && !serves(g.model))
      return error(404,
                   fmt::format("the model '{}' does not exist; this server serves '{}' (a server started with "
                               "--alias NAME also takes NAME, with --alias '*' any name)",
                               g.model, opts.model_id),
                   "invalid_request_error", "model", "model_not_found");
    return {};
  }

  void chat(const httplib::Request& req, httplib::Response& res) {
    ChatRequest cr;
    if (auto e = parse_chat_request(req.body, info.n_vocab, &cr, opts.sampling)) return send_error(res, *e);
    if (auto e = check_model(cr.gen)) return send_error(res, *e);
    std::vector<int32_t> ids;
    ReplyFormat f;
    if (auto e = prompter->prepare(cr, &ids, &f)) return send_error(res, *e);
    generate(res, Kind::Chat, std::move(ids), cr.gen, "messages", f);
  }

  // /v1/responses: the request as a chat request (responses.h), its reply as output items.
  void responses(const httplib::Request& req, httplib::Response& res) {
    json body, echo, history;
    ResponseStore* const kept = &stored_responses;
    const EarlierResponse earlier = [kept](const std::string& id) { return kept->get(id); };
    if (auto e = responses_to_chat(req.body, earlier, &body, &echo, &history)) return send_error(res, *e);
    ChatRequest cr;
    if (auto e = parse_chat_request(body.dump(), info.n_vocab, &cr, opts.sampling)) return send_error(res, responses_error(*e));
    if (auto e = check_model(cr.gen)) return send_error(res, *e);
    std::vector<int32_t> ids;
    ReplyFormat f;
    if (auto e = prompter->prepare(cr, &ids, &f)) return send_error(res, responses_error(*e));
    ApiError refused;
    std::shared_ptr<Replies> ctx = submit(Kind::Response, std::move(ids), cr.gen, "input", f, &refused);
    if (!ctx) return send_error(res, refused);
    const bool store = echo["store"] != false;
    auto w = std::make_shared<ResponseWriter>(ctx->id, opts.model_id, ctx->created, std::move(echo));
    std::function<void()> keep;  // the conversation, for a later previous_response_id
    if (store)
      keep = [kept, w, history = std::move(history)]() {
        json msgs = history;
        for (const json& m : output_messages(w->response())) msgs.push_back(m);
        kept->put(w->response()["id"], std::move(msgs), w->response());
      };
    write_reply(res, ctx, w, cr.gen.stream, opts.heartbeat, &metrics, std::move(keep));
  }

  // /v1/messages (Anthropic): the request as a chat request (anthropic.h), its reply as
  // content blocks. Errors in Anthropic's shape.
  void messages(const httplib::Request& req, httplib::Response& res) {
    auto fail = [&](const ApiError& e) {
      res.status = e.status;
      res.set_content(anthropic_error_body(e).dump(), "application/json");
    };
    ChatRequest cr;
    std::vector<int32_t> ids;
    ReplyFormat f;
    if (auto e = anthropic_chat(req.body, &cr, &ids, &f)) return fail(*e);
    ApiError refused;
    std::shared_ptr<Replies> ctx = submit(Kind::Message, ids, cr.gen, "messages", f, &refused);
    if (!ctx) return fail(refused);
    write_reply(res, ctx, std::make_shared<MessageWriter>(ctx->id, opts.model_id, int(ids.size())), cr.gen.stream,
                opts.heartbeat, &metrics);
  }

  // /v1/messages/count_tokens: the prompt's length as /v1/messages would evaluate it.
  void count_tokens(const httplib::Request& req, httplib::Response& res) {
    ChatRequest cr;
    std::vector<int32_t> ids;
    ReplyFormat f;
    if (auto e = anthropic_chat(req.body, &cr, &ids, &f)) {
      res.status = e->status;
      return res.set_content(anthropic_error_body(*e).dump(), "application/json");
    }
    res.set_content(json{{"input_tokens", ids.size()}}.dump(), "application/json");
  }

  std::optional<ApiError> anthropic_chat(const std::string& body, ChatRequest* cr, std::vector<int32_t>* ids,
                                         ReplyFormat* f) {
    json chat;
    if (auto e = messages_to_chat(body, &chat)) return e;
    if (auto e = parse_chat_request(chat.dump(), info.n_vocab, cr, opts.sampling)) return messages_error(*e);
    if (auto e = check_model(cr->gen)) return e;
    return prompter->prepare(*cr, ids, f);
  }

  void completion(const httplib::Request& req, httplib::Response& res) {
    CompletionRequest cr;
    if (auto e = parse_completion_request(req.body, info.n_vocab, &cr, opts.sampling)) return send_error(res, *e);
    if (auto e = check_model(cr.gen)) return send_error(res, *e);
    std::vector<int32_t> ids = cr.prompt_tokens.empty() ? tok.encode(cr.prompt, true, true) : cr.prompt_tokens;
    if (ids.empty()) return send_error(res, error(400, "the prompt has no tokens", "invalid_request_error", "prompt"));
    generate(res, Kind::Completion, std::move(ids), cr.gen, "prompt");
  }

  // OpenAI's model object, with Anthropic's fields beside (type, display_name,
  // created_at) so that both APIs' clients read it.
  json model_json() const {
    char when[32];
    const std::time_t t = static_cast<std::time_t>(created);  // int64_t is long long on macOS, time_t long
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return json{{"id", opts.model_id},
                {"object", "model"},
                {"created", created},
                {"owned_by", "deltafin"},
                {"type", "model"},
                {"display_name", opts.model_id},
                {"created_at", when},
                {"meta",
                 {{"arch", info.arch},
                  {"n_ctx", sched.options().n_ctx},
                  {"n_vocab", info.n_vocab},
                  {"n_parallel", sched.options().n_parallel},
                  {"batched", opts.batched}}}};
  }

  // Paths that take the API key: the model's endpoints (/health and /metrics stay open
  // for probes and scrapers).
  static bool needs_key(const std::string& path) {
    return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
  }

  // CORS: a request from an allowed origin gets Access-Control-Allow-Origin; a
  // preflight (OPTIONS) is answered here, before the key is checked (browsers send
  // none with it). True when the request is answered.
  bool cors(const httplib::Request& req, httplib::Response& res) {
    const std::string origin = req.get_header_value("Origin");
    const bool allowed =
        !origin.empty() && std::any_of(opts.cors_origins.begin(), opts.cors_origins.end(),
                                       [&](const std::string& o) { return o == "*" || o == origin; });
    if (allowed) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
    }
    if (req.method != "OPTIONS") return false;
    if (!allowed) {
      DF_LOG_WARN("refused a cross-origin request from '{}' (allow it with --cors)", origin);
      send_error(res, error(403,
                            origin.empty() ? "OPTIONS is only answered for cross-origin requests (an Origin header)"
                                           : fmt::format("cross-origin requests from '{}' are not allowed; start "
                                                         "the server with --cors '{}'", origin, origin)));
      return true;
    }
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
    res.set_header("Access-Control-Max-Age", "600");
    return true;
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    TokenizeRequest r;
    if (auto e = parse_tokenize_request(req.body, &r)) return send_error(res, *e);
    const std::vector<int32_t> ids = tok.encode(r.content, r.add_special, r.parse_special);
    PieceFn piece = [this](int32_t id) { return tok.piece(id, true); };
    res.set_content(tokenize_json(ids, r.with_pieces, piece).dump(), "application/json");
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    std::vector<int32_t> ids;
    if (auto e = parse_detokenize_request(req.body, tok.n_vocab(), &ids)) return send_error(res, *e);
    DecodeOptions d;
    d.unparse_special = true;
    res.set_content(json{{"content", unicode::sanitize_utf8(tok.decode(ids, d))}}.dump(), "application/json");
  }

  void routes() {
    http.set_payload_max_length(opts.max_body_bytes);
    http.set_read_timeout(30);
    http.set_write_timeout(60);

    // Answers given here come before the body is read: with a body, the connection
    // closes after the answer (the body's bytes are not the next request).
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const auto handled = [&req, &res] {
        const std::string length = req.get_header_value("Content-Length");
        if ((!length.empty() && length != "0") || req.has_header("Transfer-Encoding")) {
          GuardedServer::close_after_answer();
          res.set_header("Connection", "close");
        }
        return httplib::Server::HandlerResponse::Handled;
      };
      // A head whose body cannot be framed (connections.h).
      if (const char* why = GuardedServer::framing_error()) {
        send_error(res, error(GuardedServer::framing_status(), why));
        return handled();
      }
      if (cors(req, res)) return handled();
      if (opts.api_key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
      // 'Authorization: Bearer KEY', or Anthropic's 'x-api-key: KEY'.
      const std::string auth = req.get_header_value("Authorization"), x_key = req.get_header_value("x-api-key");
      const std::string prefix = "Bearer ";
      const bool anthropic = req.path.rfind("/v1/messages", 0) == 0;
      auto refuse = [&](const std::string& why) {
        const ApiError e = error(401, why, "invalid_request_error", "", "invalid_api_key");
        if (anthropic) {
          res.status = 401;
          res.set_content(anthropic_error_body(e).dump(), "application/json");
        } else {
          send_error(res, e);
        }
        return handled();
      };
      if (auth.empty() && x_key.empty())
        return refuse("no API key given: send it as 'Authorization: Bearer KEY' (or 'x-api-key: KEY')");
      const bool ok = !x_key.empty() ? same_key(x_key, opts.api_key)
                                     : auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), opts.api_key);
      if (!ok) return refuse("the API key is wrong");
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // our own error, already an OpenAI body
      // cpp-httplib's own 400 and 413 leave the rest of the request unread: close after them.
      if (res.status == 400 || res.status == 413) {
        GuardedServer::close_after_answer();
        res.set_header("Connection", "close");
      }
      std::string msg;
      switch (res.status) {
        case 404: msg = fmt::format("no endpoint {} {}", req.method, req.path); break;
        case 413: msg = fmt::format("the request body is larger than the limit of {} bytes", opts.max_body_bytes); break;
        case 400: msg = "malformed HTTP request"; break;
        default: msg = fmt::format("HTTP error {}", res.status);
      }
      send_error(res, error(res.status, msg, res.status >= 500 ? "server_error" : "invalid_request_error"));
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      DF_LOG_ERROR("request failed: {}", what);
      send_error(res, error(500, "internal error: " + what, "server_error"));
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.count_response(req.path, res.status);
      DF_LOG_INFO("{} {} -> {}", req.method, req.path, res.status);
    });

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (stopping) {
        res.status = 503;
        res.set_content(R"({"status":"shutting down"})", "application/json");
        return;
      }
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(sched.stats(), store, opts.memory_plan), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"object", "list"},
                           {"data", json::array({model_json()})},
                           {"has_more", false},  // Anthropic's page
                           {"first_id", opts.model_id},
                           {"last_id", opts.model_id}}
                          .dump(),
                      "application/json");
    });
    http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string id = req.matches[1];
      if (!serves(id))
        return send_error(res, error(404, fmt::format("the model '{}' does not exist", id), "invalid_request_error",
                                     "model", "model_not_found"));
      res.set_content(model_json().dump(), "application/json");
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { chat(req, res); });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completion(req, res); });
    http.Post("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) { responses(req, res); });
    http.Get(R"(/v1/responses/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string id = req.matches[1];
      if (std::optional<json> r = stored_responses.get_response(id)) return res.set_content(r->dump(), "application/json");
      send_error(res, error(404, fmt::format("no stored response '{}'", id), "invalid_request_error", "response_id"));
    });
    http.Delete(R"(/v1/responses/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string id = req.matches[1];
      if (!stored_responses.erase(id))
        return send_error(res, error(404, fmt::format("no stored response '{}'", id), "invalid_request_error",
                                     "response_id"));
      res.set_content(json{{"id", id}, {"object", "response"}, {"deleted", true}}.dump(), "application/json");
    });
    http.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) { messages(req, res); });
    http.Post("/v1/messages/count_tokens",
              [this](const httplib::Request& req, httplib::Response& res) { count_tokens(req, res); });
    http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
    http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
  }
};

Server::Server(Scheduler& sched, const Tokenizer& tok, const ModelInfo& info, const StreamingExpertStore* store,
               ServerOptions opts)
    : impl_(std::make_unique<Impl>(sched, tok, info, store, std::move(opts))) {}

Server::~Server() = default;

Result<int> Server::bind() {
  Impl& s = *impl_;
  const std::string& src = s.opts.chat_template.empty() ? std::string(kFallbackChatTemplate) : s.opts.chat_template;
  DF_ASSIGN(ChatPrompter p, ChatPrompter::make(src, s.tok, s.opts.template_kwargs, s.opts.reasoning));
  s.prompter.emplace(std::move(p));
  s.routes();
  // cpp-httplib's default socket options set SO_REUSEPORT, which lets a second server
  // bind a port another one listens on (and the kernel then splits the connections
  // between them). SO_REUSEADDR alone still allows a restart while old connections
  // linger in TIME_WAIT, but a busy port fails to bind, as with llama-server.
  s.http.set_socket_options([](auto sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int port = s.opts.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.opts.host);
    if (port < 0) return make_error("cannot listen on {}: no free port", s.opts.host);
  } else if (!s.http.bind_to_port(s.opts.host, port)) {
    return make_error("cannot listen on {}:{}: the port is in use (another server?) or {} is not an address of "
                      "this machine; choose another with --port (0: any free port)",
                      s.opts.host, port, s.opts.host);
  }
  s.http.widen_backlog();
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::set_draining() { impl_->stopping = true; }

void Server::stop() {
  impl_->stopping = true;
  impl_->http.stop();
}

}  // namespace deltafin::server
