// The JSON recognizer of constrained sampling (json/json_constraint.h) and the
// schema subset it follows (json/json_grammar.h): valid documents are accepted
// byte by byte with every prefix, invalid ones are refused at their first bad byte,
// schemas constrain keys, values and the end; and the token mask over a real
// vocabulary agrees with feeding each token alone (and what it costs per step).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "chat/forced_calls.h"
#include "json/json_constraint.h"
#include "qwen2_vocab.h"

using namespace deltafin;
using ojson = nlohmann::ordered_json;

namespace {

// Feeds `doc`; the index of the first byte refused (npos: none) and whether the
// bytes before it form a complete document.
struct Fed {
  size_t bad = std::string::npos;
  bool complete = false;
};
Fed feed_all(const JsonGrammar& g, const std::string& doc, bool check_prefixes = true) {
  JsonState s(g);
  Fed f;
  for (size_t i = 0; i < doc.size(); ++i) {
    const bool was_complete = s.complete();
    JsonState copy = s;
    if (!s.feed(uint8_t(doc[i]))) {
      f.bad = i;
      f.complete = copy.complete();
      return f;
    }
    // Whole before the end and yet going on: only a top-level number does that.
    if (check_prefixes && was_complete) {
      EXPECT_TRUE(std::isdigit(uint8_t(doc[i])) || doc[i] == '.' || doc[i] == 'e' || doc[i] == 'E')
          << "complete early at " << i << " in " << doc;
    }
  }
  f.complete = s.complete();
  return f;
}

JsonGrammar schema(const char* text) {
  auto g = JsonGrammar::from_schema(ojson::parse(text));
  EXPECT_TRUE(g.ok()) << text << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g).value() : JsonGrammar::any_object();
}

}  // namespace

TEST(JsonConstraint, AcceptsValidObjectsWithEveryPrefix) {
  const JsonGrammar g = JsonGrammar::any_object();
  const char* docs[] = {
      "{}",
      "{\"a\":1}",
      " {\"a\" : [1, -2.5e+10, 0.1E-2, 0, -0, 10, 1e5, true, false, null, {}, []]}",
      "{\"s\":\"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u00E9\\ud83d\\ude00\\u0000\"}",
      "{\"\xC3\xA9\":\"\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\"}",
      "{\"a\":{\"b\":{\"c\":[[[\"d\"]]]}},\"e\":\"\"}",
      "{\n  \"k\": [\n    1,\n    2\n  ],\n  \"\": null\n}",
      "{\"a\":1,\"a\":2}",  // duplicate keys are JSON (RFC 8259 only advises against them)
  };
  for (const char* d : docs) {
    ojson parsed;
    ASSERT_NO_THROW(parsed = ojson::parse(d)) << d;
    const Fed f = feed_all(g, d);
    EXPECT_EQ(f.bad, std::string::npos) << d;
    EXPECT_TRUE(f.complete) << d;
  }
}

