// Structured output on the tiny model through the scheduler: with a JSON grammar every
// reply parses (json_object: an object; a schema: a conforming value) and ends at the
// value's end, whatever the seed, with speculation on or off; without the grammar the
// same requests do not give JSON (so the tests can fail). Logprobs stay the model's.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gen_wait.h"
#include "runtime/scheduler.h"
#include "chat/forced_calls.h"
#include "chat/reply_parser.h"
#include "chat/tool_calls.h"
#include "tiny_engine.h"

using namespace deltafin;
using ojson = nlohmann::ordered_json;

namespace {

struct Reply {
  std::string text, finish;
  std::vector<TokenLogprob> lps;
};

std::vector<Reply> run(Scheduler& sched, GenRequest r, int n = 1) {
  SubmitError err;
  std::string msg;
  auto hs = sched.submit_choices(std::move(r), n, &err, &msg);
  EXPECT_EQ(int(hs.size()), n) << msg;
  std::vector<Reply> out;
  for (auto& h : hs) {
    Reply rep;
    GenUpdate u;
    do {
      u = h->wait(std::chrono::milliseconds(100));
      rep.text += u.text;
      rep.lps.insert(rep.lps.end(), u.logprobs.begin(), u.logprobs.end());
    } while (!u.done);
    rep.finish = u.finish_reason;
    out.push_back(rep);
  }
  return out;
}

bool parses(const std::string& text, ojson* v) {
  try {
    *v = ojson::parse(text);
    return true;
  } catch (const ojson::parse_error&) {
    return false;
  }
}

class JsonOnTiny : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(open_tiny(2, &engine, &tok));
    prompt = tok->encode("Answer in JSON: the weather today is", true, true);
  }
  // A sampled request. The random model would write strings of hundreds of tokens
  // before a quote; a bias towards the closing characters keeps replies short (the
  // same bias without the grammar gives no JSON).
  GenRequest request(uint64_t seed) const {
    GenRequest r;
    r.prompt = prompt;
    r.max_tokens = 400;
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = seed;
    for (auto [s, bias] : {std::pair{"\"", 7.0f}, {"}", 5.0f}, {"]", 5.0f}, {",", 3.0f}, {"1", 3.0f}, {":", 3.0f}}) {
      const std::vector<int32_t> ids = tok->encode(s, false, false);
      EXPECT_EQ(ids.size(), 1u) << s;
      if (ids.size() == 1) r.sampling.logit_bias[ids[0]] = bias;
    }
    return r;
  }
  // Speculation as asked: at most spec_max guesses a step, always (0: off).
  static SchedulerOptions options(int spec_max) {
    SchedulerOptions so;
    so.n_ctx = 512;
    so.spec_max = spec_max;
    so.spec_adaptive = false;
    return so;
  }
  std::unique_ptr<Engine> engine;
  std::optional<Tokenizer> tok;
  std::vector<int32_t> prompt;
};

}  // namespace

TEST_F(JsonOnTiny, JsonObjectRepliesAlwaysParse) {
  auto grammar = std::make_shared<const JsonGrammar>(JsonGrammar::any_object());
  int not_json = 0;
  for (int spec_max : {0, 8}) {
    Scheduler sched(engine->model(), *tok, options(spec_max));
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      GenRequest r = request(seed);
      r.json = grammar;
      const Reply rep = run(sched, r)[0];
      ojson v;
      EXPECT_EQ(rep.finish, "stop") << "seed " << seed << ": " << rep.text;
      ASSERT_TRUE(parses(rep.text, &v)) << "seed " << seed << " spec " << spec_max << ": " << rep.text;
      EXPECT_TRUE(v.is_object()) << rep.text;
      if (seed == 1) std::printf("[ json_object ] seed 1, spec %d: %s\n", spec_max, rep.text.c_str());
      if (spec_max == 0) {
        // The same request free: not JSON (the test could fail).
        ojson w;
        const Reply free = run(sched, request(seed))[0];
        if (!parses(free.text, &w) || !w.is_object()) ++not_json;
      }
    }
    // Several choices, each with its own document.
    GenRequest r = request(77);
    r.json = grammar;
    for (const Reply& rep : run(sched, r, 2)) {
      ojson v;
      EXPECT_EQ(rep.finish, "stop") << rep.text;
      ASSERT_TRUE(parses(rep.text, &v)) << rep.text;
      EXPECT_TRUE(v.is_object());
    }
  }
  EXPECT_GT(not_json, 0) << "without the grammar every reply was a JSON object anyway";
}

