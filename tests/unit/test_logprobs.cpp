// Token log-probabilities: the log-softmax and its top entries, the server's request
// fields and JSON, and the scheduler's logprobs against the model's own logits (the
// same with and without speculation, aligned with the text a stop string cuts).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "runtime/scheduler.h"
#include "server/api.h"
#include "gen_wait.h"
#include "tiny_engine.h"

using namespace deltafin;
using namespace deltafin::server;

TEST(Logprobs, LogSoftmaxAndTopEntries) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  const TokenLogprob t = token_logprob(logits.data(), int64_t(logits.size()), 4, 3);
  EXPECT_EQ(t.id, 4);
  EXPECT_NEAR(t.logprob, 0.5 - std::log(z), 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  // Best first, the lower id first on a tie.
  EXPECT_EQ(t.top[0].first, 1);
  EXPECT_EQ(t.top[1].first, 3);
  EXPECT_EQ(t.top[2].first, 0);
  EXPECT_NEAR(t.top[0].second, 3.0 - std::log(z), 1e-6);
  EXPECT_EQ(t.top[0].second, t.top[1].second);
  // Clamped to the vocabulary; none asked, none given.
  EXPECT_EQ(token_logprob(logits.data(), 5, 0, 20).top.size(), 5u);
  EXPECT_TRUE(token_logprob(logits.data(), 5, 0, 0).top.empty());
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(token_logprob(big.data(), 2, 0, 0).logprob, -std::log(2.0), 1e-6);
}

TEST(Logprobs, RequestFields) {
  ChatRequest c;
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}]})", 100, &c));
  EXPECT_EQ(c.gen.logprobs, -1);
  ASSERT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})", 100, &c));
  EXPECT_EQ(c.gen.logprobs, 0);
  ASSERT_FALSE(
      parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":5})", 100, &c));
  EXPECT_EQ(c.gen.logprobs, 5);
  CompletionRequest p;
  ASSERT_FALSE(parse_completion_request(R"({"prompt":"a","logprobs":0})", 100, &p));
  EXPECT_EQ(p.gen.logprobs, 0);
  ASSERT_FALSE(parse_completion_request(R"({"prompt":"a","logprobs":3})", 100, &p));
  EXPECT_EQ(p.gen.logprobs, 3);
  const std::pair<const char*, const char*> chat_bad[] = {
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})", "logprobs"},
  };
  for (auto& [body, param] : chat_bad) {
    ChatRequest r;
    auto e = parse_chat_request(body, 100, &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, param) << body;
  }
  ASSERT_FALSE(parse_completion_request(R"({"prompt":"a","logprobs":1,"echo":true,"max_tokens":0})", 100, &p));
  EXPECT_TRUE(p.gen.echo);
  EXPECT_EQ(*p.gen.max_tokens, 0);
  const std::pair<const char*, const char*> completion_bad[] = {
      {R"({"prompt":"a","logprobs":-1})", "logprobs"},
      {R"({"prompt":"a","logprobs":21})", "logprobs"},
      {R"({"prompt":"a","logprobs":true})", "logprobs"},
      {R"({"prompt":"a","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"a","echo":true,"n":2})", "echo"},
      {R"({"prompt":"a","echo":1})", "echo"},
  };
  for (auto& [body, param] : completion_bad) {
    CompletionRequest r;
    auto e = parse_completion_request(body, 100, &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, param) << body;
  }
}

TEST(Logprobs, ResponseJson) {
  // Token 1 is the first byte of a two-byte character: its text cannot hold it.
  const std::vector<std::string> pieces = {"ab", "\xC3", " c"};
  PieceFn piece = [&](int32_t id) { return pieces[size_t(id)]; };
  TokenLogprob a{0, -0.5f, {{0, -0.5f}, {2, -1.5f}}, 0};
  TokenLogprob b{1, -2.0f, {{2, -1.0f}, {1, -2.0f}}, 2};
  const json chat = chat_logprobs_json({a, b}, piece);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "ab");
  EXPECT_EQ(chat["content"][0]["bytes"], json::array({97, 98}));
  EXPECT_FLOAT_EQ(chat["content"][0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], " c");
  EXPECT_EQ(chat["content"][1]["token"], "\xEF\xBF\xBD");  // U+FFFD
  EXPECT_EQ(chat["content"][1]["bytes"], json::array({0xC3}));
  EXPECT_TRUE(chat["refusal"].is_null());
  EXPECT_NO_THROW((void)chat.dump());
  const json cmp = completion_logprobs_json({a, b}, piece);
  EXPECT_EQ(cmp["tokens"], json::array({"ab", "\xEF\xBF\xBD"}));
  EXPECT_FLOAT_EQ(cmp["token_logprobs"][1].get<float>(), -2.0f);
  EXPECT_FLOAT_EQ(cmp["top_logprobs"][0][" c"].get<float>(), -1.5f);
  EXPECT_EQ(cmp["text_offset"], json::array({0, 2}));
  // A prompt's first token: nothing predicts it.
  TokenLogprob first{0, std::numeric_limits<float>::quiet_NaN(), {}, 0};
  const json echo = completion_logprobs_json({first, b}, piece);
  EXPECT_TRUE(echo["token_logprobs"][0].is_null());
  EXPECT_TRUE(echo["top_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(echo["token_logprobs"][1].get<float>(), -2.0f);
}

namespace {
struct Reply {
  std::string text;
  std::vector<TokenLogprob> lps, prompt_lps;
  std::string finish;
  int n_cached = 0;
};

Reply run_one(Scheduler& sched, GenRequest r) {
  SubmitError err;
  std::string msg;
  auto h = sched.submit(std::move(r), &err, &msg);
  EXPECT_TRUE(h) << msg;
  Reply out;
  if (!h) return out;
  GenUpdate u;
  do {
    u = h->wait(std::chrono::milliseconds(100));
    out.text += u.text;
    out.lps.insert(out.lps.end(), u.logprobs.begin(), u.logprobs.end());
    out.prompt_lps.insert(out.prompt_lps.end(), u.prompt_logprobs.begin(), u.prompt_logprobs.end());
  } while (!u.done);
  out.finish = u.finish_reason;
  out.n_cached = u.n_cached;
  return out;
}

class LogprobsOnTiny : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(open_tiny(2, &engine, &tok)); }
  std::unique_ptr<Engine> engine;
  std::optional<Tokenizer> tok;
};
}  // namespace