TEST(JsonConstraint, RefusesInvalidPrefixesAtTheFirstBadByte) {
  const JsonGrammar g = JsonGrammar::any_object();
  const std::pair<std::string, size_t> cases[] = {
      {"[1]", 0},                   // json_object: the top level is an object
      {"\"a\"", 0},
      {"{\"a\":01}", 6},            // no leading zeros
      {"{\"a\":1,}", 7},            // no trailing comma
      {"{\"a\" 1}", 5},             // colon missing
      {"{,}", 1},
      {"{\"a\":}", 5},
      {"{'a':1}", 1},
      {"{a:1}", 1},
      {"{\"a\":tru}", 8},
      {"{\"a\":nul1}", 8},
      {"{\"a\":-}", 6},
      {"{\"a\":1.}", 7},
      {"{\"a\":1e}", 7},
      {"{\"a\":1e+}", 8},
      {"{\"a\":.5}", 5},
      {"{\"a\":+1}", 5},
      {"{\"a\":NaN}", 5},
      {"{\"a\":Infinity}", 5},
      {"{\"a\":\"\\x\"}", 7},       // unknown escape
      {"{\"a\":\"\\u12G4\"}", 10},
      {"{\"a\":\"b\nc\"}", 7},      // a raw control byte
      {"{\"a\":\"\\ud800x\"}", 12}, // a high surrogate without its low half
      {"{\"a\":\"\\ud800\\u0041\"}", 14},
      {"{\"a\":\"\\udc00\"}", 9},   // a low surrogate alone
      {"{\"a\":\"\xC0\x80\"}", 6},  // overlong UTF-8
      {"{\"a\":\"\xED\xA0\x80\"}", 7},  // an encoded surrogate
      {"{\"a\":\"\xF4\x90\x80\x80\"}", 7},  // above U+10FFFF
      {"{\"a\":\"\x80\"}", 6},      // a stray continuation byte
      {"{\"a\":\"\xC3\x28\"}", 7},  // a missing continuation byte
      {"{\"a\":1}}", 7},
      {"{\"a\":1}x", 7},           // nothing after the top-level value,
      {"{\"a\":1} ", 7},           // not even whitespace
      {"{\"a\":[1 2]}", 8},
      {"{\"a\":[1,]}", 8},
      {"{\"a\":[}", 6},
      {"{\"a\":{]}", 6},
  };
  for (const auto& [doc, bad] : cases) {
    ojson parsed;
    // (Valid JSON, but not an object or with whitespace after it.)
    const bool json_anyway = doc == "[1]" || doc == "\"a\"" || doc == "{\"a\":1} ";
    if (!json_anyway) {
      EXPECT_THROW(parsed = ojson::parse(doc), ojson::parse_error) << doc;
    }
    EXPECT_EQ(feed_all(g, doc).bad, bad) << doc;
  }
}

TEST(JsonConstraint, CapsDepthWhitespaceAndNumbers) {
  const JsonGrammar g = JsonGrammar::any_object();
  // 64 containers deep at most: the object and 63 arrays.
  std::string deep = "{\"a\":" + std::string(63, '[');
  EXPECT_EQ(feed_all(g, deep).bad, std::string::npos);
  EXPECT_EQ(feed_all(g, deep + "[").bad, deep.size());
  EXPECT_TRUE(feed_all(g, deep + std::string(63, ']') + "}").complete);
  // A whitespace run: kMaxWhitespace bytes, then no more.
  const std::string ws(JsonState::kMaxWhitespace, ' ');
  EXPECT_EQ(feed_all(g, "{" + ws + "}").bad, std::string::npos);
  EXPECT_EQ(feed_all(g, "{" + ws + " }").bad, 1 + ws.size());
  EXPECT_TRUE(feed_all(g, "{" + ws + "\"a\"" + ws + ":" + ws + "1" + ws + "}").complete);
  // A number of kMaxNumberBytes bytes, with room left for the digit a '.' needs.
  const std::string digits(JsonState::kMaxNumberBytes, '7');
  EXPECT_TRUE(feed_all(g, "{\"a\":" + digits + "}").complete);
  EXPECT_EQ(feed_all(g, "{\"a\":" + digits + "7}").bad, 5 + digits.size());
  const std::string almost(JsonState::kMaxNumberBytes - 1, '7');
  EXPECT_EQ(feed_all(g, "{\"a\":" + almost + ".").bad, 5 + almost.size());
}

// Random values as nlohmann prints them (compact and indented): all accepted.
TEST(JsonConstraint, AcceptsWhatASerializerWrites) {
  const JsonGrammar g = JsonGrammar::any_object();
  std::mt19937 rng(42);
  std::function<ojson(int)> value = [&](int depth) -> ojson {
    switch (rng() % (depth > 3 ? 5 : 7)) {
      case 0: return nullptr;
      case 1: return rng() % 2 == 0;
      case 2: return int64_t(rng()) - int64_t(1u << 31);
      case 3: return std::ldexp(double(rng()) - 2e9, int(rng() % 40) - 20);
      case 4: {
        std::string s;
        const char* parts[] = {"a", "\"", "\\", "\n", "\x01", "\xC3\xA9", "\xF0\x9F\x98\x80", " ", "/"};
        for (unsigned n = rng() % 6; n > 0; --n) s += parts[rng() % 9];
        return s;
      }
      case 5: {
        ojson a = ojson::array();
        for (unsigned n = rng() % 4; n > 0; --n) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        ojson o = ojson::object();
        for (unsigned n = rng() % 4; n > 0; --n) o["k" + std::to_string(rng() % 9)] = value(depth + 1);
        return o;
      }
    }
  };
  for (int i = 0; i < 300; ++i) {
    ojson o = ojson::object();
    o["v"] = value(0);
    for (int indent : {-1, 2}) {
      const std::string d = o.dump(indent);
      const Fed f = feed_all(g, d);
      EXPECT_EQ(f.bad, std::string::npos) << d;
      EXPECT_TRUE(f.complete) << d;
    }
  }
}