TEST_F(JsonOnTiny, SchemaRepliesConform) {
  auto g = JsonGrammar::from_schema(ojson::parse(R"({"type":"object","properties":{
      "id":{"type":"integer"},
      "color":{"enum":["red","green","blue"]},
      "flags":{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":3},
      "note":{"type":["string","null"]}},
    "required":["id","color","flags"],"additionalProperties":false})"));
  ASSERT_TRUE(g.ok()) << g.error().message;
  auto grammar = std::make_shared<const JsonGrammar>(std::move(g).value());
  SchedulerOptions so;
  so.n_ctx = 512;
  Scheduler sched(engine->model(), *tok, so);
  int free_conform = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GenRequest r = request(seed);
    r.json = grammar;
    const Reply rep = run(sched, r)[0];
    if (seed == 1) std::printf("[ json_schema ] seed 1: %s\n", rep.text.c_str());
    ojson v;
    EXPECT_EQ(rep.finish, "stop") << rep.text;
    ASSERT_TRUE(parses(rep.text, &v)) << "seed " << seed << ": " << rep.text;
    ASSERT_TRUE(v.is_object()) << rep.text;
    EXPECT_TRUE(v["id"].is_number_integer()) << rep.text;
    EXPECT_TRUE(std::set<std::string>({"red", "green", "blue"}).count(v["color"].get<std::string>())) << rep.text;
    ASSERT_TRUE(v["flags"].is_array()) << rep.text;
    EXPECT_GE(v["flags"].size(), 1u);
    EXPECT_LE(v["flags"].size(), 3u);
    for (const ojson& f : v["flags"]) EXPECT_TRUE(f.is_boolean()) << rep.text;
    if (v.contains("note")) {
      EXPECT_TRUE(v["note"].is_string() || v["note"].is_null()) << rep.text;
    }
    std::vector<std::string> keys;
    for (auto& [k, x] : v.items()) keys.push_back(k);
    const std::vector<std::string> order = {"id", "color", "flags", "note"};
    EXPECT_EQ(keys, std::vector<std::string>(order.begin(), order.begin() + long(keys.size()))) << rep.text;
    ojson w;
    const Reply free = run(sched, request(seed))[0];
    if (parses(free.text, &w) && w.is_object() && w.contains("id")) ++free_conform;
  }
  EXPECT_EQ(free_conform, 0);
}

// Greedy output is the same with and without speculation (each guess is checked
// against its position's masked row), and the logprobs are the model's own, not the
// masked row's: the first position reports tokens a JSON object cannot start with.
TEST_F(JsonOnTiny, SpeculationAndLogprobsUnchanged) {
  auto grammar = std::make_shared<const JsonGrammar>(JsonGrammar::any_object());
  std::vector<Reply> replies;
  uint64_t drafted = 0;
  for (int spec_max : {0, 8}) {
    Scheduler sched(engine->model(), *tok, options(spec_max));
    GenRequest r = request(3);
    r.sampling.temperature = 0;
    r.max_tokens = 120;
    r.json = grammar;
    r.logprobs = 5;
    replies.push_back(run(sched, r)[0]);
    drafted += sched.stats().drafted;
  }
  EXPECT_GT(drafted, 0u);
  EXPECT_EQ(replies[0].text, replies[1].text);
  ASSERT_FALSE(replies[0].lps.empty());
  int foreign = 0;
  for (const auto& [id, lp] : replies[0].lps[0].top) {
    const std::string p = tok->piece(id, false);
    EXPECT_TRUE(std::isfinite(lp));
    if (p.find_first_not_of(" \t\n\r") != std::string::npos && p[p.find_first_not_of(" \t\n\r")] != '{') ++foreign;
  }
  EXPECT_GT(foreign, 0) << "the top logprobs look masked";
}

