#include "chat/formats.h"

#include <nlohmann/json.hpp>

#include <array>
#include <vector>

#include "chat/reasoning.h"
#include "chat/xtml.h"

namespace deltafin {

namespace {

bool has(std::string_view src, std::string_view s) { return src.find(s) != std::string_view::npos; }

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \n\t\r");
  if (a == std::string_view::npos) return {};
  return std::string(s.substr(a, s.find_last_not_of(" \n\t\r") - a + 1));
}

std::string json_name(const std::string& n) { return nlohmann::ordered_json(n).dump(); }

// --- Hermes (Qwen2.5/Qwen3, QwQ, Hermes 2/3) and Qwen3-Coder (XML) ----------------
constexpr std::array<std::string_view, 2> kHermesShown{"<tool_call>", "</tool_call>"};
bool detect_hermes(std::string_view t) { return has(t, "<tool_call>"); }
bool detect_qwen_xml(std::string_view t) { return has(t, "<tool_call>") && has(t, "<function="); }
constexpr CallWriting kHermesWriting{"", "<tool_call>\n{\"name\": {name}, \"arguments\": ", "}\n</tool_call>", "\n",
                                     "", false, nullptr, json_name};
constexpr CallWriting kQwenXmlWriting{"", "<tool_call>\n<function={name}>\n", "</function>\n</tool_call>", "\n", "",
                                      true};

// --- Kimi K2 ----------------------------------------------------------------------
constexpr std::array<std::string_view, 5> kKimiK2Shown{"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                                       "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                                                       "<|tool_call_end|>"};
bool detect_kimi_k2(std::string_view t) { return has(t, kKimiK2Shown[0]); }

// Kimi K2 names a call "functions.NAME:INDEX".
std::string kimi_k2_name(std::string_view id) {
  std::string s = trim(id);
  if (s.rfind("functions.", 0) == 0) s.erase(0, 10);
  const size_t colon = s.rfind(':');
  if (colon != std::string::npos && colon + 1 < s.size() &&
      s.find_first_not_of("0123456789", colon + 1) == std::string::npos)
    s.resize(colon);
  return s;
}

// Kimi K2 numbers calls across the conversation (its template's counter).
int kimi_k2_calls_before(std::string_view prompt) {
  int seen = 0;
  for (size_t at = prompt.find("<|tool_call_begin|>"); at != std::string_view::npos;
       at = prompt.find("<|tool_call_begin|>", at + 1))
    ++seen;
  return seen;
}

constexpr CallWriting kKimiK2Writing{"<|tool_calls_section_begin|>",
                                     "<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>",
                                     "<|tool_call_end|>", "", "<|tool_calls_section_end|>", false,
                                     kimi_k2_calls_before};

// --- DeepSeek V3.1 and DSML (DeepSeek V3.2/V4, plain text) ------------------------
constexpr std::array<std::string_view, 5> kDeepSeekShown{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                                                         "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                                                         "<｜tool▁call▁end｜>"};
bool detect_deepseek(std::string_view t) { return has(t, kDeepSeekShown[0]); }
bool detect_dsml(std::string_view t) { return has(t, "DSML｜"); }
constexpr CallWriting kDeepSeekWriting{"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>",
                                       "<｜tool▁call▁end｜>", "", "<｜tool▁calls▁end｜>"};
constexpr CallWriting kDsmlWriting{"<｜DSML｜function_calls>\n", "<｜DSML｜invoke name=\"{name}\">\n",
                                   "</｜DSML｜invoke>\n", "", "</｜DSML｜function_calls>", true};

// --- Kimi K3 (XTML, xtml.h) -------------------------------------------------------
constexpr std::array<std::string_view, 3> kXtmlShown{"<|open|>", "<|close|>", "<|sep|>"};
bool detect_xtml(std::string_view t) { return has(t, "<|open|>") && has(t, "<|close|>") && has(t, "<|sep|>"); }

std::string xtml_attr(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

int one(std::string_view) { return 1; }  // K3 numbers a reply's calls from 1

// Closes what the prompt left open inside the message (its `response`, say).
std::string xtml_opening(std::string_view prompt) {
  std::vector<std::string> open = xtml_open_tags(prompt);
  std::string out;
  for (size_t i = open.size(); i-- > 0 && open[i] != "message";) out += "<|close|>" + open[i] + "<|sep|>";
  return out;
}

constexpr CallWriting kXtmlWriting{"<|open|>tools<|sep|>",
                                   "<|open|>call tool=\"{name}\" index=\"{index}\"<|sep|><|open|>json type=\"object\"<|sep|>",
                                   "<|close|>json<|sep|><|close|>call<|sep|>", "",
                                   "<|close|>tools<|sep|><|close|>message<|sep|>", false, one, xtml_attr, xtml_opening};

bool detect_any(std::string_view) { return true; }

// The table. Order is detection order: XTML's markers before everything; K2 and DSML
// before DeepSeek V3.1 (DSML templates may mention the older markers); Qwen3-Coder
// before Hermes (both open calls with <tool_call>).
//   id, name, detect, syntax,
//   calls_open, calls_close, call_open, call_close, name_open, name_end,
//   param_open, param_key_end, param_close, think_open, think_close, shown, call_name, forced
constexpr ChatFormat kFormats[] = {
    {ToolFormat::Xtml, "xtml", detect_xtml, CallSyntax::Xtml,
     "<|open|>tools<|sep|>", "<|close|>tools<|sep|>", "<|open|>call", "<|close|>call<|sep|>", " tool=\"", "\"",
     "<|open|>argument key=\"", "\"", "<|close|>argument<|sep|>", "<|open|>think<|sep|>", "<|close|>think<|sep|>",
     kXtmlShown, nullptr, &kXtmlWriting},
    {ToolFormat::KimiK2, "kimi_k2", detect_kimi_k2, CallSyntax::NamedJson,
     "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>", "",
     "<|tool_call_argument_begin|>", "", "", "", kThinkOpen, kThinkClose, kKimiK2Shown, kimi_k2_name, &kKimiK2Writing},
    {ToolFormat::Dsml, "dsml", detect_dsml, CallSyntax::DsmlParams,
     "<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "<｜DSML｜invoke name=\"", "</｜DSML｜invoke>", "", "\">",
     "<｜DSML｜parameter name=\"", "\"", "</｜DSML｜parameter>", kThinkOpen, kThinkClose, {}, nullptr, &kDsmlWriting},
    {ToolFormat::DeepSeek, "deepseek", detect_deepseek, CallSyntax::NamedJson,
     "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "", "<｜tool▁sep｜>",
     "", "", "", kThinkOpen, kThinkClose, kDeepSeekShown, nullptr, &kDeepSeekWriting},
    {ToolFormat::QwenXml, "qwen_xml", detect_qwen_xml, CallSyntax::Params,
     "<tool_call>", "</tool_call>", "", "</function>", "<function=", ">",
     "<parameter=", ">", "</parameter>", kThinkOpen, kThinkClose, kHermesShown, nullptr, &kQwenXmlWriting},
    {ToolFormat::Hermes, "hermes", detect_hermes, CallSyntax::JsonCall,
     "<tool_call>", "</tool_call>", "", "", "", "",
     "", "", "", kThinkOpen, kThinkClose, kHermesShown, nullptr, &kHermesWriting},
    {ToolFormat::None, "none", detect_any, CallSyntax::None,
     "", "", "", "", "", "", "", "", "", kThinkOpen, kThinkClose, {}, nullptr, nullptr},
};

}  // namespace

std::span<const ChatFormat> chat_formats() { return kFormats; }

const ChatFormat& chat_format(ToolFormat f) {
  for (const ChatFormat& row : kFormats)
    if (row.id == f) return row;
  return kFormats[std::size(kFormats) - 1];
}

const ChatFormat& chat_format_of(std::string_view chat_template) {
  for (const ChatFormat& row : kFormats)
    if (row.detect(chat_template)) return row;
  return kFormats[std::size(kFormats) - 1];
}

}  // namespace deltafin
