// OpenAI's chat and text completion replies (/v1/chat/completions, /v1/completions) as
// a ReplyWriter (reply_blocks.h): each choice's reasoning_content, content and
// tool_calls as "chat.completion.chunk" deltas (text completions: "text_completion"
// text), with its logprobs and, for `echo`, the prompt's text first; or the whole
// object with every choice's message at the end. No HTTP here.
#pragma once

#include <string>

#include "server/api.h"
#include "server/reply_blocks.h"

namespace deltafin::server {

class OpenAIWriter : public ReplyWriter {
 public:
  struct Options {
    bool chat = true;            // chat completion (else text completion)
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
    bool echo = false;           // text completions: the prompt's text comes first
    bool logprobs = false;       // the request asked for logprobs
  };
  // n_choices: the request's n. piece: a token's text for the logprobs. m: counts the
  // calls read (streaming: as each choice ends).
  OpenAIWriter(std::string id, std::string model, int64_t created, size_t n_choices, Options o, PieceFn piece,
               Metrics* m);
  std::string start() override;  // the chat stream's role chunks
  std::string update(Replies& r, int i, const GenUpdate& u) override;
  std::string end(Replies& r, Metrics* m) override;  // usage chunk and [DONE], or the whole object
  std::string fail(const std::string& message) override;   // the error event and [DONE] (whole(): the error body)
  std::string whole() const override { return whole_; }
  std::string keepalive() const override { return ": keep-alive\n\n"; }

 private:
  json head(const char* object) const;
  std::string chunk(int index, const json& delta_or_text, const json& finish, json lps = nullptr) const;
  std::string text_chunks(int index, Replies& r, const ReplyPiece& t);
  json take_lps(Replies& r, int index, size_t n = SIZE_MAX) const;  // a choice's logprobs not sent yet, as JSON

  std::string id_, model_;
  int64_t created_;
  size_t n_choices_;
  Options o_;
  PieceFn piece_;
  Metrics* metrics_;
  std::string whole_;
};

}  // namespace deltafin::server
