// The server's pure parts: request validation (each bad field gets a 400 naming it),
// response helpers, the <think> splitter on streamed pieces cut at every position,
// and the scheduler's output against generate() on a tiny model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <map>
#include <optional>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/scheduler.h"
#include "server/api.h"
#include "chat/reasoning.h"
#include "synth/synth.h"
#include "chi2.h"
#include "gen_wait.h"
#include "tiny_engine.h"

using namespace deltafin;
using namespace deltafin::server;

TEST(ServerApi, ChatRequestParses) {
  ChatRequest r;
  auto e = parse_chat_request(
      R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "max_tokens":5,"temperature":0,"top_p":0.5,"seed":42,"stop":["x","y"],"stream":true,
          "stream_options":{"include_usage":true},"logit_bias":{"3":-100},
          "tools":[{"type":"function","function":{"name":"f"}}]})",
      100, &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.gen.model, "m");
  EXPECT_EQ(*r.gen.max_tokens, 5);
  EXPECT_EQ(r.gen.sampling.temperature, 0.0f);
  EXPECT_EQ(r.gen.sampling.top_p, 0.5f);
  EXPECT_EQ(r.gen.sampling.seed, 42u);
  EXPECT_EQ(r.gen.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.gen.stream && r.gen.include_usage);
  EXPECT_EQ(r.gen.sampling.logit_bias.at(3), -100.0f);
  EXPECT_EQ(r.messages[1]["content"], "ab");  // text parts joined
  EXPECT_TRUE(r.tools.is_array());
}

// A request's missing sampling fields come from the server's base (the model's
// recommended sampling over the APIs' defaults); the fields it sets win.
TEST(ServerApi, MissingSamplingFieldsComeFromTheBase) {
  SamplingParams base = api_default_sampling();
  EXPECT_EQ(base.temperature, 1.0f);
  EXPECT_EQ(base.top_k, 0);
  base.temperature = 0.6f;
  base.top_k = 20;
  ChatRequest r;
  auto e = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"top_k":5})", 100, &r, base);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.gen.sampling.temperature, 0.6f);
  EXPECT_EQ(r.gen.sampling.top_k, 5);
  EXPECT_EQ(r.gen.sampling.top_p, 1.0f);
  CompletionRequest c;
  e = parse_completion_request(R"({"prompt":"x","temperature":0})", 100, &c, base);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(c.gen.sampling.temperature, 0.0f);
  EXPECT_EQ(c.gen.sampling.top_k, 20);
  ChatRequest plain;
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}]})", 100, &plain));
  EXPECT_EQ(plain.gen.sampling.temperature, 1.0f);
}

TEST(ServerApi, ToolChoice) {
  const std::string head = R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],)";
  for (const char* choice : {R"("none")", R"("auto")", R"("required")", R"({"type":"function","function":{"name":"f"}})"}) {
    ChatRequest r;
    auto e = parse_chat_request(head + R"("parallel_tool_calls":false,"tool_choice":)" + choice + "}", 100, &r);
    ASSERT_FALSE(e) << choice << ": " << e->message;
    EXPECT_EQ(r.tool_choice, json::parse(choice));
    EXPECT_FALSE(r.parallel_tool_calls);
  }
  ChatRequest r;
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"none"})", 100, &r));
  ASSERT_FALSE(parse_chat_request(head + R"("stream":false})", 100, &r));
  EXPECT_TRUE(r.tool_choice.is_null());
  EXPECT_TRUE(r.parallel_tool_calls) << "OpenAI's default";
  EXPECT_TRUE(r.reasoning_effort.is_null());
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"})", 100, &r));
  EXPECT_EQ(r.reasoning_effort, "high");
}

TEST(ServerApi, BadFieldsNameTheParam) {
  const std::pair<const char*, const char*> cases[] = {
      {"", ""},
      {"{", ""},
      {"[1]", ""},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":-1})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"repeat_penalty":0})", "repeat_penalty"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"5"})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2.5})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":7})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[""]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"100":1}})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"1":500}})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":0})", "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":500})", "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"model":5})", "model"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":{}})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"retrieval"}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":""}}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})", "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"always"})", "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})", "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function"}})", "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":"yes"})", "parallel_tool_calls"},
      {R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":3})", "reasoning_effort"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}})", "response_format"},
  };
  for (auto& [body, param] : cases) {
    ChatRequest r;
    auto e = parse_chat_request(body, 100, &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400) << body;
    EXPECT_EQ(e->param, param) << body << ": " << e->message;
    const json j = e->body();
    EXPECT_TRUE(j["error"].contains("message") && j["error"].contains("type") && j["error"].contains("param") &&
                j["error"].contains("code"));
  }
}

