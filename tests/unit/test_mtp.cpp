// The multi-token-prediction (nextn) drafter of deepseek2: greedy output identical
// with it (resident and streaming experts), its cache independent of how the trunk
// was fed (one pass, token by token, through draft/verify/rollback), and a clear
// error where a model has no MTP block.
#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"
#include "synth/synth.h"
#include "synth_once.h"
#include "tokenizer/tokenizer.h"

using namespace deltafin;

namespace {

std::string mtp_model(bool absorbed, bool nextn, std::string* why) {
  SynthSpec s;
  if (!synth_preset("tiny", "deepseek2", &s)) {
    *why = "no tiny deepseek2 preset";
    return {};
  }
  s.mla_split_kv_b = absorbed;
  s.nextn = nextn ? 1 : 0;
  s.n_expert = 16;
  s.skew = 0.5f;
  return synth_once("mtp", std::string("ds2") + (absorbed ? "-absorbed" : "-joined") + (nextn ? "-nextn" : ""), s,
                    why);
}

std::unique_ptr<Engine> open(const std::string& path, EngineOptions eo = {}) {
  if (eo.threads == 0) eo.threads = 2;
  auto e = Engine::open(path, eo);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<int32_t> prompt_ids(Engine& e) {
  auto t = Tokenizer::from_gguf(e.file().meta());
  EXPECT_TRUE(t.ok());
  return t.ok() ? t->encode("Once upon a time, in a land far away, there lived", true, true) : std::vector<int32_t>{};
}

// Greedy decoding of n tokens; spec may be null.
std::vector<int32_t> greedy(Engine& e, const std::vector<int32_t>& prompt, int n, Speculator* spec, int* drafted) {
  auto tok = Tokenizer::from_gguf(e.file().meta());
  auto st = e.model().new_state(256);
  GenerateParams gp;
  gp.n_predict = n;
  gp.sampling.temperature = 0;
  gp.ignore_eos = true;
  gp.speculator = spec;
  GenerateStats stats;
  Status s = generate(e.model(), *st, *tok, prompt, gp, [](const std::string&) { return true; }, &stats);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  if (drafted) *drafted = stats.drafted;
  return stats.tokens;
}

std::unique_ptr<Speculator> mtp_only(Model& m, int k) {
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(make_mtp_drafter(m));
  return std::make_unique<Speculator>(std::move(d), k, /*adaptive=*/false);
}

// Draws k MTP guesses after evaluating `toks` (all but the pending last one) into a
// fresh state, `chunk` tokens per pass.
std::vector<int32_t> drafts_after(Model& m, const std::vector<int32_t>& seq, int chunk, int k) {
  auto st = m.new_state(256);
  std::vector<float> logits(size_t(m.info().n_vocab) * size_t(chunk));
  const int n = int(seq.size()) - 1;
  for (int i = 0; i < n; i += chunk) {
    const int b = std::min(chunk, n - i);
    Status s = m.forward(*st, &seq[size_t(i)], b, logits.data(), false);
    EXPECT_TRUE(s.ok());
  }
  std::vector<int32_t> out;
  Status s = m.mtp_draft(*st, seq, k, &out);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return out;
}

}  // namespace

TEST(MtpDraft, GreedyOutputIsIdenticalResidentAndStreaming) {
  for (bool absorbed : {true, false}) {
    SCOPED_TRACE(absorbed ? "absorbed MLA" : "joined MLA");
    std::string why;
    const std::string path = mtp_model(absorbed, true, &why);
    ASSERT_FALSE(path.empty()) << why;
    auto e = open(path);
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->model().has_mtp());
    const auto prompt = prompt_ids(*e);
    const int N = 40;
    const auto plain = greedy(*e, prompt, N, nullptr, nullptr);
    ASSERT_EQ(int(plain.size()), N);
    for (int k : {1, 3}) {
      auto spec = mtp_only(e->model(), k);
      int drafted = 0;
      EXPECT_EQ(greedy(*e, prompt, N, spec.get(), &drafted), plain) << "k " << k;
      EXPECT_GT(drafted, N / 2) << "non-adaptive: every pass should carry guesses";
    }
    // The MTP block's experts come through a streaming store like the trunk's.
    StreamingExpertStore* store = nullptr;
    EngineOptions so;
    so.threads = 2;
    so.make_store = [&store](ModelFile& f) -> Result<std::unique_ptr<ExpertStore>> {
      StreamingOptions o;
      o.max_slots = 3;
      o.io_threads = 2;
      DF_ASSIGN(auto s, make_streaming_expert_store(f, find_expert_layers(f), o));
      store = s.get();
      return std::unique_ptr<ExpertStore>(std::move(s));
    };
    auto es = open(path, so);
    ASSERT_TRUE(es && store);
    auto spec = mtp_only(es->model(), 2);
    EXPECT_EQ(greedy(*es, prompt, N, spec.get(), nullptr), plain);
    EXPECT_GT(store->stats().misses, 0u);
  }
}

