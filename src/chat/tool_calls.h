// Tool calls in a model's reply, turned into OpenAI's message.tool_calls: read as they
// stream by ToolCallStream, in the way the format's row (formats.h) says its calls are
// written (its CallSyntax and markers):
//
//   Hermes (JsonCall):       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Qwen3-Coder (Params):    <tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
//     (a value is typed by the tool's JSON schema where the request gives one: a
//     "string" parameter stays text, others are JSON; without, JSON if it parses)
//   Kimi K2 (NamedJson):     <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
//                            <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
//   DeepSeek V3.1 (NamedJson): <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   DeepSeek V3.2/V4 (DsmlParams, plain text):
//     <｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n
//     <｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>
//
// Calls follow the content, separated by whitespace only; a reply whose calls are not
// all well-formed stays plain content, as the model wrote it. Markers that are control
// tokens (Kimi K2's, DeepSeek's) must be shown by the detokenizer for this to see
// them: the row's `shown` lists them. Kimi K3's XTML replies are parsed by XtmlReply.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/formats.h"

namespace deltafin {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text
};

// A call as it streams: the first delta of a call carries its name, the others (and
// that one) add text to its arguments. Calls are numbered from 0 in reply order.
struct ToolCallDelta {
  size_t index = 0;
  std::string name;
  std::string arguments;
};

// Adds deltas to `calls` (a new call for each name).
void add_deltas(std::vector<ToolCall>* calls, const std::vector<ToolCallDelta>& deltas);

// Splits a whole reply into its content (trimmed; around the calls) and its calls.
// False (nothing set) when the reply has no call. Not for Xtml. tools: the request's
// (for the types of QwenXml's values), or null.
bool parse_tool_calls(ToolFormat f, const std::string& text, std::string* content, std::vector<ToolCall>* calls,
                      const nlohmann::ordered_json* tools = nullptr);

// Arguments streamed as the model writes them (a JSON object's text): leading
// whitespace dropped, trailing whitespace held back until more text follows (dropped
// at the end), and with `outer_brace` the last '}' too, which closes the enclosing
// object (Hermes' {"name": ..., "arguments": {...}}) and is dropped at the end. No
// text at all is "{}".
class RawArguments {
 public:
  explicit RawArguments(bool outer_brace = false) : outer_(outer_brace) {}
  std::string push(std::string_view s);  // what can be sent now
  std::string finish();                  // the rest

 private:
  bool outer_;
  bool started_ = false, sent_ = false;
  std::string held_;
};

struct ToolText {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

// Reads a streamed reply: content passes through until a call may begin (a marker
// split across pieces is held back); a call is sent as soon as its name is read, then
// its arguments as they come: a JSON object's text as the model writes it (Hermes,
// Kimi K2, DeepSeek V3.1), or one parameter at a time as compact JSON (Qwen3-Coder,
// DSML). Text that breaks the structure before a call is named comes out as content,
// as written; once named, a call stays a call (it ends where the structure breaks,
// and the rest is content), and a reply cut inside a call leaves it with what was
// read. Cutting the reply anywhere gives the same pieces in total. Single-threaded.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat f, nlohmann::ordered_json tools = nullptr);
  ToolText push(const std::string& text);
  ToolText finish();  // the end of the reply

 private:
  enum class St { Text, Section, Header, Raw, Params, AfterCall, Between };
  enum class Step { Done, More, Fail };
  Step step(ToolText* out);
  Step header(ToolText* out);
  Step params(ToolText* out);
  void named(const std::string& name, ToolText* out);  // a call begins
  void close_call(ToolText* out);                        // the call ends
  void fail(ToolText* out);                              // the structure broke here
  void eat(size_t n);                                    // consumes held text

  const ChatFormat& f_;  // the format's row
  nlohmann::ordered_json tools_;
  std::string held_;   // text not consumed yet
  St st_ = St::Text;
  std::string raw_;    // consumed text since a call or section began, until a call is named
  size_t n_calls_ = 0;
  bool in_call_ = false;  // a named call is open
  bool section_calls_ = false;
  bool hermes_whole_ = false;  // Hermes not written as {"name": "f", "arguments": {...}}: read at its end
  std::string name_;           // the open call's
  int n_params_ = 0;
  RawArguments args_;
};

}  // namespace deltafin