// Each reported logprob is the log-softmax of the logits the model gives for that
// position when the prompt and the tokens before it are evaluated alone, whether the
// scheduler guessed the tokens (speculation) or not; the tokens spell the text.
TEST_F(LogprobsOnTiny, SchedulerReportsTheModelsLogits) {
  Model& m = engine->model();
  const int64_t V = m.info().n_vocab;
  const std::vector<int32_t> prompt = tok->encode("one two three one two three one two", true, true);
  std::vector<Reply> replies;
  for (int spec_max : {0, 8}) {
    SchedulerOptions so;
    so.n_ctx = 128;
    so.spec_max = spec_max;
    so.spec_adaptive = false;
    Scheduler sched(m, *tok, so);
    for (float temp : {0.0f, 0.9f}) {
      GenRequest r = greedy_request(prompt, 24);
      r.sampling.temperature = temp;
      r.sampling.seed = 7;
      if (temp > 0) r.sampling.repeat_penalty = 1.5f;  // changes the logits the sampler sees, not the reported ones
      r.logprobs = 4;
      replies.push_back(run_one(sched, r));
    }
    if (spec_max > 0) {
      EXPECT_GT(sched.stats().drafted, 0u);
    }
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    const Reply& rep = replies[i];
    ASSERT_EQ(rep.lps.size(), 24u) << i;
    // The tokens spell the text, each starting where the detokenizer had got to.
    std::vector<int32_t> ids;
    std::vector<size_t> offsets;
    StreamDecoder dec(*tok);
    std::string spelled;
    for (const TokenLogprob& t : rep.lps) {
      ids.push_back(t.id);
      offsets.push_back(spelled.size());
      spelled += dec.push(t.id);
    }
    spelled += dec.flush();
    EXPECT_EQ(spelled, rep.text) << i;
    // The model alone, position by position.
    auto st = m.new_state(128);
    std::vector<float> logits(static_cast<size_t>(V), 0.0f);
    ASSERT_TRUE(m.forward(*st, prompt.data(), int(prompt.size()), logits.data(), false).ok());
    for (size_t k = 0; k < rep.lps.size(); ++k) {
      const TokenLogprob want = token_logprob(logits.data(), V, ids[k], 4);
      const TokenLogprob& got = rep.lps[k];
      EXPECT_EQ(got.logprob, want.logprob) << "reply " << i << " token " << k;
      EXPECT_EQ(got.top, want.top) << "reply " << i << " token " << k;
      EXPECT_EQ(got.offset, offsets[k]) << "reply " << i << " token " << k;
      if (i % 2 == 0) {
        EXPECT_EQ(got.top[0].first, got.id) << "greedy takes the most likely token";
      }
      ASSERT_TRUE(m.forward(*st, &ids[k], 1, logits.data(), false).ok());
    }
  }
  // Speculation changes neither the text nor the logprobs.
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(replies[i].text, replies[i + 2].text);
    for (size_t k = 0; k < replies[i].lps.size(); ++k) EXPECT_EQ(replies[i].lps[k].logprob, replies[i + 2].lps[k].logprob);
  }
}

