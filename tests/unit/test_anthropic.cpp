// The Messages API's pure parts: content blocks -> the chat request the rest of the
// server validates, errors in Anthropic's shape, and the content blocks and events a
// reply's pieces become.
#include <gtest/gtest.h>

#include "server/anthropic.h"

namespace deltafin::server {
namespace {

TEST(Anthropic, BlocksBecomeAChatConversation) {
  json chat;
  const char* body = R"({"model":"m","max_tokens":50,"system":[{"type":"text","text":"Be "},{"type":"text","text":"terse."}],
    "messages":[{"role":"user","content":"Weather?"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"Use the tool.","signature":"s"},
        {"type":"text","text":"Checking."},{"type":"tool_use","id":"t1","name":"w","input":{"city":"Paris"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"sunny"}]},
        {"type":"tool_result","tool_use_id":"t2","content":"boom","is_error":true},{"type":"text","text":"Thanks"}]}],
    "tools":[{"name":"w","description":"weather","input_schema":{"type":"object"}}],
    "tool_choice":{"type":"any","disable_parallel_tool_use":true},
    "stop_sequences":["END"],"thinking":{"type":"enabled","budget_tokens":1024},"top_k":5})";
  ASSERT_FALSE(messages_to_chat(body, &chat));
  const json want = json::parse(R"([
    {"role":"system","content":"Be terse."},
    {"role":"user","content":"Weather?"},
    {"role":"assistant","content":"Checking.","tool_calls":[
      {"id":"t1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}}],
     "reasoning_content":"Use the tool."},
    {"role":"tool","tool_call_id":"t1","content":"sunny"},
    {"role":"tool","tool_call_id":"t2","content":"Error: boom"},
    {"role":"user","content":"Thanks"}])");
  EXPECT_EQ(chat["messages"], want) << chat["messages"].dump();
  EXPECT_EQ(chat["tools"],
            json::parse(R"([{"type":"function","function":{"name":"w","description":"weather","parameters":{"type":"object"}}}])"));
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["stop"], json::parse(R"(["END"])"));
  EXPECT_EQ(chat["chat_template_kwargs"], json::parse(R"({"thinking":true,"enable_thinking":true})"));
  EXPECT_EQ(chat["max_tokens"], 50);
  EXPECT_EQ(chat["top_k"], 5);
  ASSERT_FALSE(messages_to_chat(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool","name":"w"}})",
                                &chat));
  EXPECT_EQ(chat["tool_choice"], json::parse(R"({"type":"function","function":{"name":"w"}})"));
  // A tool's image (a screenshot) becomes a note; the conversation goes on.
  ASSERT_FALSE(messages_to_chat(R"({"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t",
    "content":[{"type":"text","text":"shot: "},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}]}]})",
                                &chat));
  EXPECT_EQ(chat["messages"][0]["content"], "shot: [an image, not shown: this model reads text only]");
}

TEST(Anthropic, BadRequestsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "messages"},
      {R"({"messages":[{"role":"system","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})", "messages[0].content[0]"},
      {R"({"messages":[{"role":"user","content":[{"type":"tool_result"}]}]})", "messages[0].content[0].tool_use_id"},
      {R"({"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"w"}]}]})", "messages[0].content[0]"},
      {R"({"messages":[{"role":"user","content":"x"}],"system":[{"type":"image"}]})", "system"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"some"}})", "tool_choice"},
  };
  for (const auto& [body, param] : cases) {
    json chat;
    auto e = messages_to_chat(body, &chat);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, param) << body << ": " << e->message;
  }
  ApiError e;
  e.status = 404;
  e.message = "no such model";
  EXPECT_EQ(anthropic_error_body(e), json::parse(R"({"type":"error","error":{"type":"not_found_error","message":"no such model"}})"));
  e.status = 400;
  e.param = "stop";
  EXPECT_EQ(messages_error(e).param, "stop_sequences");
}

TEST(Anthropic, PiecesBecomeBlocksAndEvents) {
  const json usage{{"prompt_tokens", 10}, {"completion_tokens", 4}, {"total_tokens", 14},
                   {"prompt_tokens_details", {{"cached_tokens", 3}}}};
  MessageWriter w("msg_1", "m", 10);
  std::string sse = w.start();
  sse += w.push(ReplyPiece{"hmm", "", {}});
  sse += w.push(ReplyPiece{"", " ", {}});
  sse += w.push(ReplyPiece{"", "Hi", {{0, "f", "{\"a\":"}}});
  sse += w.push(ReplyPiece{"", "", {{0, "", "1}"}}});
  sse += w.finish("stop", "", usage);
  std::vector<std::string> types;
  for (size_t at = 0; (at = sse.find("event: ", at)) != std::string::npos; at += 7)
    types.push_back(sse.substr(at + 7, sse.find('\n', at) - at - 7));
  const std::vector<std::string> want = {
      "message_start",
      "content_block_start", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "message_delta", "message_stop"};
  EXPECT_EQ(types, want);
  const json& m = w.message();
  EXPECT_EQ(m["content"], json::parse(R"([{"type":"thinking","thinking":"hmm","signature":""},
    {"type":"text","text":" Hi"},{"type":"tool_use","id":")" + m["content"][2]["id"].get<std::string>() +
                                      R"(","name":"f","input":{"a":1}}])"));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 7);  // the prompt less what the cache read
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 3);
  EXPECT_EQ(m["usage"]["output_tokens"], 4);

  MessageWriter s("msg_2", "m", 10);
  s.push(ReplyPiece{"", "ab", {}});
  s.finish("stop", "END", usage);
  EXPECT_EQ(s.message()["stop_reason"], "stop_sequence");
  EXPECT_EQ(s.message()["stop_sequence"], "END");
  MessageWriter l("msg_3", "m", 10);
  l.push(ReplyPiece{"", "", {{0, "f", "{\"a\":"}}});
  l.finish("length", "", usage);
  EXPECT_EQ(l.message()["stop_reason"], "max_tokens");
  EXPECT_EQ(l.message()["content"][0]["input"], json::object());  // cut short: no input
  MessageWriter e("msg_4", "m", 10);
  e.push(ReplyPiece{"", "ok", {}});
  e.finish("stop", "", usage);
  EXPECT_EQ(e.message()["stop_reason"], "end_turn");
  // A failure: an error event, and the whole body is Anthropic's error.
  MessageWriter f("msg_5", "m", 10);
  f.push(ReplyPiece{"", "ok", {}});
  EXPECT_NE(f.fail("generation failed: boom").find("event: error\n"), std::string::npos);
  EXPECT_EQ(json::parse(f.whole())["error"]["type"], "api_error");
}

}  // namespace
}  // namespace deltafin::server
