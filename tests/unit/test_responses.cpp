// The Responses API's pure parts: input items -> the chat request the rest of the
// server validates, errors named by the Responses field, and the output items and
// events a reply's pieces become.
#include <gtest/gtest.h>

#include "server/responses.h"

namespace deltafin::server {
namespace {

const EarlierResponse none = [](const std::string&) { return std::optional<json>(); };

json events_of(const std::string& sse) {  // "event: T\ndata: {...}\n\n"... -> [data...]
  json out = json::array();
  size_t at = 0;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    out.push_back(json::parse(sse.substr(at + 6, end - at - 6)));
    at = end;
  }
  return out;
}

TEST(Responses, InputItemsBecomeAChatConversation) {
  json chat, echo;
  const char* body = R"({"model":"m","instructions":"Be terse.","max_output_tokens":9,"seed":3,
    "input":[{"role":"user","content":[{"type":"input_text","text":"Wea"},{"type":"input_text","text":"ther?"}]},
             {"type":"reasoning","id":"rs_1","summary":[]},
             {"type":"function_call","call_id":"c1","name":"w","arguments":"{\"a\":1}"},
             {"type":"function_call","call_id":"c2","name":"w","arguments":"{}"},
             {"type":"function_call_output","call_id":"c1","output":"sunny"},
             {"type":"message","role":"assistant","content":[{"type":"output_text","text":"It is sunny."}]}],
    "tools":[{"type":"function","name":"w","parameters":{"type":"object"}}],
    "tool_choice":{"type":"function","name":"w"},
    "text":{"format":{"type":"json_schema","name":"r","schema":{"type":"object"}}},
    "reasoning":{"effort":"low"}})";
  json history;
  ASSERT_FALSE(responses_to_chat(body, none, &chat, &echo, &history));
  const json want = json::parse(R"([
    {"role":"system","content":"Be terse."},
    {"role":"user","content":"Weather?"},
    {"role":"assistant","content":null,"tool_calls":[
      {"id":"c1","type":"function","function":{"name":"w","arguments":"{\"a\":1}"}},
      {"id":"c2","type":"function","function":{"name":"w","arguments":"{}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"sunny"},
    {"role":"assistant","content":"It is sunny."}])");
  EXPECT_EQ(chat["messages"], want) << chat["messages"].dump();
  EXPECT_EQ(history, json(want.begin() + 1, want.end()));  // the conversation without the instructions
  EXPECT_EQ(chat["tools"], json::parse(R"([{"type":"function","function":{"name":"w","parameters":{"type":"object"}}}])"));
  EXPECT_EQ(chat["tool_choice"], json::parse(R"({"type":"function","function":{"name":"w"}})"));
  EXPECT_EQ(chat["response_format"],
            json::parse(R"({"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"}}})"));
  EXPECT_EQ(chat["reasoning_effort"], "low");
  EXPECT_EQ(chat["max_tokens"], 9);
  EXPECT_EQ(chat["seed"], 3);
  EXPECT_EQ(echo["instructions"], "Be terse.");
  EXPECT_EQ(echo["temperature"], 1.0);
  EXPECT_EQ(echo["tool_choice"], json::parse(R"({"type":"function","name":"w"})"));
  // A plain string is one user message.
  ASSERT_FALSE(responses_to_chat(R"({"input":"hi"})", none, &chat, &echo, &history));
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"user","content":"hi"}])"));
}