TEST(JsonConstraint, SchemaPropertiesRequiredAndOrder) {
  const JsonGrammar g = schema(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},
      "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2},
      "ok":{"type":"boolean"}},
    "required":["name","age"],"additionalProperties":false})");
  const char* good[] = {
      R"({"name":"x","age":3})",
      R"({ "name" : "x" , "age" : -30 , "tags" : [ "a" , "b" ] })",
      R"({"name":"","age":0,"ok":false})",
      R"({"name":"x","age":3,"tags":[],"ok":true})",
  };
  for (const char* d : good) {
    const Fed f = feed_all(g, d);
    EXPECT_EQ(f.bad, std::string::npos) << d;
    EXPECT_TRUE(f.complete) << d;
  }
  const std::pair<std::string, size_t> bad[] = {
      {R"({"name":"x"})", 11},               // age is required: no end here,
      {R"({})", 1},
      {R"({"age":3,"name":"x"})", 2},         // declared order,
      {R"({"name":"x","age":3.5})", 19},      // an integer,
      {R"({"name":"x","age":3,"tags":["c"]})", 29},  // the enum,
      {R"({"name":"x","age":3,"tags":["a","b","a"]})", 35},  // maxItems,
      {R"({"name":"x","age":3,"extra":1})", 21},      // no undeclared property,
      {R"({"name":"x","age":3,"ok":1})", 25},
      {R"({"name":"x","age":3,"tags":["a"],"tags":["b"]})", 34},  // each property once
      {R"({"nam":"x"})", 5},
  };
  for (const auto& [doc, at] : bad) EXPECT_EQ(feed_all(g, doc).bad, at) << doc;
  // A required property missing: the document is never complete, so end of
  // generation is not allowed.
  JsonState s(g);
  ASSERT_TRUE(s.feed(R"({"name":"x")"));
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(JsonState(s).feed('}'));
  EXPECT_TRUE(JsonState(s).feed(','));
}

TEST(JsonConstraint, SchemaScalarsEnumsAnyOfAndArrays) {
  struct Case {
    const char* schema;
    std::vector<const char*> good, bad;
  };
  const Case cases[] = {
      {R"({"enum":["red",1,true,null,"re"]})", {R"("red")", "1", "true", "null", R"("re")"},
       {R"("blue")", "12", "false", R"("r")", "1.0"}},
      {R"({"const":"x"})", {R"("x")"}, {R"("y")", R"("xx")"}},
      {R"({"type":["string","null"]})", {R"("a")", "null"}, {"1", "true"}},
      {R"({"type":["integer","number"]})", {"1", "1.5", "-2e3"}, {R"("1")"}},
      {R"({"type":"integer"})", {"0", "-12"}, {"1.0", "1e3", "01"}},
      {R"({"type":"number"})", {"0.5", "-1E+2"}, {"-", "1."}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
       {"[1,2]", "[1, 2, 3]"}, {"[1]", "[]", "[1,2,3,4]", "[1,\"a\"]"}},
      {R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                    {"type":"array","items":{"type":"number"}}, {"type":"null"}]})",
       {R"({"a":1})", "[1.5,2]", "[]", "null"}, {"{}", R"(["x"])", "1"}},
      {R"({"anyOf":[{"type":"string"},{"enum":["a",2]}]})", {R"("zz")", "2"}, {"3"}},
      {R"({"type":"object"})", {R"({"any":[1,{"x":null}]})", "{}"}, {"[]"}},
      {R"({"type":"object","additionalProperties":false})", {"{}"}, {R"({"a":1})"}},
      {R"({"type":"object","properties":{"p":{"type":"object","properties":{"q":{"type":"array",
           "items":{"type":"object","properties":{"r":{"const":1}},"required":["r"]}}},"required":["q"]}},
         "required":["p"]})",
       {R"({"p":{"q":[{"r":1},{"r":1}]}})", R"({"p":{"q":[]}})"}, {R"({"p":{"q":[{}]}})", R"({"p":{}})"}},
      {"{}", {"1", R"({"a":[true]})", R"("s")"}, {"tru"}},
  };
  for (const Case& c : cases) {
    const JsonGrammar g = schema(c.schema);
    for (const char* d : c.good) {
      const Fed f = feed_all(g, d);
      EXPECT_EQ(f.bad, std::string::npos) << c.schema << " " << d;
      EXPECT_TRUE(f.complete) << c.schema << " " << d;
    }
    for (const char* d : c.bad) {
      const Fed f = feed_all(g, d, false);
      EXPECT_TRUE(f.bad != std::string::npos || !f.complete) << c.schema << " " << d;
    }
  }
}

