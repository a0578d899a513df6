// Grammars of segments (JsonGrammar::graph) and the forced tool calls built on them
// (chat/forced_calls.h): optional pieces and repeats are chosen by their first
// text, a parameter format's optional parameters may be written or left out (in
// order, once), and a forced reply holds one to max_calls calls that each format's
// reader takes back.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "qwen2_vocab.h"
#include "chat/forced_calls.h"
#include "json/json_constraint.h"
#include "chat/reply_parser.h"
#include "chat/xtml.h"

using namespace deltafin;
using ojson = nlohmann::ordered_json;

namespace {

using K = JsonPart::Kind;

JsonPiece lit(std::string t) { return {K::Literal, std::move(t), nullptr, {}}; }

// Feeds `text` (taking a marker token where one is due and its text comes next); the
// index of the first byte refused, npos when none was.
size_t feed_reply(JsonState* s, const std::string& text, const Tokenizer* tok = nullptr) {
  for (size_t i = 0; i < text.size();) {
    std::vector<int32_t> due;
    s->forced_tokens(&due);
    bool took = false;
    for (int32_t id : due) {
      if (tok == nullptr) break;  // no vocabulary: no marker tokens either
      const std::string t = tok->piece(id, true);
      if (text.compare(i, t.size(), t) == 0 && s->take_token(id)) {
        i += t.size();
        took = true;
        break;
      }
    }
    if (!took && !s->feed(uint8_t(text[i++]))) return i - 1;
  }
  return std::string::npos;
}

// Whether `text` is a whole reply of the grammar.
bool whole(const JsonGrammar& g, const std::string& text, const Tokenizer* tok = nullptr) {
  JsonState s(g);
  return feed_reply(&s, text, tok) == std::string::npos && s.complete();
}

// Where the grammar first refuses `text` (npos: nowhere).
size_t refused_at(const JsonGrammar& g, const std::string& text, const Tokenizer* tok = nullptr) {
  JsonState s(g);
  return feed_reply(&s, text, tok);
}

}  // namespace

// A call with an optional parameter before a required one, which may repeat: each
// choice is made by the text that begins a successor, the end is allowed only where a
// segment may end, and nothing is skipped that is required.
TEST(JsonGraph, SegmentsChooseTheirSuccessors) {
  std::vector<JsonSegment> segs{
      {{lit("<f>")}, {1, 2}, false},                                              // 0: head
      {{lit("<a>"), {K::Text, "</a>", nullptr, {}}}, {2}, false},                // 1: optional a
      {{lit("<b>"), {K::Json, "", ojson{{"type", "integer"}}, {}}, lit("</b>")}, {3}, false},  // 2: required b
      {{lit("</f>")}, {0}, true},                                                 // 3: tail, then another or the end
  };
  auto g = JsonGrammar::graph(segs, {0});
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(whole(*g, "<f><b>1</b></f>"));
  EXPECT_TRUE(whole(*g, "<f><a>x < y</a><b>-2</b></f>"));
  EXPECT_TRUE(whole(*g, "<f><b>1</b></f><f><a></a><b>3</b></f>"));
  EXPECT_EQ(refused_at(*g, "<f></f>"), 4u) << "b is required";
  EXPECT_EQ(refused_at(*g, "<f><b>1</b><a>"), 12u) << "a comes before b only";
  EXPECT_EQ(refused_at(*g, "<f><a>1</a><a>"), 12u) << "a once";
  EXPECT_EQ(refused_at(*g, "<f><b>1</b></f>\n"), 15u) << "another call or the end";

  JsonState s(*g);
  ASSERT_EQ(feed_reply(&s, "<f><b>1</b>"), std::string::npos);
  EXPECT_FALSE(s.complete()) << "the tail is due";
  ASSERT_EQ(feed_reply(&s, "</f>"), std::string::npos);
  EXPECT_TRUE(s.complete()) << "the end may come between calls";
  ASSERT_EQ(feed_reply(&s, "<"), std::string::npos);
  EXPECT_FALSE(s.complete()) << "a second call begun";
  JsonState copy(*g);
  copy.assign(s);
  EXPECT_EQ(feed_reply(&copy, "f><b>7</b></f>"), std::string::npos);
  EXPECT_TRUE(copy.complete());
}

