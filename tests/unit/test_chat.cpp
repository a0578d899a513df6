// ChatSession on tiny synthetic models: a later turn reuses the cached prefix and
// answers exactly as a fresh prefill of the whole conversation would; cancellation
// and a too-small context leave the conversation as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "runtime/chat_session.h"
#include "runtime/engine.h"
#include "synth/synth.h"
#include "shared_files.h"
#include "synth_once.h"
#include "tiny_engine.h"

using namespace deltafin;

namespace {

// ChatML, as Qwen and many others use; the built-in synthetic vocabulary has no
// <|im_start|> token, so the markers are plain text to it, which is all this needs.
const char* kChatML =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

class ChatTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "deltafin_test_chat_" + std::to_string(::getpid());
    std::string cmd = "mkdir -p '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    SynthSpec s;
    ASSERT_TRUE(synth_preset("tiny", "qwen3moe", &s));
    ThreadPool pool(2);
    SynthReport r;
    Status st = synth_model(s, dir_ + "/tiny.gguf", pool, &r);
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  void SetUp() override {
    EngineOptions eo;
    eo.threads = 2;
    auto e = Engine::open(dir_ + "/tiny.gguf", eo);
    ASSERT_TRUE(e.ok()) << e.error().message;
    engine_ = std::move(e.value());
    auto t = Tokenizer::from_gguf(engine_->file().meta());
    ASSERT_TRUE(t.ok()) << t.error().message;
    tok_ = std::move(t.value());
  }
  std::unique_ptr<ChatSession> session(int n_ctx = 1024) {
    auto c = ChatSession::create(engine_->model(), tok_, kChatML, n_ctx);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(c.value()) : nullptr;
  }
  static GenerateParams greedy(int n) {
    GenerateParams gp;
    gp.n_predict = n;
    gp.sampling.temperature = 0;
    gp.ignore_eos = true;  // random weights: keep answers the same length
    return gp;
  }
  static bool keep(const std::string&) { return true; }

  static inline std::string dir_;
  std::unique_ptr<Engine> engine_;
  Tokenizer tok_;
};

TEST_F(ChatTest, LaterTurnReusesPrefixAndMatchesFreshPrefill) {
  auto chat = session();
  ASSERT_TRUE(chat);
  chat->set_system("Be brief.");
  auto t1 = chat->turn("hello there", greedy(12), keep);
  ASSERT_TRUE(t1.ok()) << t1.error().message;
  EXPECT_EQ(t1->n_reused, 0);
  EXPECT_EQ(t1->gen.n_prompt, t1->n_prompt);
  EXPECT_FALSE(t1->answer.empty());

  // What a fresh prefill of the whole conversation would see and answer.
  const std::string u2 = "and what else";
  auto text = chat->render(&u2, true);
  ASSERT_TRUE(text.ok()) << text.error().message;
  std::vector<int32_t> ids = chat->tokenize(*text);
  auto fresh = engine_->model().new_state(1024);
  GenerateStats ref;
  std::string ref_answer;
  ASSERT_TRUE(generate(engine_->model(), *fresh, tok_, ids, greedy(12),
                       [&](const std::string& s) { ref_answer += s; return true; }, &ref)
                  .ok());

  auto t2 = chat->turn(u2, greedy(12), keep);
  ASSERT_TRUE(t2.ok()) << t2.error().message;
  EXPECT_EQ(t2->n_prompt, int(ids.size()));
  // At least the first turn's prompt is reused; only the rest is evaluated.
  EXPECT_GE(t2->n_reused, t1->n_prompt);
  EXPECT_EQ(t2->gen.n_prompt, t2->n_prompt - t2->n_reused);
  EXPECT_FALSE(t2->reprefilled);
  EXPECT_EQ(t2->answer, ref_answer);
  EXPECT_EQ(t2->gen.tokens, ref.tokens);
  EXPECT_EQ(chat->n_messages(), 4u);
}

TEST_F(ChatTest, ResetGivesTheFirstAnswerAgain) {
  auto chat = session();
  ASSERT_TRUE(chat);
  auto a = chat->turn("tell me a story", greedy(10), keep);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(chat->turn("more", greedy(10), keep).ok());
  chat->reset();
  EXPECT_EQ(chat->n_messages(), 0u);
  EXPECT_EQ(chat->n_past(), 0);
  auto b = chat->turn("tell me a story", greedy(10), keep);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->answer, a->answer);
  EXPECT_EQ(b->n_reused, 0);
}