TEST(JsonConstraint, UnsupportedSchemasNameTheKeyword) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"string","pattern":"^a"})", "'pattern'"},
      {R"({"type":"string","format":"date"})", "'format'"},
      {R"({"type":"object","properties":{"a":{"$ref":"#/x"}}})", "'$ref' (at /properties/a)"},
      {R"({"oneOf":[{"type":"string"}]})", "'oneOf'"},
      {R"({"type":"object","properties":{"a":{"type":"string"}},"required":["b"]})", "'b'"},
      {R"({"type":"object","additionalProperties":{"type":"string"}})", "additionalProperties"},
      {R"({"anyOf":[{"type":"object"},{"type":"object","properties":{}}]})", "'{'"},
      {R"({"type":"date"})", "'date'"},
      {R"({"enum":[[1]]})", "enum"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "minItems"},
  };
  for (const auto& [text, want] : cases) {
    auto g = JsonGrammar::from_schema(ojson::parse(text));
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.error().message.find(want), std::string::npos) << text << ": " << g.error().message;
  }
}


// The mask over a real ~151k-token vocabulary equals feeding each token's bytes from
// the state alone (its shortcuts change nothing), at every prefix of a document (JSON,
// and a forced call with free text); and what a mask costs per step.
TEST(JsonConstraint, MaskMatchesFeedingEachTokenOnARealVocabulary) {
  const Tokenizer* tok = qwen2_tokenizer();
  if (!tok) GTEST_SKIP() << "no ggml-vocab-qwen2.gguf in the shared vocab directory";
  auto t0 = std::chrono::steady_clock::now();
  auto table = std::make_shared<const JsonTokenTable>(*tok);
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int64_t V = tok->n_vocab();
  struct Doc {
    const char* schema;  // null: json_object, or `g`
    std::string text;
    std::shared_ptr<const JsonGrammar> g;
  };
  // A forced Qwen3-Coder call: free text (with its ending's beginnings inside it), an
  // enum as a bare word, an integer.
  const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]},"days":{"type":"integer"}},
      "required":["city","unit","days"]}}}])");
  const Doc docs[] = {
      {nullptr, "{\"name\": \"caf\xC3\xA9 \\u00e9\\n\", \"list\": [1, -2.5e3, true, null, {\"x\": []}]}", nullptr},
      {R"({"type":"object","properties":{"id":{"type":"integer"},"color":{"enum":["red","green"]},
          "tags":{"type":"array","items":{"type":"string"}}},"required":["id","color"]})",
       R"({"id": 12, "color": "green", "tags": ["a b", ""]})", nullptr},
      {nullptr,
       "<tool_call>\n<function=f>\n<parameter=city>\nParis \"x\"\n</para\n</parameter\n\n</parameter>\n"
       "<parameter=unit>\nc\n</parameter>\n<parameter=days>\n31\n</parameter>\n</function>\n</tool_call>",
       forced_call_grammar(ToolFormat::QwenXml, tools, "required", "", *tok)},
  };
  // A one-byte token for each byte (a byte-level vocabulary has them all).
  std::vector<int32_t> byte_token(256, -1);
  for (int32_t id = 0; id < V; ++id) {
    const std::string p = tok->piece(id, false);
    if (p.size() == 1 && byte_token[uint8_t(p[0])] < 0 && !tok->is_eog(id)) byte_token[uint8_t(p[0])] = id;
  }
  double mask_ms = 0, max_ms = 0;
  int steps = 0;
  std::vector<float> logits(static_cast<size_t>(V));
  for (const Doc& d : docs) {
    double doc_ms = 0, doc_max = 0;
    int doc_steps = 0;
    auto g = d.g ? d.g : std::make_shared<const JsonGrammar>(d.schema ? schema(d.schema) : JsonGrammar::any_object());
    JsonConstraint c(g, table);
    // Each step: the mask, checked against feeding every token alone; then the
    // document's next byte (as a one-byte token where the vocabulary has one).
    for (size_t i = 0; i <= d.text.size(); ++i) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      const auto m0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(c.mask(logits.data(), V));
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m0).count();
      mask_ms += ms;
      max_ms = std::max(max_ms, ms);
      ++steps;
      doc_ms += ms;
      doc_max = std::max(doc_max, ms);
      ++doc_steps;
      int64_t allowed = 0;
      for (int32_t id = 0; id < V; ++id) {
        const bool ok = !std::isinf(logits[size_t(id)]);
        allowed += ok;
        ASSERT_EQ(ok, c.allows(id)) << "token " << id << " '" << tok->piece(id, false) << "' after '"
                                    << d.text.substr(0, i) << "'";
      }
      ASSERT_GT(allowed, 0);
      if (i == d.text.size()) {
        // Complete: end of generation only.
        EXPECT_TRUE(c.complete());
        EXPECT_TRUE(std::isfinite(logits[size_t(tok->eos())]));
        int64_t n_eog = 0;
        for (int32_t id = 0; id < V; ++id) n_eog += tok->is_eog(id);
        EXPECT_EQ(allowed, n_eog);
        break;
      }
      EXPECT_TRUE(std::isinf(logits[size_t(tok->eos())])) << "end of generation before the document is whole";
      const int32_t id = byte_token[uint8_t(d.text[i])];
      ASSERT_GE(id, 0);
      ASSERT_TRUE(std::isfinite(logits[size_t(id)])) << "the document's own next byte, at " << i;
      ASSERT_TRUE(c.advance(id));
    }
    std::printf("[ json mask ] %s: %.3f ms per step (mean of %d), %.3f ms at most\n",
                d.g ? "forced Qwen3-Coder call" : d.schema ? "json_schema" : "json_object", doc_ms / doc_steps,
                doc_steps, doc_max);
  }
  std::printf("[ json mask ] vocabulary %lld tokens: table built in %.1f ms; mask %.3f ms per step (mean of %d "
              "steps), %.3f ms at most\n",
              (long long)V, build_ms, mask_ms / steps, steps, max_ms);
}

