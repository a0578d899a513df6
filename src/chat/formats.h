// The chat formats, one row each (the way kernels/types.h is one row per type): how a
// chat template is recognised, the markers its replies carry (tool calls, reasoning),
// how a reply's calls are read (tool_calls.h's ToolCallStream, or xtml.h's XtmlReply
// where the structure carries everything) and how a forced call is written
// (forced_calls.h). Everything that depends on the format reads its row; adding a
// format is a row in formats.cpp (and, for a new way of writing calls, a CallSyntax).
//
//   row        templates                          a call
//   xtml       Kimi K3                            <|open|>call tool="f" ...<|close|>call<|sep|> (xtml.h)
//   kimi_k2    Kimi K2                            <|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}<|tool_call_end|>
//   dsml       DeepSeek V3.2/V4                   <｜DSML｜invoke name="f"> <｜DSML｜parameter ...>v</｜DSML｜parameter> </｜DSML｜invoke>
//   deepseek   DeepSeek V3.1                      <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
//   qwen_xml   Qwen3-Coder, Qwen3.5               <tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>
//   hermes     Qwen2.5/Qwen3, QwQ, Hermes 2/3     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   none       any other                          (calls are not read)
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace deltafin {

enum class ToolFormat { None, Hermes, QwenXml, KimiK2, DeepSeek, Dsml, Xtml };

// How a format writes a call, which decides how ToolCallStream reads it.
enum class CallSyntax {
  None,       // no calls
  JsonCall,   // calls_open, {"name": "f", "arguments": {...}}, calls_close (Hermes)
  NamedJson,  // in a section: call_open, name, name_end, a JSON object, call_close (Kimi K2, DeepSeek V3.1)
  Params,     // calls_open, name_open name name_end, parameters, call_close, calls_close (Qwen3-Coder)
  DsmlParams, // in a section: call_open name name_end, parameters with a string="..." flag, call_close (DSML)
  Xtml,       // the reply's whole structure (xtml.h)
};

// How a forced reply of calls is written (forced_calls.h): `begin` + calls + `close`,
// each call `call_head` + arguments + `call_tail`, calls apart by `sep`. {name} and
// {index} in call_head stand for the tool's name (as name() writes it) and the call's
// index, the first first_index(prompt). `params`: the arguments are parameters in the
// row's markers, else a JSON object. opening(prompt) ends what the prompt left open
// before the calls may start.
struct CallWriting {
  std::string_view begin, call_head, call_tail, sep, close;
  bool params = false;
  int (*first_index)(std::string_view prompt) = nullptr;    // null: 0
  std::string (*name)(const std::string& tool) = nullptr;   // null: as it is
  std::string (*opening)(std::string_view prompt) = nullptr;  // null: closes a <think> the prompt left open
};

struct ChatFormat {
  ToolFormat id;
  std::string_view name;
  // True when a chat template teaches this format. Rows are tried in order and the
  // first that says so wins (a later row may detect a subset of an earlier one's text).
  bool (*detect)(std::string_view chat_template);
  CallSyntax syntax;
  // The markers of its calls (empty where the format has none):
  std::string_view calls_open, calls_close;  // where calls begin and end (a section, or each call)
  std::string_view call_open, call_close;    // a call inside a section (or a parameter call's end)
  std::string_view name_open, name_end;      // around a call's name, after call_open
  std::string_view param_open, param_key_end, param_close;  // a parameter: param_open key param_key_end ... value param_close
  // The markers of its reasoning: text between them is reasoning_content.
  std::string_view think_open, think_close;
  // The markers that are control tokens: a detokenizer must show them for the reply
  // to be read (GenerateParams::shown_tokens), and a forced call writes them as tokens.
  std::span<const std::string_view> shown;
  // A call's name from the text between name_open and name_end (null: trimmed).
  std::string (*call_name)(std::string_view header);
  // How a forced call is written; null where calls cannot be forced.
  const CallWriting* forced;
};

// Every format, in detection order (the last is None).
std::span<const ChatFormat> chat_formats();

// The row of a format.
const ChatFormat& chat_format(ToolFormat f);

// The format a chat template teaches (the None row: calls are not parsed).
const ChatFormat& chat_format_of(std::string_view chat_template);
inline ToolFormat tool_format_of(std::string_view chat_template) { return chat_format_of(chat_template).id; }

}  // namespace deltafin