TEST(ServerApi, CompletionPrompts) {
  CompletionRequest r;
  ASSERT_FALSE(parse_completion_request(R"({"prompt":["hello"]})", 100, &r));
  EXPECT_EQ(r.prompt, "hello");
  EXPECT_EQ(*r.gen.max_tokens, 16);  // the OpenAI default
  CompletionRequest t;
  ASSERT_FALSE(parse_completion_request(R"({"prompt":[1,2,3],"max_tokens":4})", 100, &t));
  EXPECT_EQ(t.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  for (const char* bad : {R"({})", R"({"prompt":""})", R"({"prompt":[1,200]})", R"({"prompt":["a","b"]})",
                          R"({"prompt":"a","suffix":"b"})"}) {
    CompletionRequest x;
    auto e = parse_completion_request(bad, 100, &x);
    ASSERT_TRUE(e) << bad;
    EXPECT_FALSE(e->param.empty()) << bad;
  }
}

// Request JSON is parsed within a depth and a key count (a 400 that names the limit,
// nothing deep enough to exhaust a stack), numbers past a double are a 400, and an
// error quoting invalid UTF-8 still serializes.
TEST(ServerApi, BodyLimits) {
  json j;
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_FALSE(parse_json_bounded(at_limit, &j));
  const std::string over = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  std::optional<std::string> why = parse_json_bounded(over, &j);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find(std::to_string(kMaxJsonDepth)), std::string::npos) << *why;
  const int deep = 100000;
  const std::string body = "{\"content\":\"x\",\"a\":" + std::string(deep, '[') + std::string(deep, ']') + "}";
  TokenizeRequest r;
  std::optional<ApiError> e = parse_tokenize_request(body, &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("nested"), std::string::npos) << e->message;
  auto keys = [](size_t n) {
    std::string s = "{\"content\":\"x\",\"o\":{";
    for (size_t i = 0; i < n; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    return s + "}}";
  };
  EXPECT_FALSE(parse_tokenize_request(keys(kMaxJsonKeys), &r));
  e = parse_tokenize_request(keys(kMaxJsonKeys + 1), &r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find(std::to_string(kMaxJsonKeys) + " keys"), std::string::npos) << e->message;
  for (const char* bad : {R"({"content":"x","max_tokens":1e400})", R"({"content":"x","n":-1e999})", "{\"content\":\"\xff\"}",
                          "{\"\xc3\":1}", R"({"content":"\ud800"})"}) {
    e = parse_tokenize_request(bad, &r);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->status, 400);
    EXPECT_NO_THROW(e->body().dump()) << bad;  // the message quotes the bytes: sanitized
  }
  // Keys given twice: the first place, the last value (as nlohmann's own parser), also
  // in an object large enough to be indexed.
  json j2;
  ASSERT_FALSE(parse_json_bounded(R"({"a":1,"b":2,"a":3})", &j2));
  EXPECT_EQ(j2.dump(), R"({"a":3,"b":2})");
  std::string big = "{";
  for (int i = 0; i < 40; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  big += "\"k3\":{\"x\":[1]},\"k39\":null}";
  ASSERT_FALSE(parse_json_bounded(big, &j2));
  EXPECT_EQ(j2, json::parse(big));
  EXPECT_EQ(j2.size(), 40u);
  EXPECT_EQ(j2.begin().key(), "k0");
  // A tool call's arguments string nested past the limit stays a string.
  ChatRequest c;
  json args = json::object();
  args["a"] = json::parse(std::string(600, '[') + std::string(600, ']'));
  json call = json::object(), fn = json::object(), msg = json::object(), req = json::object();
  fn["name"] = "f";
  fn["arguments"] = args.dump();
  call["id"] = "c";
  call["type"] = "function";
  call["function"] = fn;
  msg["role"] = "assistant";
  msg["content"] = nullptr;
  msg["tool_calls"] = json::array({call});
  req["messages"] = json::array({msg});
  ASSERT_FALSE(parse_chat_request(req.dump(), 100, &c));
  EXPECT_TRUE(c.messages[0]["tool_calls"][0]["function"]["arguments"].is_string());
}

TEST(ServerApi, TokenizeBodies) {
  TokenizeRequest r;
  ASSERT_FALSE(parse_tokenize_request(R"({"content":"hi","add_special":true,"parse_special":false,"with_pieces":true})", &r));
  EXPECT_EQ(r.content, "hi");
  EXPECT_TRUE(r.add_special);
  EXPECT_FALSE(r.parse_special);
  EXPECT_TRUE(r.with_pieces);
  TokenizeRequest d;
  ASSERT_FALSE(parse_tokenize_request(R"({"content":""})", &d));  // an empty text has no tokens
  EXPECT_FALSE(d.add_special);
  EXPECT_TRUE(d.parse_special);
  EXPECT_FALSE(d.with_pieces);
  for (const char* bad : {R"({})", R"({"content":3})", R"({"content":"a","with_pieces":"yes"})", "[]"}) {
    TokenizeRequest x;
    EXPECT_TRUE(parse_tokenize_request(bad, &x)) << bad;
  }
  std::vector<int32_t> ids;
  ASSERT_FALSE(parse_detokenize_request(R"({"tokens":[0,5,99]})", 100, &ids));
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 5, 99}));
  for (const char* bad : {R"({})", R"({"tokens":[100]})", R"({"tokens":[-1]})", R"({"tokens":[1.5]})", R"({"tokens":"1"})"}) {
    std::vector<int32_t> x;
    auto e = parse_detokenize_request(bad, 100, &x);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->param, "tokens") << bad;
  }
  // Pieces: whole UTF-8 as a string, part of a character as its bytes.
  const PieceFn piece = [](int32_t id) { return id == 1 ? std::string("\xe9\xbe") : std::string("ab"); };
  EXPECT_EQ(tokenize_json({2, 1}, false, piece), json::parse(R"({"tokens":[2,1]})"));
  EXPECT_EQ(tokenize_json({2, 1}, true, piece),
            json::parse(R"({"tokens":[{"id":2,"piece":"ab"},{"id":1,"piece":[233,190]}]})"));
}