// A grammar's prefix and suffix (a tool call's tags) frame the document: both must be
// written exactly, and the document is complete only after the suffix.
TEST(JsonConstraint, PrefixAndSuffixFrameTheDocument) {
  JsonGrammar g = JsonGrammar::any_object();
  g.wrap("<a>\n", "\n</a>");
  JsonState s(g);
  EXPECT_FALSE(s.complete());
  ASSERT_TRUE(s.feed("<a>\n{\"k\": [1]}"));
  EXPECT_FALSE(s.complete()) << "the suffix is still to come";
  ASSERT_TRUE(s.feed("\n</a"));
  EXPECT_FALSE(s.complete());
  ASSERT_TRUE(s.feed(">"));
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(JsonState(s).feed(" ")) << "nothing after the suffix";
  EXPECT_FALSE(JsonState(g).feed("<b>")) << "another prefix";
  EXPECT_FALSE(JsonState(g).feed("{}")) << "no prefix";
  JsonState t(g);
  ASSERT_TRUE(t.feed("<a>\n{}"));
  EXPECT_FALSE(JsonState(t).feed("\n</b>")) << "another suffix";
  EXPECT_FALSE(JsonState(t).feed(" ")) << "only the suffix follows the document";
}

// Several framed documents: the literal text picks one, and from there only its
// schema holds. Prefixes that cannot tell documents apart, or a document that cannot
// end before its suffix, are refused.
TEST(JsonConstraint, VariantsArePickedByTheirPrefix) {
  auto g = JsonGrammar::one_of({
      {"<c>f(", ojson::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})"), ")</c>"},
      {"<c>g(", ojson::parse(R"({"type":"object","properties":{"b":{"enum":["x"]}},"required":["b"]})"), ")</c>"},
  });
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(feed_all(*g, "<c>f({\"a\": 1})</c>", false).complete);
  EXPECT_TRUE(feed_all(*g, "<c>g({\"b\": \"x\"})</c>", false).complete);
  JsonState s(*g);
  ASSERT_TRUE(s.feed("<c>f("));
  EXPECT_FALSE(JsonState(s).feed("{\"b\"")) << "g's argument after f's prefix";
  EXPECT_FALSE(JsonState(*g).feed("<c>h(")) << "no such document";
  EXPECT_FALSE(s.complete());

  auto clash = JsonGrammar::one_of({{"<c>f", ojson::parse(R"({"type":"object"})"), ""},
                                    {"<c>f(", ojson::parse(R"({"type":"object"})"), ""}});
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.error().message.find("'<c>f'"), std::string::npos) << clash.error().message;
  auto open_end = JsonGrammar::one_of({{"<c>", ojson::parse(R"({"type":"integer"})"), "1</c>"}});
  ASSERT_FALSE(open_end.ok());
  EXPECT_NE(open_end.error().message.find("no number could go on"), std::string::npos) << open_end.error().message;
  EXPECT_TRUE(JsonGrammar::one_of({{"<c>", ojson::parse(R"({"type":"integer"})"), "</c>"}}).ok());
}

