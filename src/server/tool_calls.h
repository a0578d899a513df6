// Tool calls in a model's reply, turned into OpenAI's message.tool_calls: the Hermes
// format that Qwen2.5/Qwen3 (and QwQ, Hermes 2/3) templates teach the model,
//
//   [content]<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>...
//
// A reply whose calls are not all well-formed (JSON with a string name) stays plain
// content, as the model wrote it. Formats whose markers are control tokens the
// detokenizer does not show (Kimi K2/K3, DeepSeek) are not recognised yet.
#pragma once
#include <string>
#include <vector>

namespace deltafin::server {

enum class ToolFormat { None, Hermes };

// The format a chat template teaches (None: calls are not parsed).
ToolFormat tool_format_of(const std::string& template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text
};

// Splits a whole reply into the content before the first call and the calls. False
// (nothing set) when the reply has no call or one is not well-formed.
bool parse_tool_calls(ToolFormat f, const std::string& text, std::string* content, std::vector<ToolCall>* calls);

// The same on a streamed reply: content passes through until a call may begin (a
// tag split across pieces is held back), everything from there is held until the
// end, where it becomes the calls, or content again if they are not well-formed.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat f) : f_(f) {}
  std::string push(const std::string& content);  // content to send now
  // At the end: the calls (empty: none) and the held content still to send.
  std::vector<ToolCall> finish(std::string* rest);

 private:
  ToolFormat f_;
  std::string held_;
  bool in_call_ = false;
};

}  // namespace deltafin::server