namespace {
// Feeds `text` to a splitter in pieces cut at `cuts` and returns the joined result.
SplitText split_in_pieces(const std::string& text, bool open, size_t every) {
  ReasoningSplitter s(true, open);
  SplitText all;
  for (size_t i = 0; i < text.size(); i += every) {
    SplitText t = s.push(text.substr(i, every));
    all.reasoning += t.reasoning;
    all.content += t.content;
  }
  SplitText t = s.finish();
  all.reasoning += t.reasoning;
  all.content += t.content;
  return all;
}
}  // namespace

TEST(ServerReasoning, SplitsThinkAtAnyPieceBoundary) {
  for (size_t every = 1; every <= 12; ++every) {
    SplitText a = split_in_pieces("<think>\nweighing options</think>\n\nThe answer.", false, every);
    EXPECT_EQ(a.reasoning, "\nweighing options") << every;
    EXPECT_EQ(a.content, "The answer.") << every;
    SplitText b = split_in_pieces("plan a < b </think>Done", true, every);  // template opened <think>
    EXPECT_EQ(b.reasoning, "plan a < b ") << every;
    EXPECT_EQ(b.content, "Done") << every;
    SplitText c = split_in_pieces("No thinking <think> here", false, every);
    EXPECT_EQ(c.reasoning, "") << every;
    EXPECT_EQ(c.content, "No thinking <think> here") << every;
    SplitText d = split_in_pieces("<think>cut off mid-thought </thi", false, every);
    EXPECT_EQ(d.reasoning, "cut off mid-thought </thi") << every;
    EXPECT_EQ(d.content, "") << every;
  }
  ReasoningSplitter off(false, false);
  EXPECT_EQ(off.push("<think>x</think>y").content, "<think>x</think>y");
  EXPECT_TRUE(prompt_opens_think("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_think("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_think("<|im_start|>assistant\n"));
}

// The scheduler's output for several concurrent requests equals generate() alone.

TEST(Scheduler, ConcurrentRequestsMatchGenerateAlone) {
  std::unique_ptr<Engine> engine;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(2, &engine, &tok));
  Model& m = engine->model();
  const std::vector<std::string> prompts = {"hello world", "a much longer prompt than the others, to be chunked",
                                            "x", "the quick brown fox", "one two three one two three one two three"};
  const std::vector<int> n_predict = {12, 12, 12, 12, 48};
  std::vector<std::string> want;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateParams gp;
    gp.n_predict = n_predict[i];
    gp.sampling.temperature = i == 2 ? 0.9f : 0.0f;  // one sampled with a seed
    gp.sampling.seed = 1234;
    auto st = m.new_state(128);
    std::string text;
    ASSERT_TRUE(generate(m, *st, *tok, tok->encode(prompts[i], true, true), gp,
                         [&](const std::string& t) { text += t; return true; }, nullptr).ok());
    want.push_back(text);
  }
  // With prompt-lookup speculation off and on (guesses verified inside the batched
  // step): the same text either way.
  for (int spec_max : {0, 16}) {
    SchedulerOptions so;
    so.n_parallel = 3;  // one request waits in the queue
    so.n_ctx = 128;
    so.prefill_chunk = 5;
    so.spec_max = spec_max;
    Scheduler sched(m, *tok, so);
    std::vector<std::shared_ptr<GenHandle>> hs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenRequest r;
      r.prompt = tok->encode(prompts[i], true, true);
      r.max_tokens = n_predict[i];
      r.sampling.temperature = i == 2 ? 0.9f : 0.0f;
      r.sampling.seed = 1234;
      SubmitError err;
      std::string msg;
      hs.push_back(sched.submit(r, &err, &msg));
      ASSERT_TRUE(hs.back()) << msg;
    }
    for (size_t i = 0; i < hs.size(); ++i) {
      std::string text;
      GenUpdate u;
      do {
        u = hs[i]->wait(std::chrono::milliseconds(100));
        text += u.text;
      } while (!u.done);
      EXPECT_EQ(text, want[i]) << "request " << i << " spec_max " << spec_max;
      EXPECT_TRUE(u.finish_reason == "length" || u.finish_reason == "stop") << u.finish_reason;
    }
    const SchedulerStats ss = sched.stats();
    EXPECT_GT(ss.batch_rows, ss.steps) << "steps should batch several rows";
    if (spec_max == 0) {
      EXPECT_EQ(ss.drafted, 0u);
    } else {
      EXPECT_GT(ss.drafted, 0u) << "the repetitive requests should have been guessed at";
      EXPECT_GT(ss.accepted, 0u);
      EXPECT_LE(ss.accepted, ss.drafted);
    }
  }
  SchedulerOptions so;
  so.n_ctx = 128;
  so.prefill_chunk = 5;
  Scheduler sched(m, *tok, so);
  // Too long a prompt is refused with both numbers.
  GenRequest big;
  big.prompt.assign(200, 1);
  SubmitError err;
  std::string msg;
  EXPECT_FALSE(sched.submit(big, &err, &msg));
  EXPECT_EQ(err, SubmitError::Invalid);
  EXPECT_NE(msg.find("200"), std::string::npos);
  EXPECT_NE(msg.find("128"), std::string::npos);
  sched.shutdown(true, std::chrono::milliseconds(1000));
  GenRequest late;
  late.prompt = {1};
  EXPECT_FALSE(sched.submit(late, &err, &msg));
  EXPECT_EQ(err, SubmitError::ShuttingDown);
}

