// Tool calls in replies (the Hermes format of Qwen2.5/Qwen3 templates): a reply the
// Qwen3 template itself renders from tool_calls parses back into them; the streamed
// parser, fed the reply cut at every position, sends the same content and the same
// calls; malformed calls stay content, exactly as written.
#include <gtest/gtest.h>

#include "chat/tool_calls.h"
#include "shared_files.h"
#include "tokenizer/chat_template.h"

using namespace deltafin;
using json = nlohmann::ordered_json;

namespace {

// Feeds `text` in pieces of `every` bytes: the content sent and the calls.
std::pair<std::string, std::vector<ToolCall>> stream_in_pieces(const std::string& text, size_t every) {
  ToolCallStream s(ToolFormat::Hermes);
  std::string sent;
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < text.size(); i += every) {
    ToolText t = s.push(text.substr(i, every));
    sent += t.content;
    add_deltas(&calls, t.calls);
  }
  ToolText t = s.finish();
  add_deltas(&calls, t.calls);
  return {sent + t.content, calls};
}

}  // namespace

TEST(ToolCalls, FormatOfTheTemplate) {
  EXPECT_EQ(tool_format_of(read_template("Qwen-Qwen3-0.6B.jinja")), ToolFormat::Hermes);
  EXPECT_EQ(tool_format_of(read_template("Qwen-Qwen2.5-7B-Instruct.jinja")), ToolFormat::Hermes);
  EXPECT_EQ(tool_format_of(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja")), ToolFormat::None);
}

TEST(ToolCalls, WhatTheQwen3TemplateRendersParsesBack) {
  auto t = ChatTemplate::parse(read_template("Qwen-Qwen3-0.6B.jinja"));
  ASSERT_TRUE(t.ok()) << t.error().message;
  const json calls = json::parse(R"([
      {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
      {"id": "b", "type": "function", "function": {"name": "now", "arguments": {}}}])");
  const json messages = json::array({json{{"role", "user"}, {"content", "Weather?"}},
                                     json{{"role", "assistant"}, {"content", "Let me look."}, {"tool_calls", calls}}});
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}])");
  auto r = t->apply(messages, tools, false, json::object());
  ASSERT_TRUE(r.ok()) << r.error().message;
  // The assistant's turn as the model would have written it.
  const std::string& text = *r;
  const size_t a = text.rfind("<|im_start|>assistant\n");
  ASSERT_NE(a, std::string::npos);
  const size_t b = text.find("<|im_end|>", a);
  std::string reply = text.substr(a + 22, b - a - 22);
  if (reply.rfind("<think>", 0) == 0) reply = reply.substr(reply.find("</think>") + 8);
  std::string content;
  std::vector<ToolCall> got;
  ASSERT_TRUE(parse_tool_calls(ToolFormat::Hermes, reply, &content, &got)) << reply;
  EXPECT_EQ(content, "Let me look.");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "get_weather");
  EXPECT_EQ(json::parse(got[0].arguments), json::parse(R"({"city": "Paris", "days": 2})"));
  EXPECT_EQ(got[1].name, "now");
  EXPECT_EQ(got[1].arguments, "{}");
  // Streamed, cut anywhere: the same.
  for (size_t every = 1; every <= reply.size(); ++every) {
    auto [sent, sc] = stream_in_pieces(reply, every);
    ASSERT_EQ(sc.size(), 2u) << "pieces of " << every;
    EXPECT_EQ(sc[0].arguments, got[0].arguments);
    EXPECT_NE(sent.find(content), std::string::npos) << "pieces of " << every;
    EXPECT_LE(sent.size(), content.size() + 3) << "only the whitespace around it: " << sent;
    EXPECT_EQ(sent.find("<tool_call>"), std::string::npos) << "pieces of " << every;
  }
}