// Markers that must come as one token: bytes cannot spell them (in the prefix or the
// suffix), the state names the token where one is due and takes only it.
TEST(JsonConstraint, ForcedTokensCannotBeSpelled) {
  auto g = JsonGrammar::one_of({{"<m>f:", ojson::parse(R"({"type":"object"})"), "<e>"},
                                {"<m>g:", ojson::parse(R"({"type":"object"})"), "<e>"}});
  ASSERT_TRUE(g.ok());
  g->force_token("<m>", 7);
  g->force_token("<e>", 9);
  JsonState s(*g);
  EXPECT_FALSE(JsonState(s).feed("<")) << "the marker spelled";
  std::vector<int32_t> due;
  s.forced_tokens(&due);
  EXPECT_EQ(due, std::vector<int32_t>{7});
  EXPECT_FALSE(s.take_token(9));
  ASSERT_TRUE(s.take_token(7));
  due.clear();
  s.forced_tokens(&due);
  EXPECT_TRUE(due.empty()) << "a name comes as text";
  EXPECT_FALSE(JsonState(s).take_token(7));
  ASSERT_TRUE(s.feed("g:{}"));
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(JsonState(s).feed("<e>"));
  due.clear();
  s.forced_tokens(&due);
  EXPECT_EQ(due, std::vector<int32_t>{9});
  ASSERT_TRUE(s.take_token(9));
  EXPECT_TRUE(s.complete());
  // Without a token for a marker, it is text.
  auto plain = JsonGrammar::one_of({{"<m>f:", ojson::parse(R"({"type":"object"})"), "<e>"}});
  EXPECT_TRUE(feed_all(*plain, "<m>f:{}<e>", false).complete);
}