TEST(Responses, PreviousResponsesContinueTheirConversation) {
  ResponseStore store(3, 1 << 20);
  const EarlierResponse earlier = [&](const std::string& id) { return store.get(id); };
  json chat, echo, history;
  ASSERT_FALSE(responses_to_chat(R"({"instructions":"A","input":"one"})", earlier, &chat, &echo, &history));
  // Its reply, text and a call, becomes one assistant message after the input.
  const json r1 = json::parse(R"({"id":"resp_1","output":[
    {"type":"reasoning","content":[{"type":"reasoning_text","text":"hm"}]},
    {"type":"message","content":[{"type":"output_text","text":"Sure."}]},
    {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]})");
  json kept = history;
  for (const json& m : output_messages(r1)) kept.push_back(m);
  store.put("resp_1", kept);
  ASSERT_FALSE(responses_to_chat(R"({"instructions":"B","previous_response_id":"resp_1",
    "input":[{"type":"function_call_output","call_id":"c1","output":"42"}]})", earlier, &chat, &echo, &history));
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"system","content":"B"},{"role":"user","content":"one"},
    {"role":"assistant","content":"Sure.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],
     "reasoning_content":"hm"},
    {"role":"tool","tool_call_id":"c1","content":"42"}])")) << chat["messages"].dump();
  EXPECT_EQ(echo["previous_response_id"], "resp_1");
  EXPECT_EQ(echo["store"], true);
  // Unknown (or evicted) ids are a 400 naming the field; the store keeps the 3 most recent.
  auto e = responses_to_chat(R"({"previous_response_id":"resp_9","input":"x"})", earlier, &chat, &echo, &history);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "previous_response_id");
  EXPECT_FALSE(store.get_response("resp_1"));  // kept without its object
  store.put("resp_2", json::array(), r1);
  EXPECT_EQ(store.get_response("resp_2"), r1);
  EXPECT_TRUE(store.erase("resp_2"));
  EXPECT_FALSE(store.erase("resp_2"));
  EXPECT_FALSE(store.get("resp_2"));
  for (const char* id : {"resp_2", "resp_3", "resp_4"}) store.put(id, json::array());
  EXPECT_FALSE(store.get("resp_1"));
  EXPECT_TRUE(store.get("resp_4"));
  ResponseStore small(100, 64);  // bytes bound: the newest stays even if alone too big
  small.put("a", json::array({std::string(40, 'x')}));
  small.put("b", json::array({std::string(40, 'y')}));
  EXPECT_FALSE(small.get("a"));
  EXPECT_TRUE(small.get("b"));
  EXPECT_EQ(output_messages(json::parse(R"({"output":[]})")), json::array());
}

TEST(Responses, BadRequestsNameTheResponsesField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "input"},
      {R"({"input":[]})", "input"},
      {R"({"input":[3]})", "input[0]"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]})", "input[0].content"},
      {R"({"input":[{"type":"function_call","name":"w","arguments":"{}"}]})", "input[0].call_id"},
      {R"({"input":[{"type":"function_call_output","call_id":"c"}]})", "input[0].output"},
      {R"({"input":[{"type":"item_reference","id":"x"}]})", "input[0].type"},
      {R"({"input":"x","previous_response_id":"resp_1"})", "previous_response_id"},  // not stored
      {R"({"input":"x","conversation":"conv_1"})", "conversation"},
      {R"({"input":"x","instructions":4})", "instructions"},
      {R"({"input":"x","tools":[{"type":"file_search"}]})", "tools"},
      {R"({"input":"x","text":{"format":"json"}})", "text.format"},
  };
  for (const auto& [body, param] : cases) {
    json chat, echo, history;
    auto e = responses_to_chat(body, none, &chat, &echo, &history);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, param) << body << ": " << e->message;
  }
  ApiError chat_err;
  chat_err.param = "messages[1].role";
  EXPECT_EQ(responses_error(chat_err).param, "input");
  chat_err.param = "max_tokens";
  EXPECT_EQ(responses_error(chat_err).param, "max_output_tokens");
  chat_err.param = "temperature";
  EXPECT_EQ(responses_error(chat_err).param, "temperature");
}

TEST(Responses, PiecesBecomeItemsAndNumberedEvents) {
  ResponseWriter w("resp_1", "m", 7, json{{"tools", json::array()}});
  std::string sse = w.start();
  sse += w.push(ReplyPiece{"thinking", "", {}});
  sse += w.push(ReplyPiece{"", "\n\n", {}});  // whitespace alone opens no message
  sse += w.push(ReplyPiece{"", "Hello", {}});
  sse += w.push(ReplyPiece{"", " there", {{0, "f", "{\"a\""}}});
  sse += w.push(ReplyPiece{"", "", {{0, "", ":1}"}, {1, "g", "{}"}}});
  json usage{{"prompt_tokens", 5}, {"completion_tokens", 9}, {"total_tokens", 14}, {"prompt_tokens_details", {{"cached_tokens", 2}}}};
  sse += w.finish("stop", "", usage);
  const json ev = events_of(sse);
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i]["sequence_number"], i);
  std::vector<std::string> types;
  for (const json& e : ev) types.push_back(e["type"]);
  const std::vector<std::string> want = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"};
  EXPECT_EQ(types, want);
  const json& r = w.response();
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 4u);
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "thinking");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "\n\nHello there");  // held whitespace goes first
  EXPECT_EQ(r["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(r["output"][3]["name"], "g");
  EXPECT_EQ(w.n_calls(), 2u);
  EXPECT_EQ(r["usage"]["input_tokens"], 5);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(ev.back()["response"], r);

  ResponseWriter cut("resp_2", "m", 7, json::object());
  cut.push(ReplyPiece{"", "abc", {}});
  const json end = events_of(cut.finish("length", "", usage));
  EXPECT_EQ(end.back()["type"], "response.incomplete");
  EXPECT_EQ(cut.response()["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(cut.response()["output"][0]["status"], "incomplete");
}

}  // namespace
}  // namespace deltafin::server