TEST(ToolCalls, VariantsAndMalformedReplies) {
  std::string content;
  std::vector<ToolCall> calls;
  // Arguments as a JSON string; no content; the last call not closed (a stop string).
  ASSERT_TRUE(parse_tool_calls(ToolFormat::Hermes,
                               "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>\n"
                               "<tool_call>{\"name\": \"g\"}",
                               &content, &calls));
  EXPECT_EQ(content, "");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(calls[1].name, "g");
  EXPECT_EQ(calls[1].arguments, "{}");
  // Text after a call is content.
  ASSERT_TRUE(parse_tool_calls(ToolFormat::Hermes, "<tool_call>{\"name\": \"f\"}</tool_call> and more", &content,
                               &calls));
  EXPECT_EQ(content, "and more");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].arguments, "{}");
  // Not calls: no tag, bad JSON, no name, arguments not an object, another format.
  for (const std::string& bad : {std::string("just text"), std::string("<tool_call>{\"name\": </tool_call>"),
                                std::string("<tool_call>{\"arguments\": {}}</tool_call>"),
                                std::string("<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>")}) {
    EXPECT_FALSE(parse_tool_calls(ToolFormat::Hermes, bad, &content, &calls)) << bad;
    for (size_t every : {size_t(1), size_t(3), bad.size()}) {
      auto [sent, sc] = stream_in_pieces(bad, every);
      EXPECT_TRUE(sc.empty()) << bad;
      EXPECT_EQ(sent, bad) << "a malformed call comes out as the model wrote it";
    }
  }
  EXPECT_FALSE(parse_tool_calls(ToolFormat::None, "<tool_call>{\"name\": \"f\"}</tool_call>", &content, &calls));
  // Text that only looks like the start of a tag is not held back for good.
  ToolCallStream s(ToolFormat::Hermes);
  EXPECT_EQ(s.push("a <tool").content, "a ");
  EXPECT_EQ(s.push("box> b").content, "<toolbox> b");
}

// A call streams: its name as soon as its head is read, then its arguments as the model
// writes them (Hermes: the object's text, without the '}' that closes the call; Kimi K2:
// the text up to its end marker), not all at the end of the reply.
TEST(ToolCalls, CallsStreamAsTheyAreWritten) {
  ToolCallStream h(ToolFormat::Hermes);
  ToolText t = h.push("Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(t.content, "Sure.\n");
  EXPECT_TRUE(t.calls.empty()) << "an object or a string holding one may follow";
  t = h.push("{\"city\": \"Par");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].name, "get_weather");
  EXPECT_EQ(t.calls[0].arguments, "");
  EXPECT_EQ(t.calls[1].name, "");
  EXPECT_EQ(t.calls[1].arguments, "{\"city\": \"Par");
  t = h.push("is\"}}\n</tool");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].arguments, "is\"}") << "the last brace may close the call's object";
  t = h.push("_call>");
  EXPECT_TRUE(t.calls.empty()) << "it did";
  EXPECT_TRUE(h.finish().calls.empty());

  ToolCallStream k(ToolFormat::KimiK2);
  t = k.push("<|tool_calls_section_begin|><|tool_call_begin|>functions.now:0<|tool_call_argument_begin|> {\"tz\"");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].name, "now");
  EXPECT_EQ(t.calls[1].arguments, "{\"tz\"");
  t = k.push(": 1} <|tool_call_end|><|tool_call_begin|>functions.f:1<|tool_call_argument_begin|>{}");
  ASSERT_EQ(t.calls.size(), 3u);
  EXPECT_EQ(t.calls[0].arguments, ": 1}");
  EXPECT_EQ(t.calls[1].index, 1u);
  EXPECT_EQ(t.calls[1].name, "f");
  EXPECT_EQ(t.calls[2].arguments, "{}");
  t = k.push("<|tool_call_end|><|tool_call_begin|>functions.g:2<|tool_call_argument_begin|> <|tool_call_end|>");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[1].arguments, "{}") << "no arguments written: none";
  t = k.finish();
  EXPECT_TRUE(t.calls.empty() && t.content.empty());

  // Qwen3-Coder's XML: one parameter at a time, as JSON.
  ToolCallStream q(ToolFormat::QwenXml);
  t = q.push("<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter>\n<parameter=b>\n1");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[1].arguments, "{\"a\":\"x\"");
  t = q.push("\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].arguments + t.calls[1].arguments, ",\"b\":1}");
}
