// A reply's pieces (reasoning, text, calls) as a sequence of blocks, each opened, given
// its text and closed as the kind of text changes: the shape of the Responses API's
// output items and of Anthropic's content blocks. Whitespace alone opens no text block:
// it goes before the text that follows, or is dropped.
//
// Beside it, the writer interface every API answers through (ReplyWriter, driven by
// replies.h's write_reply): OpenAI's completions (openai_writer.h) and, as blocks,
// the Responses and Messages APIs (BlockReplyWriter).
#pragma once

#include <string>

#include "chat/reply_parser.h"
#include "server/api.h"

namespace deltafin {
struct GenUpdate;  // runtime/scheduler.h
}

namespace deltafin::server {

class ReplyBlocks {
 public:
  enum class Kind { None, Reasoning, Text, Call };
  // Writes a block's events; each returns what to send.
  struct Sink {
    virtual ~Sink() = default;
    virtual std::string open(Kind kind, const std::string& call_name) = 0;  // open_kind() is `kind` already
    virtual std::string delta(const std::string& text) = 0;                 // to the open block
    virtual std::string close() = 0;                                        // the open block (still open_kind())
  };
  explicit ReplyBlocks(Sink& sink) : sink_(sink) {}
  std::string push(const ReplyPiece& piece);
  std::string close();  // the open block, if any
  Kind open_kind() const { return open_; }
  size_t n_calls() const { return n_calls_; }

 private:
  std::string reopen(Kind kind, const std::string& call_name = {});

  Sink& sink_;
  Kind open_ = Kind::None;
  std::string held_space_;
  size_t n_calls_ = 0;
};

struct Replies;  // replies.h
class Metrics;   // metrics.h

// What write_reply needs of an API's writer to answer a request (OpenAIWriter,
// ResponseWriter, MessageWriter): the stream's events as its choices' replies come, or
// the whole body at the end.
struct ReplyWriter {
  virtual ~ReplyWriter() = default;
  virtual std::string start() = 0;  // the stream's first events
  // Choice i of r has news u (u.text, or its end): the events it makes. Reads the text
  // through the choice's ReplyParser (and stops the choice once the parser is full).
  virtual std::string update(Replies& r, int i, const GenUpdate& u) = 0;
  // Every choice has ended well: the last events (or the whole body); counts the calls in m.
  virtual std::string end(Replies& r, Metrics* m) = 0;
  virtual std::string fail(const std::string& message) = 0;  // the stream's error event
  virtual std::string whole() const = 0;                     // the body without `stream`, after end() or fail()
  virtual std::string keepalive() const = 0;                 // the stream's heartbeat
};

// A writer of one choice's reply as blocks (the Responses and Messages APIs): the
// pieces as they come, and the end with the first choice's finish reason.
struct BlockReplyWriter : ReplyWriter {
  std::string update(Replies& r, int i, const GenUpdate& u) override;
  std::string end(Replies& r, Metrics* m) override;
  virtual std::string push(const ReplyPiece& piece) = 0;  // events for a piece
  // The end: `stop_string` the stop string that ended it (""), `usage` in the chat shape.
  virtual std::string finish(const std::string& finish_reason, const std::string& stop_string, const json& usage) = 0;
  virtual size_t n_calls() const = 0;
};

}  // namespace deltafin::server