TEST_F(ChatTest, CancelledTurnStopsAndKeepsThePartialAnswer) {
  auto chat = session();
  ASSERT_TRUE(chat);
  std::atomic<bool> cancel{false};
  GenerateParams gp = greedy(200);
  gp.cancel = &cancel;
  int pieces = 0;
  auto t = chat->turn("go on", gp, [&](const std::string&) {
    if (++pieces == 3) cancel.store(true);
    return true;
  });
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->gen.stop_reason, "cancelled");
  EXPECT_LT(t->gen.n_generated, 200);
  EXPECT_FALSE(t->answer.empty());
  EXPECT_EQ(chat->n_messages(), 2u);

  // Cancelled before anything came out: no trace in the conversation.
  auto t2 = chat->turn("again", gp, keep);  // the flag is still set
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->gen.stop_reason, "cancelled");
  EXPECT_TRUE(t2->answer.empty());
  EXPECT_EQ(chat->n_messages(), 2u);
}

TEST_F(ChatTest, ConversationLongerThanContextIsAnErrorAndChangesNothing) {
  auto chat = session(64);
  ASSERT_TRUE(chat);
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word ";
  auto t = chat->turn(long_text, greedy(4), keep);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("context holds 64"), std::string::npos) << t.error().message;
  EXPECT_EQ(chat->n_messages(), 0u);
  auto ok = chat->turn("hi", greedy(4), keep);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

TEST_F(ChatTest, TemplateErrorsAreReported) {
  auto bad = ChatSession::create(engine_->model(), tok_, "{% for m in messages %}", 256);
  EXPECT_FALSE(bad.ok());
  auto raising = ChatSession::create(engine_->model(), tok_,
                                     "{{ raise_exception('roles must alternate') }}", 256);
  ASSERT_TRUE(raising.ok());
  auto t = raising.value()->turn("hi", greedy(4), keep);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("roles must alternate"), std::string::npos) << t.error().message;
  EXPECT_EQ(raising.value()->n_messages(), 0u);
}

}  // namespace

// kimi-k3's KDA state rolls back only 16 positions, and templates such as Kimi's drop
// a past answer's thinking, so the next turn's prompt leaves the state's tokens
// early in a long answer. The state is pinned where the last prompt ended: the next
// turn goes back there instead of evaluating the whole conversation again, and
// answers as a fresh prefill does.
TEST(ChatKimiK3, NextTurnAfterARewrittenLongAnswerGoesBackToThePromptsEnd) {
  std::unique_ptr<Engine> e;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(2, &e, &tok, "kimi-k3"));
  // Past answers render as a placeholder (as a template that strips thinking would).
  const char* tmpl =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' }}"
      "{% if m['role'] == 'assistant' %}{{ '(an answer)' }}{% else %}{{ m['content'] }}{% endif %}"
      "{{ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
  auto chat = ChatSession::create(e->model(), *tok, tmpl, 512);
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  GenerateParams gp;
  gp.n_predict = 40;  // longer than the rollback window
  gp.sampling.temperature = 0;
  gp.ignore_eos = true;
  auto t1 = (*chat)->turn("tell me a long story", gp, [](const std::string&) { return true; });
  ASSERT_TRUE(t1.ok()) << t1.error().message;

  const std::string u2 = "and then";
  auto text = (*chat)->render(&u2, true);
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto fresh = e->model().new_state(512);
  GenerateStats ref;
  ASSERT_TRUE(generate(e->model(), *fresh, *tok, (*chat)->tokenize(*text), gp,
                       [](const std::string&) { return true; }, &ref)
                  .ok());
  auto t2 = (*chat)->turn(u2, gp, [](const std::string&) { return true; });
  ASSERT_TRUE(t2.ok()) << t2.error().message;
  EXPECT_FALSE(t2->reprefilled);
  EXPECT_GE(t2->n_reused, t1->n_prompt) << "back to the first prompt's end";
  EXPECT_EQ(t2->gen.tokens, ref.tokens);
}

