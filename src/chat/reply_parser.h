// One choice's reply as a chat client sees it: reasoning, content and tool calls, read
// from the model's streamed text (with the format's marker tokens shown). The chat
// template decides the format: <think> tags and tool calls in one of the ToolFormats,
// or Kimi K3's XTML, where the structure carries all three.
//
// Streaming and whole responses use the same pieces: a non-streamed reply is what
// the pieces add up to. Single-threaded.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "chat/xtml.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

struct ReplyFormat {
  bool think = false;       // keep reasoning apart from content
  bool think_open = false;  // the prompt ends inside <think>
  ToolFormat tools = ToolFormat::None;  // calls to read (None: the request has no tools)
  nlohmann::ordered_json tool_defs;     // the request's tools (their parameters' types)
  bool xtml = false;                    // Kimi K3: the reply is XTML
  std::vector<std::string> xtml_open;   // xtml: the tags open at the prompt's end
  // >= 0: the reply ends where a call beyond this many begins (parallel_tool_calls
  // false: 1; Kimi K3's XTML with tool_choice none: 0); what follows is dropped and
  // full() tells the caller to stop generating. < 0: no limit.
  int max_calls = -1;
};

struct ReplyPiece {
  std::string reasoning, content;
  std::vector<ToolCallDelta> calls;  // as they stream (add_deltas() collects them)
};

// The marker tokens a reply of this format is read by, where the vocabulary has them
// (GenerateParams/GenRequest::shown_tokens: control tokens are otherwise not shown).
std::vector<int32_t> marker_tokens(const Tokenizer& tok, const ReplyFormat& f);

class ReplyParser {
 public:
  explicit ReplyParser(const ReplyFormat& f);
  ReplyPiece push(const std::string& text);  // what can be sent now
  ReplyPiece finish();                       // the rest, and the calls
  bool full() const { return full_; }        // a call beyond max_calls began: the reply is over

 private:
  ReplyPiece cap(ReplyPiece p);  // drops what comes from the first call beyond max_calls on
  std::optional<XtmlReply> xtml_;
  ReasoningSplitter split_;
  ToolCallStream tools_;
  int max_calls_ = -1;
  bool full_ = false;
};

}  // namespace deltafin