// On the Qwen2 vocabulary with Qwen2.5's markers (user-defined tokens: their text is
// shown) and Kimi K2's (control tokens: shown only when asked), a forced call takes the
// marker tokens (nothing else where one is due: not '<' nor "<tool"), names the tool
// as text, and ends with an end of generation only.
TEST(JsonConstraint, ForcedCallsTakeTheMarkerTokens) {
  struct Case {
    ToolFormat f;
    int64_t type;
    std::vector<std::string> markers;
    std::string name_text;  // between the markers before the arguments
  };
  const Case cases[] = {
      {ToolFormat::Hermes, 4, {"<tool_call>", "</tool_call>"}, "\n{\"name\": \"now\", \"arguments\": "},
      {ToolFormat::KimiK2,
       3,
       {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>", "<|tool_call_end|>"},
       "functions.now:0"},
  };
  const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}])");
  for (const Case& k : cases) {
    std::unique_ptr<Tokenizer> tok = qwen2_with(k.markers, k.type);
    if (!tok) GTEST_SKIP() << "no ggml-vocab-qwen2.gguf in the shared vocab directory";
    std::vector<int32_t> m;
    for (const std::string& s : k.markers) m.push_back(tok->vocab().find(s));
    ASSERT_GE(m.back(), 0);
    auto grammar = forced_call_grammar(k.f, tools, "required", "", *tok);
    ASSERT_TRUE(grammar);
    JsonConstraint c(grammar, std::make_shared<const JsonTokenTable>(*tok));
    const int64_t V = tok->n_vocab();
    auto allowed = [&] {
      std::vector<float> logits(size_t(V), 0.0f);
      c.mask(logits.data(), V);
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < V; ++id)
        if (std::isfinite(logits[size_t(id)])) ids.push_back(id);
      return ids;
    };
    // The reply as its token ids: markers as tokens, the rest as text.
    std::vector<int32_t> reply;
    if (k.f == ToolFormat::Hermes) {
      reply.push_back(m[0]);
      for (int32_t id : tok->encode(k.name_text + "{}}\n", false, false)) reply.push_back(id);
      reply.push_back(m[1]);
    } else {
      reply = {m[0], m[2]};
      for (int32_t id : tok->encode(k.name_text, false, false)) reply.push_back(id);
      reply.push_back(m[3]);
      for (int32_t id : tok->encode("{}", false, false)) reply.push_back(id);
      reply.push_back(m[4]);
      reply.push_back(m[1]);
    }
    for (int32_t id : reply) {
      if (std::find(m.begin(), m.end(), id) != m.end()) {
        EXPECT_EQ(allowed(), std::vector<int32_t>{id}) << "only the marker " << tok->piece(id);
        EXPECT_FALSE(c.allows(tok->encode("<", false, false)[0]));
      }
      ASSERT_TRUE(c.advance(id)) << tok->piece(id);
    }
    EXPECT_TRUE(c.complete());
    for (int32_t id : allowed()) EXPECT_TRUE(tok->is_eog(id)) << id;
  }
}

// Free text ends at the first whole occurrence of its ending, however much of the
// ending's beginning it holds; words come bare; the parts follow in order.
TEST(JsonConstraint, FreeTextEndsAtItsEnding) {
  using K = JsonPart::Kind;
  auto g = JsonGrammar::one_of(std::vector<std::vector<JsonPiece>>{{{K::Literal, "<v>", nullptr, {}},
                                                                     {K::Text, "\n</v>\n", nullptr, {}},
                                                                     {K::Json, "", nullptr, {"yes", "no"}},
                                                                     {K::Literal, ";", nullptr, {}}}});
  ASSERT_TRUE(g.ok()) << g.error().message;
  const Fed f = feed_all(*g, "<v>a\n</v\n\n</v \n</v>\nyes;", false);
  EXPECT_EQ(f.bad, std::string::npos);
  EXPECT_TRUE(f.complete);
  JsonState s(*g);
  ASSERT_TRUE(s.feed("<v>x\n</v>\n"));
  EXPECT_FALSE(JsonState(s).feed(" ")) << "a word comes bare";
  EXPECT_FALSE(JsonState(s).feed("maybe"));
  ASSERT_TRUE(s.feed("no"));
  EXPECT_FALSE(s.complete());
  ASSERT_TRUE(s.feed(";"));
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(JsonGrammar::one_of(std::vector<std::vector<JsonPiece>>{{{K::Text, "", nullptr, {}}}}).ok())
      << "free text without an ending";
}
