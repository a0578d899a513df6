// Tool calls in a model's reply, turned into OpenAI's message.tool_calls. The formats
// the chat templates teach:
//
//   Hermes (Qwen2.5/Qwen3, QwQ, Hermes 2/3):
//     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Qwen3-Coder (XML):
//     <tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
//     (a value is typed by the tool's JSON schema where the request gives one: a
//     "string" parameter stays text, others are JSON; without, JSON if it parses)
//   Kimi K2:
//     <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
//     <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
//   DeepSeek V3.1:
//     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   DeepSeek V3.2/V4 (DSML, plain text):
//     <｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n
//     <｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>
//
// Calls follow the content, separated by whitespace only; a reply whose calls are not
// all well-formed stays plain content, as the model wrote it. Markers that are control
// tokens (Kimi K2's, DeepSeek's) must be shown by the detokenizer for this to see
// them: tool_markers() lists them. Kimi K3's XTML replies are parsed by XtmlReply.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltafin {

enum class ToolFormat { None, Hermes, QwenXml, KimiK2, DeepSeek, Dsml, Xtml };

// The format a chat template teaches (None: calls are not parsed).
ToolFormat tool_format_of(const std::string& template_source);

// The marker texts of a format (to show if they are control tokens).
std::vector<std::string_view> tool_markers(ToolFormat f);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text
};

// Splits a whole reply into the content before the first call and the calls. False
// (nothing set) when the reply has no call or one is not well-formed. Not for Xtml.
// tools: the request's (for the types of QwenXml's values), or null.
bool parse_tool_calls(ToolFormat f, const std::string& text, std::string* content, std::vector<ToolCall>* calls,
                      const nlohmann::ordered_json* tools = nullptr);

// The same on a streamed reply: content passes through until a call may begin (a
// marker split across pieces is held back), everything from there is held until the
// end, where it becomes the calls, or content again if they are not well-formed.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat f, nlohmann::ordered_json tools = nullptr) : f_(f), tools_(std::move(tools)) {}
  std::string push(const std::string& content);  // content to send now
  // At the end: the calls (empty: none) and the held content still to send.
  std::vector<ToolCall> finish(std::string* rest);

 private:
  ToolFormat f_;
  nlohmann::ordered_json tools_;
  std::string held_;
  bool in_call_ = false;
};

}  // namespace deltafin