// Sampling with speculation inside the scheduler keeps the distribution: 4-token
// completions at temperature 1 over the top 2 candidates, counted over many seeds
// with guesses (the model's own argmax) verified in the batched steps and without
// (chi-square test of homogeneity, 0.1% level).
TEST(Scheduler, SampledCompletionsKeepTheirDistributionWithSpeculation) {
  std::unique_ptr<Engine> engine;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(1, &engine, &tok));
  const std::vector<int32_t> prompt = tok->encode("abc", true, true);
  const int N = 600;
  std::map<std::string, std::array<int, 2>> counts;
  uint64_t drafted = 0, accepted = 0;
  for (int side = 0; side < 2; ++side) {
    SchedulerOptions so;
    so.n_parallel = 4;
    so.n_ctx = 64;
    so.spec_max = side ? 3 : 0;
    so.spec_adaptive = false;
    // The full model's own argmax as the guess: kept about as often as it is the draw.
    Model& model = engine->model();
    so.make_drafters = [&model] {
      std::vector<std::unique_ptr<Drafter>> d;
      d.push_back(make_self_drafter(model));
      return d;
    };
    Scheduler sched(engine->model(), *tok, so);
    for (int i0 = 0; i0 < N; i0 += 4) {  // four at a time: the guesses ride in shared steps
      std::vector<std::shared_ptr<GenHandle>> hs;
      for (int i = i0; i < i0 + 4; ++i) {
        GenRequest r;
        r.prompt = prompt;
        r.max_tokens = 4;
        r.ignore_eos = true;
        r.sampling.temperature = 1.0f;
        r.sampling.top_k = 2;
        r.sampling.top_p = 1.0f;
        r.sampling.min_p = 0.0f;
        r.sampling.seed = uint64_t(side * 100000 + i + 1);
        SubmitError err;
        std::string msg;
        hs.push_back(sched.submit(r, &err, &msg));
        ASSERT_TRUE(hs.back()) << msg;
      }
      for (auto& h : hs) {
        std::string text;
        GenUpdate u;
        do {
          u = h->wait(std::chrono::milliseconds(100));
          text += u.text;
        } while (!u.done);
        ++counts[text][size_t(side)];
      }
    }
    if (side) drafted = sched.stats().drafted, accepted = sched.stats().accepted;
  }
  EXPECT_GT(accepted, 0u) << "some guesses must be kept for the test to mean anything";
  EXPECT_LT(accepted, drafted);
  int cells = 0;
  const double x = chi2_two_samples(counts, &cells);
  ASSERT_GE(cells, 3);
  const int df = cells - 1;
  ASSERT_LE(df, 30) << "too many cells for the table";
  EXPECT_LT(x, chi2_crit_001(df)) << cells << " cells, " << drafted << " drafted, " << accepted << " kept";
}