// tool_choice naming a function, in the Hermes format: every reply is that one call
// (the tags, the name, arguments following the tool's schema), which the reply
// parser reads back; without the grammar the same requests are no call.
TEST_F(JsonOnTiny, ForcedToolCallsParse) {
  const ojson tools = ojson::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
         "properties": {"unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["unit", "days"]}}},
      {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}])");
  const ojson named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  auto grammar = forced_call_grammar(ToolFormat::Hermes, tools, named, "", *tok);
  ASSERT_TRUE(grammar);
  EXPECT_FALSE(forced_call_grammar(ToolFormat::None, tools, named, "", *tok)) << "no format to call in";
  EXPECT_FALSE(forced_call_grammar(ToolFormat::Hermes, tools, "auto", "", *tok));
  SchedulerOptions so;
  so.n_ctx = 512;
  Scheduler sched(engine->model(), *tok, so);
  int calls_without = 0;
  for (uint64_t seed : {1, 2, 3}) {
    for (bool constrained : {true, false}) {
      GenRequest r = request(seed);
      if (constrained) r.json = grammar;
      const Reply rep = run(sched, std::move(r))[0];
      std::string content;
      std::vector<ToolCall> calls;
      const bool ok = parse_tool_calls(ToolFormat::Hermes, rep.text, &content, &calls, &tools);
      if (!constrained) {
        calls_without += ok;
        continue;
      }
      ASSERT_TRUE(ok) << rep.text;
      EXPECT_EQ(rep.finish, "stop");
      EXPECT_EQ(content, "");
      ASSERT_EQ(calls.size(), 1u);
      EXPECT_EQ(calls[0].name, "get_weather");
      const ojson args = ojson::parse(calls[0].arguments);
      EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args;
      EXPECT_TRUE(args["days"].is_number_integer()) << args;
    }
  }
  EXPECT_EQ(calls_without, 0);
  // "required" with two tools: a call to either.
  GenRequest r = request(4);
  r.json = forced_call_grammar(ToolFormat::Hermes, tools, "required", "", *tok);
  const Reply rep = run(sched, std::move(r))[0];
  std::string content;
  std::vector<ToolCall> calls;
  ASSERT_TRUE(parse_tool_calls(ToolFormat::Hermes, rep.text, &content, &calls, &tools)) << rep.text;
  EXPECT_TRUE(calls[0].name == "get_weather" || calls[0].name == "now");
}

// Two tools for the forced-call tests (days optional), and a Kimi K3 prompt that
// leaves the assistant's response open.
const ojson kCallTools = ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["unit"]}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
       "properties": {"zone": {"enum": ["utc"]}}, "required": ["zone"]}}}])");
const std::string kK3Prompt = "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>";