// Graphs a state could not read are refused with the segment named.
TEST(JsonGraph, RefusesGraphsThatCannotBeRead) {
  const ojson obj{{"type", "object"}};
  struct Bad {
    std::vector<JsonSegment> segs;
    std::vector<uint32_t> starts;
    const char* want;
  };
  const Bad bad[] = {
      {{{{lit("<f>")}, {}, false}}, {0}, "segment 1 neither ends nor goes on"},
      {{{{lit("<f>")}, {1, 2}, false}, {{lit("<a>")}, {}, true}, {{lit("<a>b")}, {}, true}}, {0}, "do not tell them apart"},
      {{{{lit("<f>")}, {1}, true}, {{{K::Json, "", obj, {}}}, {}, true}}, {0}, "segment 2 does not begin with text"},
      {{{{lit("<f>"), {K::Json, "", obj, {}}}, {1}, false}, {{lit("</f>")}, {}, true}}, {0}, "ends with a value but goes on"},
      {{{{lit("<f>")}, {5}, false}}, {0}, "no segment 6 to follow it"},
      {{{{lit("<f>")}, {}, true}}, {3}, "no segment 4 to start with"},
  };
  for (const Bad& b : bad) {
    auto g = JsonGrammar::graph(b.segs, b.starts);
    ASSERT_FALSE(g.ok()) << b.want;
    EXPECT_NE(g.error().message.find(b.want), std::string::npos) << g.error().message;
  }
  // A single successor without the end needs no text to be chosen by.
  auto g = JsonGrammar::graph({{{lit("<f>")}, {1}, false}, {{{K::Json, "", obj, {}}}, {}, true}}, {0});
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(whole(*g, "<f>{}"));
}

namespace {

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
     "query": {"type": "string"}, "limit": {"type": "integer"}, "lang": {"enum": ["en", "fr"]},
     "safe": {"type": "boolean"}}, "required": ["query", "safe"]}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}])");

std::string qwen_call(const std::string& name, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string s = "<tool_call>\n<function=" + name + ">\n";
  for (const auto& [k, v] : params) s += "<parameter=" + k + ">\n" + v + "\n</parameter>\n";
  return s + "</function>\n</tool_call>";
}

std::string dsml_invoke(const std::string& name, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string s = "<｜DSML｜invoke name=\"" + name + "\">\n";
  for (const auto& [k, v] : params) {
    const bool text = k == "query" || k == "lang";
    s += "<｜DSML｜parameter name=\"" + k + "\" string=\"" + (text ? "true" : "false") + "\">" + v +
         "</｜DSML｜parameter>\n";
  }
  return s + "</｜DSML｜invoke>\n";
}

}  // namespace

// Qwen3-Coder and DSML calls: the optional parameters (limit, lang) may come or not,
// in the schema's order and once; the required ones (query, safe) always.
TEST(ForcedCalls, OptionalParametersInOrder) {
  const Tokenizer* tok = qwen2_tokenizer();
  if (!tok) GTEST_SKIP() << "no ggml-vocab-qwen2.gguf in the shared vocab directory";
  auto q = forced_call_grammar(ToolFormat::QwenXml, kTools, "required", "", *tok);
  ASSERT_TRUE(q);
  EXPECT_TRUE(whole(*q, qwen_call("search", {{"query", "cats & dogs"}, {"safe", "true"}})));
  EXPECT_TRUE(whole(*q, qwen_call("search", {{"query", "x"}, {"limit", "5"}, {"lang", "fr"}, {"safe", "false"}})));
  EXPECT_TRUE(whole(*q, qwen_call("search", {{"query", "x"}, {"lang", "en"}, {"safe", "false"}})));
  EXPECT_TRUE(whole(*q, qwen_call("now", {})));
  const std::string head = "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n";
  EXPECT_EQ(refused_at(*q, head + "</function>"), head.size() + 1) << "safe is required";
  EXPECT_NE(refused_at(*q, head + "<parameter=lang>\nen\n</parameter>\n<parameter=limit>"), std::string::npos)
      << "limit comes before lang";
  EXPECT_NE(refused_at(*q, head + "<parameter=query>"), std::string::npos) << "query twice";
  EXPECT_NE(refused_at(*q, head + "<parameter=limit>\nfive"), std::string::npos) << "limit is an integer";
  EXPECT_NE(refused_at(*q, head + "<parameter=lang>\nde"), std::string::npos) << "lang is en or fr";
  EXPECT_NE(refused_at(*q, "<tool_call>\n<function=now>\n<parameter="), std::string::npos) << "now has none";

  auto d = forced_call_grammar(ToolFormat::Dsml, kTools, "required", "", *tok);
  ASSERT_TRUE(d);
  const std::string open = "<｜DSML｜function_calls>\n", close = "</｜DSML｜function_calls>";
  EXPECT_TRUE(whole(*d, open + dsml_invoke("search", {{"query", "x"}, {"safe", "true"}}) + close));
  EXPECT_TRUE(whole(*d, open + dsml_invoke("search", {{"query", "x"}, {"limit", "2"}, {"safe", "true"}}) + close));
  EXPECT_NE(refused_at(*d, open + dsml_invoke("search", {{"query", "x"}}) + close), std::string::npos)
      << "safe is required";
}