// A stop string ends the text and the logprobs: the last token reported is the one
// whose text the cut falls in, none after it.
TEST_F(LogprobsOnTiny, StopStringCutsTheTokensWithTheText) {
  SchedulerOptions so;
  so.n_ctx = 128;
  Scheduler sched(engine->model(), *tok, so);
  const std::vector<int32_t> prompt = tok->encode("the quick brown fox", true, true);
  GenRequest r = greedy_request(prompt, 40);
  r.logprobs = 0;
  const Reply full = run_one(sched, r);
  ASSERT_EQ(full.lps.size(), 40u);
  // A stop string from the middle of the text, starting one byte into a token's text
  // (the first such string that occurs nowhere before).
  size_t at = 0, cut = 0;
  std::string stop;
  for (size_t k = 10; k < 36 && stop.empty(); ++k) {
    if (full.lps[k + 1].offset - full.lps[k].offset < 2) continue;
    cut = full.lps[k].offset + 1;
    for (size_t len = 2; len <= 16 && cut + len <= full.text.size() && stop.empty(); ++len)
      if (full.text.find(full.text.substr(cut, len)) == cut) stop = full.text.substr(cut, len), at = k;
  }
  ASSERT_FALSE(stop.empty()) << "no usable stop string in: " << full.text;
  r.stop = {stop};
  const Reply cut_reply = run_one(sched, r);
  EXPECT_EQ(cut_reply.finish, "stop");
  EXPECT_EQ(cut_reply.text, full.text.substr(0, cut));
  ASSERT_EQ(cut_reply.lps.size(), at + 1);
  for (size_t k = 0; k < cut_reply.lps.size(); ++k) {
    EXPECT_EQ(cut_reply.lps[k].id, full.lps[k].id);
    EXPECT_LT(cut_reply.lps[k].offset, cut_reply.text.size());
  }
  // Without logprobs asked for, none come.
  r.logprobs = -1;
  EXPECT_TRUE(run_one(sched, r).lps.empty());
}

// A prompt's logprobs (the completions endpoint's echo): every prompt token's after
// the first, as one pass over the whole prompt with every position's logits gives
// them, over steps of kPromptLogprobRows tokens next to another request; the prompt
// cache is not used for them (it holds no logits), and max_tokens 0 stops after the
// prompt.
TEST_F(LogprobsOnTiny, PromptTokensAsOnePassGivesThem) {
  Model& m = engine->model();
  const int64_t V = m.info().n_vocab;
  std::vector<int32_t> prompt = tok->encode("one two three four five six seven eight nine ten", true, true);
  while (prompt.size() < size_t(2 * kPromptLogprobRows + 5)) prompt.push_back(prompt[prompt.size() % 7 + 1]);
  const int n = int(prompt.size());
  std::vector<float> all(size_t(n) * size_t(V));
  auto st = m.new_state(256);
  ASSERT_TRUE(m.forward(*st, prompt.data(), n, all.data(), true).ok());

  SchedulerOptions so;
  so.n_ctx = 256;
  so.prefill_chunk = 48;
  Scheduler sched(m, *tok, so);
  GenRequest plain = greedy_request(prompt, 6);
  plain.logprobs = 2;
  const Reply want = run_one(sched, plain);  // also leaves its state in the prompt cache
  GenRequest echo = plain;
  echo.prompt_logprobs = true;
  SubmitError err;
  std::string msg;
  auto other = sched.submit(greedy_request(tok->encode("another request", true, true), 20), &err, &msg);
  ASSERT_TRUE(other) << msg;
  const Reply got = run_one(sched, echo);
  std::string other_text;
  wait_done(*other, &other_text);
  EXPECT_EQ(got.n_cached, 0) << "the prompt cache holds no logits";
  ASSERT_EQ(got.prompt_lps.size(), size_t(n));
  EXPECT_EQ(got.prompt_lps[0].id, prompt[0]);
  EXPECT_TRUE(std::isnan(got.prompt_lps[0].logprob));
  for (int k = 1; k < n; ++k) {
    const TokenLogprob w = token_logprob(&all[size_t(k - 1) * size_t(V)], V, prompt[size_t(k)], 2);
    EXPECT_EQ(got.prompt_lps[size_t(k)].id, prompt[size_t(k)]);
    EXPECT_EQ(got.prompt_lps[size_t(k)].logprob, w.logprob) << "prompt token " << k;
    EXPECT_EQ(got.prompt_lps[size_t(k)].top, w.top) << "prompt token " << k;
  }
  // The completion after it is the same as without echo.
  EXPECT_EQ(got.text, want.text);
  ASSERT_EQ(got.lps.size(), want.lps.size());
  for (size_t k = 0; k < got.lps.size(); ++k) EXPECT_EQ(got.lps[k].logprob, want.lps[k].logprob);
  EXPECT_TRUE(want.prompt_lps.empty());
  // The prompt alone.
  echo.max_tokens = 0;
  const Reply only = run_one(sched, echo);
  EXPECT_EQ(only.finish, "length");
  EXPECT_TRUE(only.text.empty() && only.lps.empty());
  EXPECT_EQ(only.prompt_lps.size(), size_t(n));
  // One choice only, and logprobs asked for.
  EXPECT_TRUE(sched.submit_choices(echo, 2, &err, &msg).empty());
  echo.logprobs = -1;
  EXPECT_FALSE(sched.submit(echo, &err, &msg));
  EXPECT_EQ(err, SubmitError::Invalid);
}