// Where a forced reply's next text is certain (a call's closing tags, the markers), it
// is drafted and verified in one pass: greedy replies equal those without speculation,
// and literal guesses are kept. (The random tiny model often spells the text in other
// tokens than the tokenizer: it keeps 34-73% of them; a sequence that keeps fewer than
// half stops drafting its literal text.)
TEST_F(JsonOnTiny, CertainTextIsDraftedAndVerified) {
  const ojson& tools = kCallTools;
  for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Xtml, ToolFormat::QwenXml, ToolFormat::Dsml}) {
    const std::string prompt = f == ToolFormat::Xtml ? kK3Prompt : "Weather?";
    auto grammar = forced_call_grammar(f, tools, "required", prompt, *tok, 3);
    ASSERT_TRUE(grammar);
    std::string texts[2];
    for (int spec_max : {0, 8}) {
      Scheduler sched(engine->model(), *tok, options(spec_max));
      GenRequest r = request(5);
      r.sampling.temperature = 0;
      r.prompt = tok->encode(prompt, true, false);
      r.json = grammar;
      const Reply rep = run(sched, std::move(r))[0];
      EXPECT_EQ(rep.finish, "stop") << rep.text;
      texts[spec_max ? 1 : 0] = rep.text;
      const SchedulerStats st = sched.stats();
      if (spec_max == 0) {
        EXPECT_EQ(st.literal_drafted, 0u);
        continue;
      }
      std::printf("[ literal ] format %d: %llu of %llu literal guesses kept (%llu guesses in all), %zu bytes\n", int(f),
                  (unsigned long long)st.literal_accepted, (unsigned long long)st.literal_drafted,
                  (unsigned long long)st.drafted, rep.text.size());
      EXPECT_GT(st.literal_drafted, 0u);
      EXPECT_GT(st.literal_accepted, 0u);
    }
    EXPECT_EQ(texts[1], texts[0]) << "speculation changed a greedy reply";
  }
}

// tool_choice "required" with two tools and up to three calls, in every format: each
// sampled reply is one to three calls that the format's reader takes back, each to one
// of the tools, with the arguments of that tool's own schema (days optional) (the tiny
// vocabulary has no marker tokens: the markers come as text). Kimi K3's reply first
// closes the response the prompt opened.
TEST_F(JsonOnTiny, ForcedCallsInEveryFormat) {
  const ojson& tools = kCallTools;
  Scheduler sched(engine->model(), *tok, options(0));
  std::set<std::string> names;
  int several = 0, with_days = 0, without_days = 0;
  for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::KimiK2, ToolFormat::DeepSeek, ToolFormat::Xtml,
                       ToolFormat::QwenXml, ToolFormat::Dsml}) {
    const std::string prompt = f == ToolFormat::Xtml ? kK3Prompt : "Weather?";
    auto grammar = forced_call_grammar(f, tools, "required", prompt, *tok, 3);
    ASSERT_TRUE(grammar);
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      GenRequest r = request(seed);
      r.prompt = tok->encode(prompt, true, false);
      r.json = grammar;
      const Reply rep = run(sched, std::move(r))[0];
      EXPECT_EQ(rep.finish, "stop") << rep.text;
      ReplyFormat rf;
      if (f == ToolFormat::Xtml) rf.xtml = true, rf.xtml_open = xtml_open_tags(prompt);
      else rf.tools = f, rf.tool_defs = tools;
      ReplyParser p(rf);
      ReplyPiece a = p.push(rep.text), b = p.finish();
      EXPECT_EQ(a.content + b.content, "") << rep.text;
      std::vector<ToolCall> calls;
      add_deltas(&calls, a.calls);
      add_deltas(&calls, b.calls);
      ASSERT_GE(calls.size(), 1u) << rep.text;
      ASSERT_LE(calls.size(), 3u) << rep.text;
      several += calls.size() > 1;
      for (const ToolCall& c : calls) {
        const ojson args = ojson::parse(c.arguments);
        names.insert(c.name);
        if (c.name == "now") {
          EXPECT_EQ(args, ojson({{"zone", "utc"}})) << rep.text;
          continue;
        }
        ASSERT_EQ(c.name, "get_weather");
        EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args;
        EXPECT_LE(args.size(), 2u) << args;
        if (args.contains("days")) {
          EXPECT_TRUE(args["days"].is_number()) << args;
        }
        ++(args.contains("days") ? with_days : without_days);
      }
      if (seed == 1) std::printf("[ forced ] %s\n", rep.text.c_str());
    }
  }
  std::printf("[ forced ] %d of 24 replies with several calls; days given %d times, left out %d\n", several,
              with_days, without_days);
  EXPECT_EQ(names.size(), 2u) << "sampling picked one tool only";
  EXPECT_GT(several, 0) << "no reply went on after its first call";
}