// Several calls, as each format writes them: a forced reply of "required" with
// max_calls 3 takes one, two or three calls (K2 numbering them on from the prompt's
// calls, K3 from 1), not four; the format's reader takes each back with its
// arguments. With max_calls 1 the first call ends the reply; a reader told to take one
// call (parallel_tool_calls false without forcing) gives the first of three and says
// it is full when the second begins; told to take none, none.
TEST(ForcedCalls, SeveralCallsInEveryFormat) {
  const Tokenizer* tok = qwen2_tokenizer();
  if (!tok) GTEST_SKIP() << "no ggml-vocab-qwen2.gguf in the shared vocab directory";
  const std::string k3_prompt = "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>";
  const std::string k2_prompt = "<|tool_call_begin|>functions.now:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
                                "<|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}<|tool_call_end|>";
  struct Case {
    ToolFormat f;
    std::string prompt;
    std::vector<std::string> calls;  // call i of the reply: now, search, now, now
    std::string begin, sep, end;
  };
  const std::string args = R"({"query": "x", "safe": true})";
  const Case cases[] = {
      {ToolFormat::Hermes, "",
       {"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"search\", \"arguments\": " + args + "}\n</tool_call>"},
       "", "\n", ""},
      {ToolFormat::KimiK2, k2_prompt,
       {"<|tool_call_begin|>functions.now:2<|tool_call_argument_begin|>{}<|tool_call_end|>",
        "<|tool_call_begin|>functions.search:3<|tool_call_argument_begin|>" + args + "<|tool_call_end|>",
        "<|tool_call_begin|>functions.now:4<|tool_call_argument_begin|>{}<|tool_call_end|>",
        "<|tool_call_begin|>functions.now:5<|tool_call_argument_begin|>{}<|tool_call_end|>"},
       "<|tool_calls_section_begin|>", "", "<|tool_calls_section_end|>"},
      {ToolFormat::DeepSeek, "",
       {"<｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
        "<｜tool▁call▁begin｜>search<｜tool▁sep｜>" + args + "<｜tool▁call▁end｜>"},
       "<｜tool▁calls▁begin｜>", "", "<｜tool▁calls▁end｜>"},
      {ToolFormat::Xtml, k3_prompt,
       {"<|open|>call tool=\"now\" index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>{}<|close|>json<|sep|>"
        "<|close|>call<|sep|>",
        "<|open|>call tool=\"search\" index=\"2\"<|sep|><|open|>json type=\"object\"<|sep|>" + args +
            "<|close|>json<|sep|><|close|>call<|sep|>",
        "<|open|>call tool=\"now\" index=\"3\"<|sep|><|open|>json type=\"object\"<|sep|>{}<|close|>json<|sep|>"
        "<|close|>call<|sep|>",
        "<|open|>call tool=\"now\" index=\"4\"<|sep|><|open|>json type=\"object\"<|sep|>{}<|close|>json<|sep|>"
        "<|close|>call<|sep|>"},
       "<|close|>response<|sep|><|open|>tools<|sep|>", "", "<|close|>tools<|sep|><|close|>message<|sep|>"},
      {ToolFormat::QwenXml, "", {qwen_call("now", {}), qwen_call("search", {{"query", "x"}, {"safe", "true"}})}, "",
       "\n", ""},
      {ToolFormat::Dsml, "", {dsml_invoke("now", {}), dsml_invoke("search", {{"query", "x"}, {"safe", "true"}})},
       "<｜DSML｜function_calls>\n", "", "</｜DSML｜function_calls>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(int(c.f));
    std::vector<std::string> calls = c.calls;
    while (calls.size() < 4) calls.push_back(calls[0]);  // the formats without an index repeat call 1
    auto reply = [&](size_t n) {
      std::string s = c.begin;
      for (size_t i = 0; i < n; ++i) s += (i ? c.sep : "") + calls[i];
      return s + c.end;
    };
    auto g3 = forced_call_grammar(c.f, kTools, "required", c.prompt, *tok, 3);
    auto g1 = forced_call_grammar(c.f, kTools, "required", c.prompt, *tok, 1);
    ASSERT_TRUE(g3 && g1);
    for (size_t n = 1; n <= 3; ++n) {
      ASSERT_TRUE(whole(*g3, reply(n))) << reply(n);
      ReplyFormat rf;
      if (c.f == ToolFormat::Xtml) rf.xtml = true, rf.xtml_open = xtml_open_tags(c.prompt);
      else rf.tools = c.f, rf.tool_defs = kTools;
      ReplyParser p(rf);
      ReplyPiece a = p.push(reply(n)), b = p.finish();
      EXPECT_EQ(a.content + b.content, "") << reply(n);
      std::vector<ToolCall> got;
      add_deltas(&got, a.calls);
      add_deltas(&got, b.calls);
      ASSERT_EQ(got.size(), n) << reply(n);
      EXPECT_EQ(got[0].name, "now");
      if (n >= 2) {
        EXPECT_EQ(got[1].name, "search");
        EXPECT_EQ(ojson::parse(got[1].arguments), ojson::parse(args)) << got[1].arguments;
      }
    }
    EXPECT_FALSE(whole(*g3, reply(4))) << "at most three calls";
    ReplyFormat one;
    if (c.f == ToolFormat::Xtml) one.xtml = true, one.xtml_open = xtml_open_tags(c.prompt);
    else one.tools = c.f, one.tool_defs = kTools;
    one.max_calls = 1;
    ReplyParser p(one);
    std::vector<ToolCall> got;
    const std::string r3 = reply(3);
    size_t fed = 0;
    for (; fed < r3.size() && !p.full(); fed += 7) add_deltas(&got, p.push(r3.substr(fed, 7)).calls);
    EXPECT_TRUE(p.full()) << "the second call went unnoticed";
    EXPECT_LT(fed, reply(2).size()) << "full only at the end of the second call";
    add_deltas(&got, p.finish().calls);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].name, "now");
    EXPECT_EQ(got[0].arguments, "{}");
    one.max_calls = 0;  // tool_choice none (Kimi K3: calls are structure, read anyway)
    ReplyParser none(one);
    ReplyPiece a = none.push(r3), b = none.finish();
    EXPECT_TRUE(none.full());
    EXPECT_TRUE(a.calls.empty() && b.calls.empty());
    EXPECT_TRUE(whole(*g1, reply(1)));
    EXPECT_FALSE(whole(*g1, reply(2))) << "one call only";
  }
  // A named function: its calls only.
  auto named = forced_call_grammar(ToolFormat::Hermes, kTools, ojson::parse(R"({"type":"function","function":{"name":"now"}})"),
                                   "", *tok, 2);
  ASSERT_TRUE(named);
  EXPECT_TRUE(whole(*named, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(whole(*named, "<tool_call>\n{\"name\": \"search\", \"arguments\": " + args + "}\n</tool_call>"));
}

// Many tools, many parameters, eight calls: the grammar builds, takes the 255th tool
// (a choice holds up to 256 candidates: the tools and the close), and a mask at its
// widest choices (which tool; which parameter) stays under a millisecond or so.
TEST(ForcedCalls, ManyToolsStayCheap) {
  const Tokenizer* tok = qwen2_tokenizer();
  if (!tok) GTEST_SKIP() << "no ggml-vocab-qwen2.gguf in the shared vocab directory";
  ojson tools = ojson::array();
  for (int t = 0; t < 300; ++t) {
    ojson props = ojson::object();
    for (int p = 0; p < 12; ++p) props["p" + std::to_string(p)] = {{"type", p % 2 ? "integer" : "string"}};
    tools.push_back({{"type", "function"},
                     {"function", {{"name", "tool_" + std::to_string(t)},
                                   {"parameters", {{"type", "object"}, {"properties", props}, {"required", {"p11"}}}}}}});
  }
  auto table = std::make_shared<const JsonTokenTable>(*tok);
  for (ToolFormat f : {ToolFormat::QwenXml, ToolFormat::KimiK2}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = forced_call_grammar(f, tools, "required", "", *tok, kMaxForcedCalls);
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(g);
    JsonConstraint c(g, table);
    std::vector<float> logits(size_t(tok->n_vocab()));
    const std::string reply = f == ToolFormat::QwenXml ? "<tool_call>\n<function=tool_42>\n<parameter=p3>\n7\n</parameter>\n"
                                                       : "<|tool_calls_section_begin|><|tool_call_begin|>functions.tool_254:0";
    double worst = 0;
    for (size_t i = 0; i <= reply.size(); ++i) {
      const auto m0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(c.mask(logits.data(), tok->n_vocab()));
      worst = std::max(worst, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m0).count());
      if (i < reply.size()) {
        ASSERT_TRUE(c.advance(tok->encode(reply.substr(i, 1), false, false)[0])) << i;
      }
    }
    std::printf("[ forced ] %s, 300 tools (255 taken) x 12 parameters x 8 calls: %zu segments, built in %.1f ms; "
                "mask at most %.2f ms\n",
                f == ToolFormat::QwenXml ? "Qwen3-Coder" : "Kimi K2", g->n_variants(),
                std::chrono::duration<double, std::milli>(t1 - t0).count(), worst);
  }
}
