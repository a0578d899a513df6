// tool_choice "required" or a named function, enforced: the reply is a call (or up to
// max_calls calls), in the chat format's own markup, to the named tool (or to any of the
// request's tools), its arguments following that tool's parameter schema where JsonGrammar takes it (else
// any object). The text before the arguments decides the tool, so with several tools
// each keeps its own schema:
//
//   Hermes (Qwen3...):  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Kimi K2:            <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
//                       <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
//   DeepSeek V3.1:      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   Kimi K3 (XTML):     closes what the prompt left open inside the message (response),
//                       then <|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>
//                       <|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>
//                       <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>
//
//   Qwen3-Coder, Qwen3.5: <tool_call>\n<function=f>\n<parameter=k>\nvalue\n</parameter>\n
//                       </function>\n</tool_call>
//   DSML (DeepSeek V3.2/V4): <｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n
//                       <｜DSML｜parameter name="k" string="true">value</｜DSML｜parameter>\n
//                       </｜DSML｜invoke>\n</｜DSML｜function_calls>
//
// as their templates render a call in the history. Several calls follow one another as
// the templates render them: in one section (K2, DeepSeek, XTML, DSML), Hermes and
// Qwen3-Coder calls a newline apart; K2 numbers them on from the calls in the prompt,
// K3 from 1. In the two parameter formats the parameters come in the schema's order,
// the required ones always and the optional ones where the model writes them (none can
// be given twice or out of order), a string's value as free text, any other as JSON of
// its schema. A prompt that leaves
// <think> open gets it closed first. The markers come as the vocabulary's single
// tokens where it has them (JsonGrammar::force_token), as the model was trained to
// write them.
#pragma once
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "json/json_grammar.h"
#include "chat/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

// The most calls a forced reply may hold (parallel_tool_calls).
constexpr int kMaxForcedCalls = 8;

// Null where the format cannot be enforced (its row has no `forced`), tool_choice asks for no call, or no tool
// matches. prompt: the rendered prompt the reply continues. The reply holds 1 to
// max_calls calls, to the first 255 tools (JsonGrammar::kMaxChoices less the close).
std::shared_ptr<const JsonGrammar> forced_call_grammar(ToolFormat f, const nlohmann::ordered_json& tools,
                                                       const nlohmann::ordered_json& tool_choice,
                                                       std::string_view prompt, const Tokenizer& tok,
                                                       int max_calls = 1);

}  // namespace deltafin