// With Kimi K3's own template (XTML replies; thinking is its default), the reply the
// prompt's open `think` receives is reasoning, not answer: it goes to on_reasoning and
// ChatTurn::reasoning, and the next turn renders it as the past message's thinking.
TEST(ChatKimiK3, ThinkingIsKeptApartWithTheRealTemplate) {
  std::unique_ptr<Engine> e;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(0, &e, &tok, "kimi-k3"));
  const std::string tmpl = read_template("Kimi-K3.jinja");
  ASSERT_FALSE(tmpl.empty());
  auto chat = ChatSession::create(e->model(), *tok, tmpl, 512);
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  GenerateParams gp;
  gp.n_predict = 12;
  gp.sampling.temperature = 0;
  gp.ignore_eos = true;
  // What the model writes after the prompt, as plain text.
  const std::string u1 = "hello";
  auto prompt = (*chat)->render(&u1, true);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  ASSERT_NE(prompt->find("<|open|>think<|sep|>"), std::string::npos) << *prompt;
  std::string raw;
  auto fresh = e->model().new_state(512);
  GenerateStats ref;
  ASSERT_TRUE(generate(e->model(), *fresh, *tok, (*chat)->tokenize(*prompt), gp,
                       [&](const std::string& t) { raw += t; return true; }, &ref).ok());
  ASSERT_FALSE(raw.empty());
  std::string shown, thought;
  auto t1 = (*chat)->turn(
      u1, gp, [&](const std::string& t) { shown += t; return true; }, [&](const std::string& t) { thought += t; });
  ASSERT_TRUE(t1.ok()) << t1.error().message;
  EXPECT_EQ(t1->gen.tokens, ref.tokens);
  EXPECT_EQ(thought, raw);
  EXPECT_EQ(t1->reasoning, raw);
  EXPECT_EQ(shown, "");
  EXPECT_EQ(t1->answer, "");
  const std::string u2 = "and then";
  auto next = (*chat)->render(&u2, true);
  ASSERT_TRUE(next.ok()) << next.error().message;
  EXPECT_NE(next->find("<|open|>think<|sep|>" + raw), std::string::npos) << *next;

  // With {"thinking": false} for the template, the reply opens as the answer.
  auto plain = ChatSession::create(e->model(), *tok, tmpl, 512);
  ASSERT_TRUE(plain.ok());
  (*plain)->set_template_kwargs({{"thinking", false}});
  auto p2 = (*plain)->render(&u1, true);
  ASSERT_TRUE(p2.ok());
  const std::string open_response = "<|open|>response<|sep|>";
  ASSERT_GE(p2->size(), open_response.size());
  EXPECT_EQ(p2->substr(p2->size() - open_response.size()), open_response);
  auto t3 = (*plain)->turn(u1, gp, [](const std::string&) { return true; });
  ASSERT_TRUE(t3.ok()) << t3.error().message;
  EXPECT_EQ(t3->reasoning, "");
  EXPECT_FALSE(t3->answer.empty());
}

// A template that opens <think> in its generation prompt: what the model writes (the
// random model never closes it) is reasoning, not answer.
TEST(ChatThink, ThinkingAfterAnOpenedThinkTagIsKeptApart) {
  std::unique_ptr<Engine> e;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(0, &e, &tok));
  const char* tmpl =
      "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ 'assistant: <think>\n' }}{% endif %}";
  auto chat = ChatSession::create(e->model(), *tok, tmpl, 256);
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  GenerateParams gp;
  gp.n_predict = 10;
  gp.sampling.temperature = 0;
  gp.ignore_eos = true;
  const std::string u = "hi";
  auto prompt = (*chat)->render(&u, true);
  ASSERT_TRUE(prompt.ok());
  std::string raw;
  auto fresh = e->model().new_state(256);
  ASSERT_TRUE(generate(e->model(), *fresh, *tok, (*chat)->tokenize(*prompt), gp,
                       [&](const std::string& t) { raw += t; return true; }, nullptr).ok());
  ASSERT_EQ(raw.find("</think>"), std::string::npos) << "the random model closed its thinking: pick another prompt";
  std::string shown, thought;
  auto t = (*chat)->turn(
      u, gp, [&](const std::string& x) { shown += x; return true; }, [&](const std::string& x) { thought += x; });
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(thought, raw);
  EXPECT_EQ(t->reasoning, raw);
  EXPECT_EQ(shown, "");
}
