// Kimi K3's replies (XTML): the structure is marked with the control tokens <|open|>,
// <|close|> and <|sep|> (which the detokenizer must show for this to see them):
//
//   <|open|>think<|sep|>reasoning<|close|>think<|sep|>
//   <|open|>response<|sep|>answer<|close|>response<|sep|>
//   <|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>
//     <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
//     (or the whole object: <|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>)
//   <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>
//
// XtmlReply routes a streamed reply: text in `think` is reasoning, text elsewhere
// (normally in `response`) is content, the markers are dropped, and each `call`
// becomes tool-call deltas (tool_calls.h) as it streams: its name as soon as its tag
// is read, then each argument as it closes (typed by its `type`: string values stay
// text, others are JSON), or a json block's text as it comes. A call without a tool
// name comes back as content at the end, markers and all; a named call the reply
// leaves unfinished keeps what was read. Single-threaded.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"

namespace deltafin {

// The tags open at the end of `text` (a rendered prompt), outermost first: where the
// reply starts, e.g. {"message", "think"}.
std::vector<std::string> xtml_open_tags(std::string_view text);

class XtmlReply {
 public:
  // open: xtml_open_tags() of the prompt. reasoning = false: thinking is content too.
  XtmlReply(std::vector<std::string> open, bool reasoning);
  SplitText push(const std::string& text);
  // At the end: what was held back, and an unfinished call as content.
  SplitText finish();
  // The call deltas since the last take (push and finish add them).
  std::vector<ToolCallDelta> take_calls() { return std::exchange(deltas_, {}); }

 private:
  void text(std::string_view s, SplitText* out);
  void pop();
  void add_args(std::string a);  // to the open call's arguments

  std::vector<std::string> stack_;
  bool reasoning_;
  std::string buf_;
  std::string gap_;  // whitespace between the parts, dropped if a tag follows it
  // The call being read: its raw text (for an unnamed one), whether it is named, the
  // value being read (an argument's or a json block's), how many arguments are out,
  // and whether a json block's text is being (or was) sent as the arguments.
  bool in_call_ = false, named_ = false;
  std::string call_raw_;
  std::string value_, arg_key_, arg_type_;
  int n_args_ = 0;
  bool json_streaming_ = false, json_done_ = false;
  RawArguments json_args_;
  size_t n_calls_ = 0;
  std::vector<ToolCallDelta> deltas_;
  std::string unnamed_;  // calls without a tool name, as written: content at the end
};

}  // namespace deltafin