// n choices of one prompt: evaluated once (the other choices copy its state and
// logits), each choice as a single request with its seed (seed + i) would give.
TEST(Scheduler, ChoicesEvaluateThePromptOnceAndMatchSingleRequests) {
  std::unique_ptr<Engine> engine;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(2, &engine, &tok));
  auto collect = [](GenHandle& h) {
    std::string text;
    const GenUpdate u = wait_done(h, &text);
    return std::make_pair(text, u);
  };
  SchedulerOptions so;
  so.n_parallel = 3;
  so.n_ctx = 128;
  so.prefill_chunk = 4;  // the first choice's prompt takes several steps
  so.prompt_cache = false;
  Scheduler sched(engine->model(), *tok, so);
  GenRequest r;
  r.prompt = tok->encode("the quick brown fox jumps over", true, true);
  r.max_tokens = 10;
  r.ignore_eos = true;
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 42;
  SubmitError err;
  std::string msg;
  auto hs = sched.submit_choices(r, 3, &err, &msg);
  ASSERT_EQ(hs.size(), 3u) << msg;
  std::vector<std::string> texts;
  for (auto& h : hs) {
    auto [text, u] = collect(*h);
    EXPECT_EQ(u.finish_reason, "length");
    EXPECT_EQ(u.n_generated, 10);
    texts.push_back(text);
  }
  EXPECT_EQ(sched.stats().prompt_tokens, r.prompt.size()) << "the prompt is evaluated once for three choices";
  EXPECT_TRUE(texts[0] != texts[1] || texts[1] != texts[2]) << "three seeds, three draws: " << texts[0];
  for (int i = 0; i < 3; ++i) {
    GenRequest one = r;
    one.sampling.seed = 42 + uint64_t(i);
    auto h = sched.submit(one, &err, &msg);
    ASSERT_TRUE(h) << msg;
    EXPECT_EQ(collect(*h).first, texts[size_t(i)]) << "choice " << i;
  }
  EXPECT_TRUE(sched.submit_choices(r, 4, &err, &msg).empty());
  EXPECT_EQ(err, SubmitError::Invalid);
  EXPECT_NE(msg.find("3"), std::string::npos) << msg;
}