TEST(MtpDraft, CacheDoesNotDependOnHowTheTrunkWasFed) {
  std::string why;
  const std::string path = mtp_model(true, true, &why);
  ASSERT_FALSE(path.empty()) << why;
  auto e = open(path);
  ASSERT_TRUE(e);
  Model& m = e->model();
  m.enable_mtp();
  auto seq = prompt_ids(*e);
  ASSERT_GT(seq.size(), 8u);
  // The prompt in one pass, in chunks of 3, and token by token: the same guesses.
  const auto one = drafts_after(m, seq, int(seq.size()), 4);
  ASSERT_EQ(one.size(), 4u);
  EXPECT_EQ(drafts_after(m, seq, 3, 4), one);
  EXPECT_EQ(drafts_after(m, seq, 1, 4), one);

  // Through a speculative cycle: draft, verify a pass with wrong guesses, roll back,
  // continue; the next guesses equal those of a state that saw only the kept tokens.
  auto st = m.new_state(256);
  std::vector<float> logits(size_t(m.info().n_vocab) * 8);
  const int n = int(seq.size()) - 1;
  ASSERT_TRUE(m.forward(*st, seq.data(), n, logits.data(), false).ok());
  std::vector<int32_t> g;
  ASSERT_TRUE(m.mtp_draft(*st, seq, 3, &g).ok());
  ASSERT_EQ(g, std::vector<int32_t>(one.begin(), one.begin() + 3));  // chained guesses do not depend on k
  // Verify the pending token and three made-up guesses; keep one of them.
  const std::vector<int32_t> pass = {seq.back(), 7, 8, 9};
  ASSERT_TRUE(m.forward(*st, pass.data(), 4, logits.data(), true).ok());
  ASSERT_TRUE(st->truncate(n + 2).ok());  // the pending token and guess "7"
  auto seq2 = seq;
  seq2.push_back(7);
  seq2.push_back(11);  // the token the target "sampled" after it: pending
  std::vector<int32_t> after;
  ASSERT_TRUE(m.mtp_draft(*st, seq2, 4, &after).ok());
  EXPECT_EQ(after, drafts_after(m, seq2, 5, 4));
}

TEST(MtpDraft, ModelsWithoutTheBlockSayWhy) {
  std::string why;
  const std::string path = mtp_model(true, false, &why);
  ASSERT_FALSE(path.empty()) << why;
  auto e = open(path);
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->model().has_mtp());
  auto tok = Tokenizer::from_gguf(e->file().meta());
  ASSERT_TRUE(tok.ok());
  SpecOptions so;
  ASSERT_TRUE(parse_spec_mode("mtp", &so).ok());
  auto sp = make_speculator(so, *e, *tok, 256, 2);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.error().message.find("no multi-token-prediction"), std::string::npos) << sp.error().message;
  // auto works without it (n-gram only here).
  ASSERT_TRUE(parse_spec_mode("auto", &so).ok());
  EXPECT_TRUE(make_speculator(so, *e, *tok, 256, 2).ok());
}
