// response_format in the server's request parsing (both endpoints): text, json_object
// and json_schema give the grammar the scheduler follows; malformed ones and
// unsupported schema keywords are 400s naming the field; a chat template that reads
// response_format (Kimi K3) gets it.
#include <gtest/gtest.h>

#include "json/json_constraint.h"
#include "server/api.h"
#include "shared_files.h"
#include "tokenizer/chat_template.h"

using namespace deltafin;
using namespace deltafin::server;

namespace {
std::string chat_with(const std::string& rf) {
  return R"({"messages":[{"role":"user","content":"x"}],"response_format":)" + rf + "}";
}
}  // namespace

TEST(JsonApi, ResponseFormatGivesTheGrammar) {
  ChatRequest c;
  ASSERT_FALSE(parse_chat_request(chat_with(R"({"type":"text"})"), 100, &c));
  EXPECT_FALSE(c.gen.json_grammar);
  EXPECT_EQ(c.gen.response_format["type"], "text");
  ChatRequest o;
  ASSERT_FALSE(parse_chat_request(chat_with(R"({"type":"json_object"})"), 100, &o));
  ASSERT_TRUE(o.gen.json_grammar);
  JsonState s(*o.gen.json_grammar);
  EXPECT_TRUE(s.feed("{\"a\":[1]}") && s.complete());
  ChatRequest j;
  ASSERT_FALSE(parse_chat_request(
      chat_with(R"({"type":"json_schema","json_schema":{"name":"w","strict":true,
                  "schema":{"type":"object","properties":{"t":{"type":"number"}},"required":["t"]}}})"),
      100, &j));
  ASSERT_TRUE(j.gen.json_grammar);
  JsonState t(*j.gen.json_grammar);
  EXPECT_FALSE(JsonState(t).feed("{}"));
  EXPECT_TRUE(t.feed("{\"t\":2.5}") && t.complete());
  EXPECT_EQ(j.gen.response_format["json_schema"]["name"], "w");
  // Completions take it too (an extension).
  CompletionRequest p;
  ASSERT_FALSE(parse_completion_request(R"({"prompt":"a","response_format":{"type":"json_object"}})", 100, &p));
  EXPECT_TRUE(p.gen.json_grammar);
}

TEST(JsonApi, MalformedResponseFormatsAre400sNamingTheField) {
  const std::tuple<std::string, std::string, std::string> cases[] = {
      {R"("json")", "response_format", "type"},
      {R"({"type":7})", "response_format", "type"},
      {R"({"type":"xml"})", "response_format", "'xml'"},
      {R"({"type":"json_schema"})", "response_format.json_schema", "schema"},
      {R"({"type":"json_schema","json_schema":{"name":"x"}})", "response_format.json_schema.schema", "schema"},
      {R"({"type":"json_schema","json_schema":{"name":3,"schema":{}}})", "response_format.json_schema.name", "name"},
      {R"({"type":"json_schema","json_schema":{"schema":{},"strict":"yes"}})", "response_format.json_schema.strict",
       "strict"},
      {R"({"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"^a"}}})",
       "response_format.json_schema.schema", "'pattern'"},
      {R"({"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}})",
       "response_format.json_schema.schema", "'format' (at /properties/d)"},
      {R"({"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"#/$defs/a"}}})",
       "response_format.json_schema.schema", "'$ref'"},
  };
  for (const auto& [rf, param, says] : cases) {
    ChatRequest r;
    auto e = parse_chat_request(chat_with(rf), 100, &r);
    ASSERT_TRUE(e) << rf;
    EXPECT_EQ(e->status, 400) << rf;
    EXPECT_EQ(e->param, param) << rf << ": " << e->message;
    EXPECT_NE(e->message.find(says), std::string::npos) << rf << ": " << e->message;
    CompletionRequest p;
    auto ec = parse_completion_request(R"({"prompt":"a","response_format":)" + rf + "}", 100, &p);
    ASSERT_TRUE(ec) << rf;
    EXPECT_EQ(ec->param, param) << rf;
  }
}

// Kimi K3's template adds a system note for response_format, with the schema; the
// server passes the field in the template's context.
TEST(JsonApi, KimiTemplateReadsResponseFormat) {
  const std::string kimi = read_template("Kimi-K3.jinja");
  ASSERT_FALSE(kimi.empty());
  const json messages = json::array({json{{"role", "user"}, {"content", "hi"}}});
  auto plain = render_chat_template(kimi, messages, nullptr, true, json::object());
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->find("response_format"), std::string::npos);
  ChatRequest r;
  ASSERT_FALSE(parse_chat_request(
      chat_with(R"({"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"temp":{"type":"number"}}}}})"),
      100, &r));
  auto with = render_chat_template(kimi, messages, nullptr, true, json{{"response_format", r.gen.response_format}});
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_NE(with->find("response_format=json_schema"), std::string::npos) << *with;
  EXPECT_NE(with->find("\"temp\""), std::string::npos) << *with;
}
