// Speculative decoding: greedy output identical to plain decoding with every drafter
// on every architecture (resident and streaming, KDA rollback on kimi-k3), and the
// accept/reject scheme preserving the sampling distribution (chi-square over many
// seeds, at the sampler and through the whole generation loop).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "arch_names.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "synth/synth.h"
#include "chi2.h"
#include "synth_once.h"
#include "tokenizer/tokenizer.h"

using namespace deltafin;

namespace {

// A tiny synthetic model (once per process, seed and type); empty with *why if it
// cannot be made. quant: the type of the core matrices and the experts (F32: the
// preset's), where a tensor's rows fit its blocks.
std::string tiny_model(const std::string& arch, uint64_t seed, std::string* why, DType quant = DType::F32) {
  const std::string key = arch + "-" + std::to_string(seed) + (quant == DType::F32 ? "" : "-" + std::string(dtype_name(quant)));
  SynthSpec s;
  if (!synth_preset("tiny", arch, &s)) {
    *why = "no tiny preset";
    return {};
  }
  s.seed = seed;
  s.skew = 0.5f;
  if (quant != DType::F32) {
    s.type = quant;
    // kimi-k3's latent experts are 128 wide: too narrow for 256-value blocks.
    const int64_t expert_in = s.moe_latent > 0 ? s.moe_latent : s.n_embd;
    if (expert_in % block_geometry(quant).block_elems == 0) s.expert_type = quant;
  }
  return synth_once("spec", "tiny-" + key, s, why);
}

// Chi-square goodness of fit of counts against probabilities (categories with p > 0);
// *df_out: degrees of freedom. A count where p == 0 makes it infinite.
double chi2(const std::map<int32_t, int>& counts, const std::map<int32_t, double>& p, int n, int* df_out) {
  double x = 0;
  int cats = 0;
  for (auto [id, c] : counts)
    if (!p.count(id) || p.at(id) <= 0) return INFINITY;
  for (auto [id, pi] : p) {
    if (pi <= 0) continue;
    const double e = n * pi;
    const double o = counts.count(id) ? counts.at(id) : 0;
    x += (o - e) * (o - e) / e;
    ++cats;
  }
  *df_out = cats - 1;
  return x;
}

}  // namespace

TEST(SpeculativeSampler, VerifyPreservesTheDistribution) {
  const std::vector<float> logits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -1.0f};
  struct Case {
    float temp;
    int top_k;
  };
  for (Case c : {Case{1.0f, 0}, Case{0.7f, 4}}) {
    // The target: softmax(logits / temp) over the top_k largest (all when 0).
    std::map<int32_t, double> p;
    const int keep = c.top_k > 0 ? c.top_k : int(logits.size());
    double z = 0;
    for (int i = 0; i < keep; ++i) z += std::exp(logits[size_t(i)] / c.temp);
    for (int i = 0; i < int(logits.size()); ++i) p[i] = i < keep ? std::exp(logits[size_t(i)] / c.temp) / z : 0.0;
    for (int32_t draft : {0, 3, 5}) {
      SamplingParams sp;
      sp.temperature = c.temp;
      sp.top_k = c.top_k;
      sp.top_p = 1.0f;
      sp.min_p = 0.0f;
      const int N = 20000;
      std::map<int32_t, int> counts, naive;
      int accepted = 0;
      for (int i = 0; i < N; ++i) {
        sp.seed = 1000 + uint64_t(i);
        Sampler s(sp);
        std::vector<float> l = logits;
        bool acc = false;
        const int32_t t = s.verify(l.data(), int64_t(l.size()), draft, &acc);
        ++counts[t];
        accepted += acc;
        EXPECT_EQ(acc, t == draft);
        // The classic mistake, as a check that the test can tell: keep the draft with
        // probability p(d), else draw from p with the draft still in it.
        std::mt19937_64 g(sp.seed);
        if (std::uniform_real_distribution<double>(0, 1)(g) < p[draft]) {
          ++naive[draft];
        } else {
          std::vector<double> w;
          for (auto [id, pi] : p) w.push_back(pi);
          ++naive[int32_t(std::discrete_distribution<int>(w.begin(), w.end())(g))];
        }
      }
      int df = 0;
      const double x = chi2(counts, p, N, &df);
      EXPECT_LT(x, chi2_crit_001(df)) << "temp " << c.temp << " top_k " << c.top_k << " draft " << draft;
      if (p[draft] > 0.05) {
        int df_naive = 0;
        const double x_naive = chi2(naive, p, N, &df_naive);
        EXPECT_GT(x_naive, chi2_crit_001(df_naive)) << "draft " << draft;
      }
      // The draft is kept with probability p(draft).
      const double sd = std::sqrt(N * p[draft] * (1 - p[draft])) + 1e-9;
      EXPECT_NEAR(accepted, N * p[draft], 4 * sd + 0.5) << "draft " << draft;
    }
  }
  // Greedy: the argmax, accepted only when it is the draft.
  SamplingParams g;
  g.temperature = 0;
  Sampler s(g);
  bool acc = true;
  std::vector<float> l = logits;
  EXPECT_EQ(s.verify(l.data(), 6, 2, &acc), 0);
  EXPECT_FALSE(acc);
  l = logits;
  EXPECT_EQ(s.verify(l.data(), 6, 0, &acc), 0);
  EXPECT_TRUE(acc);
}

namespace {
// A state for drafters that do not look at it.
struct NoState final : SeqState {
  Status truncate(int) override { return {}; }
  std::unique_ptr<SeqState> clone() const override { return std::make_unique<NoState>(*this); }
  uint64_t memory_bytes() const override { return 0; }
  void fit(int) override {}

 protected:
  void save_to(StateWriter&) const override {}
  bool load_from(StateReader&) override { return true; }
};
}  // namespace

TEST(SpeculativeDrafter, NgramProposesTheContinuationOfTheLatestMatch) {
  auto d = make_ngram_drafter(2, 4);
  std::vector<int32_t> out;
  // Suffix [7 8] occurred twice; the latest is followed by 1 2.
  std::vector<int32_t> seq = {7, 8, 9, 9, 7, 8, 1, 2, 5, 7, 8};
  NoState st;
  ASSERT_TRUE(d->propose(seq, st, 3, &out).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 5}));
  // A loop of period 3 continues past the end of what was seen.
  out.clear();
  seq = {4, 1, 2, 3, 1, 2, 3};
  ASSERT_TRUE(d->propose(seq, st, 7, &out).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 1, 2, 3, 1}));
  // No earlier occurrence of any suffix of two tokens or more: no guess.
  out.clear();
  seq = {1, 2, 3, 4, 5, 1};
  ASSERT_TRUE(d->propose(seq, st, 4, &out).ok());
  EXPECT_TRUE(out.empty());
}

namespace {

struct GenRun {
  std::vector<int32_t> tokens;
  GenerateStats stats;
};

// Greedy or sampled generation from `engine` with an optional speculator.
Result<GenRun> gen(Engine& engine, const Tokenizer& tok, const std::vector<int32_t>& prompt, int n,
                   const SamplingParams& sp, Speculator* spec) {
  auto st = engine.model().new_state(256);
  GenerateParams gp;
  gp.n_predict = n;
  gp.sampling = sp;
  gp.ignore_eos = true;
  gp.speculator = spec;
  GenRun r;
  DF_TRY(generate(engine.model(), *st, tok, prompt, gp, [](const std::string&) { return true; }, &r.stats));
  r.tokens = r.stats.tokens;
  // The state holds everything sampled but the last token.
  if (st->n_past != int(prompt.size() + r.tokens.size()) - 1)
    return make_error("state holds {} tokens, expected {}", st->n_past, prompt.size() + r.tokens.size() - 1);
  return r;
}

EngineOptions streaming_options(int slots, StreamingExpertStore** out) {
  EngineOptions eo;
  eo.threads = 2;
  eo.make_store = [=](ModelFile& f) -> Result<std::unique_ptr<ExpertStore>> {
    StreamingOptions so;
    so.max_slots = slots;
    so.io_threads = 4;
    DF_ASSIGN(auto s, make_streaming_expert_store(f, find_expert_layers(f), so));
    *out = s.get();
    return std::unique_ptr<ExpertStore>(std::move(s));
  };
  return eo;
}

std::unique_ptr<Speculator> one(std::unique_ptr<Drafter> d, int k) {
  std::vector<std::unique_ptr<Drafter>> v;
  v.push_back(std::move(d));
  return std::make_unique<Speculator>(std::move(v), k, /*adaptive=*/false);
}

const char kRepeatingPrompt[] = "one two three, one two three, one two";

// A model with every expert resident, its tokenizer and a prompt.
struct Opened {
  std::unique_ptr<Engine> eng;
  Tokenizer tok;
  std::vector<int32_t> prompt;
  // Fails the calling test (call it inside ASSERT_NO_FATAL_FAILURE) if it cannot load.
  void open(const std::string& path, int threads, const char* prompt_text) {
    EngineOptions eo;
    eo.threads = threads;
    auto e = Engine::open(path, eo);
    ASSERT_TRUE(e.ok()) << e.error().message;
    eng = std::move(*e);
    auto t = Tokenizer::from_gguf(eng->file().meta());
    ASSERT_TRUE(t.ok()) << t.error().message;
    tok = std::move(*t);
    prompt = tok.encode(prompt_text, true, true);
  }
};

SamplingParams greedy_params() {
  SamplingParams greedy;
  greedy.temperature = 0;
  return greedy;
}

// Plain greedy decoding of n tokens after m's prompt: what speculation must reproduce.
void plain_greedy(Opened& m, int n, GenRun* out) {
  auto plain = gen(*m.eng, m.tok, m.prompt, n, greedy_params(), nullptr);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_EQ(int(plain->tokens.size()), n);
  *out = std::move(*plain);
}

}  // namespace

TEST(SpeculativeGenerate, GreedyOutputIsIdenticalWithEveryDrafter) {
  for (const char* arch : arch_names()) {
    SCOPED_TRACE(arch);
    std::string why;
    const std::string path = tiny_model(arch, 1, &why), other = tiny_model(arch, 7, &why);
    ASSERT_FALSE(path.empty() || other.empty()) << why;
    EngineOptions resident;
    resident.threads = 2;
    Opened m;
    ASSERT_NO_FATAL_FAILURE(m.open(path, resident.threads, kRepeatingPrompt));
    const int N = 48;
    GenRun plain;
    ASSERT_NO_FATAL_FAILURE(plain_greedy(m, N, &plain));

    // Random weights write no text worth looking up, and another seed's draft rarely
    // agrees: those runs test rejection and rollback; the same model (the self draft
    // with every expert resident, or as a separate draft) tests acceptance.
    enum Expect { kDrafts, kAccepts, kRejects };
    auto check = [&](const char* what, Engine& e, Speculator& spec, Expect ex) {
      SCOPED_TRACE(what);
      auto r = gen(e, m.tok, m.prompt, N, greedy_params(), &spec);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->tokens, plain.tokens);
      EXPECT_GT(r->stats.drafted, 0);
      if (ex == kAccepts) {
        EXPECT_LT(r->stats.passes, N / 2);  // most passes gave several tokens
      }
      if (ex == kRejects) {
        EXPECT_LT(r->stats.accepted, r->stats.drafted);
      }
    };
    check("ngram", *m.eng, *one(make_ngram_drafter(1, 4), 6), kDrafts);
    check("self, all resident", *m.eng, *one(make_self_drafter(m.eng->model()), 4), kAccepts);
    {
      auto de = Engine::open(path, resident);
      ASSERT_TRUE(de.ok());
      auto d = make_model_drafter(std::move(*de), m.tok, 256);
      ASSERT_TRUE(d.ok()) << d.error().message;
      check("draft: the same model", *m.eng, *one(std::move(*d), 5), kAccepts);
    }
    {
      auto de = Engine::open(other, resident);
      ASSERT_TRUE(de.ok());
      auto d = make_model_drafter(std::move(*de), m.tok, 256);
      ASSERT_TRUE(d.ok()) << d.error().message;
      check("draft: another model", *m.eng, *one(std::move(*d), 3), kRejects);
    }
    // Streaming through a cache of 3 experts: the self draft skips most of them.
    StreamingExpertStore* store = nullptr;
    auto se = Engine::open(path, streaming_options(3, &store));
    ASSERT_TRUE(se.ok()) << se.error().message;
    ASSERT_NE(store, nullptr);
    auto sp = gen(**se, m.tok, m.prompt, N, greedy_params(), nullptr);
    ASSERT_TRUE(sp.ok());
    EXPECT_EQ(sp->tokens, plain.tokens);
    const StoreStats before = store->stats();
    check("self, streaming", **se, *one(make_self_drafter((*se)->model()), 4), kRejects);
    const StoreStats d = store->stats() - before;
    EXPECT_GT(d.bytes_read, 0u);
    std::vector<std::unique_ptr<Drafter>> both;
    both.push_back(make_ngram_drafter());
    both.push_back(make_self_drafter((*se)->model()));
    Speculator adaptive(std::move(both), 8, /*adaptive=*/true);
    auto ar = gen(**se, m.tok, m.prompt, N, greedy_params(), &adaptive);
    ASSERT_TRUE(ar.ok()) << ar.error().message;
    EXPECT_EQ(ar->tokens, plain.tokens) << "auto";
  }
}

TEST(SpeculativeGenerate, SampledSequencesKeepTheirDistribution) {
  // Sequences of 4 tokens at temperature 1 over the top 2 candidates: the counts with
  // a self draft (the full model's argmax, accepted about as often as it is the draw)
  // against the counts without, over many seeds (chi-square test of homogeneity).
  std::string why;
  const std::string path = tiny_model("qwen3moe", 1, &why);
  ASSERT_FALSE(path.empty()) << why;
  Opened m;
  ASSERT_NO_FATAL_FAILURE(m.open(path, 1, "abc"));
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 2;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  const int N = 1200;
  std::map<std::vector<int32_t>, std::array<int, 2>> counts;
  int drafted = 0, accepted = 0;
  for (int side = 0; side < 2; ++side) {
    for (int i = 0; i < N; ++i) {
      sp.seed = uint64_t(side * 100000 + i + 1);
      auto spec = side ? one(make_self_drafter(m.eng->model()), 3) : nullptr;
      auto r = gen(*m.eng, m.tok, m.prompt, 4, sp, spec.get());
      ASSERT_TRUE(r.ok()) << r.error().message;
      ++counts[r->tokens][size_t(side)];
      drafted += r->stats.drafted;
      accepted += r->stats.accepted;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  int cells = 0;
  const double x = chi2_two_samples(counts, &cells);
  ASSERT_GE(cells, 3);
  const int df = cells - 1;
  EXPECT_LT(x, chi2_crit_001(df)) << cells << " cells";
}

// The same on quantized models: the verify pass evaluates several rows at once, and
// the multi-row kernels give every row the bits the single-row kernel gives, so
// speculation (accepting or rejecting) changes no token.
TEST(SpeculativeGenerate, GreedyOutputIsIdenticalOnQuantizedModels) {
  for (DType q : {DType::Q8_0, DType::Q4_K}) {
    for (const char* arch : arch_names()) {
      SCOPED_TRACE(std::string(arch) + " " + std::string(dtype_name(q)));
      std::string why;
      const std::string path = tiny_model(arch, 3, &why, q);
      ASSERT_FALSE(path.empty()) << why;
      Opened m;
      ASSERT_NO_FATAL_FAILURE(m.open(path, 2, kRepeatingPrompt));
      const int N = 40;
      GenRun plain;
      ASSERT_NO_FATAL_FAILURE(plain_greedy(m, N, &plain));
      auto ng = gen(*m.eng, m.tok, m.prompt, N, greedy_params(), one(make_ngram_drafter(1, 4), 6).get());
      ASSERT_TRUE(ng.ok()) << ng.error().message;
      EXPECT_EQ(ng->tokens, plain.tokens) << "ngram";
      // The full model as its own draft: every guess should be accepted, so most
      // passes verify several rows.
      auto self =
          gen(*m.eng, m.tok, m.prompt, N, greedy_params(), one(make_self_drafter(m.eng->model()), 4).get());
      ASSERT_TRUE(self.ok()) << self.error().message;
      EXPECT_EQ(self->tokens, plain.tokens) << "self";
      EXPECT_EQ(self->stats.accepted, self->stats.drafted) << "a draft by the same model was rejected";
      EXPECT_LT(self->stats.passes, N / 2);
    }
  }
}

namespace {
// Proposes `n` copies of one token, taking `cost` to do so, and counts how often it
// was asked.
class CountingDrafter final : public Drafter {
 public:
  CountingDrafter(int* asked, std::chrono::microseconds cost) : asked_(asked), cost_(cost) {}
  const char* name() const override { return "counting"; }
  Status propose(const std::vector<int32_t>&, SeqState&, int max_n, std::vector<int32_t>* out) override {
    ++*asked_;
    if (cost_.count() > 0) std::this_thread::sleep_for(cost_);
    out->assign(size_t(max_n), 7);
    return {};
  }

 private:
  int* asked_;
  std::chrono::microseconds cost_;
};

// Drives the adaptive speculator for `passes` passes of a simulated model: a plain
// pass takes `a` seconds and each drafted token `b` more, except the first
// `slow_start` passes, which take 10 times that (a cold cache, a stalled machine).
// The drafter always guesses 7; accept(i) says whether the target emits 7 on pass i
// (and so accepts the drafts of that pass) or 8. Returns how many passes asked the
// drafter (verified drafts and shadows); *drafted (if given) gets how many tokens
// were verified.
int simulate(double a, double b, const std::function<bool(int)>& accept, int passes,
             std::chrono::microseconds draft_cost = {}, int slow_start = 0, int* drafted = nullptr) {
  int asked = 0;
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(std::make_unique<CountingDrafter>(&asked, draft_cost));
  Speculator spec(std::move(d), 8, /*adaptive=*/true);
  NoState st;
  std::vector<int32_t> seq = {1, 2, 3}, out;
  if (drafted) *drafted = 0;
  for (int i = 0; i < passes; ++i) {
    EXPECT_TRUE(spec.draft(seq, st, 8, &out).ok());
    const int k = int(out.size());
    if (drafted) *drafted += k;
    const bool yes = accept(i);
    if (yes) seq.insert(seq.end(), out.begin(), out.end());
    seq.push_back(yes ? 7 : 8);
    spec.feedback(k, yes ? k : 0, (a + b * k) * (i < slow_start ? 10 : 1));
  }
  return asked;
}
int simulate_fixed(double a, double b, bool accept, int passes, std::chrono::microseconds draft_cost,
                   int* drafted) {
  return simulate(a, b, [accept](int) { return accept; }, passes, draft_cost, 0, drafted);
}
}  // namespace

// Speculation that does not pay (every guess rejected) is switched off: its guesses
// are then shadows, never verified. A free drafter (n-gram lookup) shadows on every
// pass; one that costs time of its own, or that could not pay even at high
// acceptance, only every few hundred passes. Speculation that pays is used on nearly
// every pass.
TEST(SpeculativeAdaptive, ShadowsWhenItDoesNotPayAndDraftsWhenItDoes) {
  const int passes = 3000;
  int drafted = 0;
  // Drafting takes 5 ms a token against a 10 ms pass (the clock measures it).
  const int costly = simulate_fixed(0.010, 0.005, false, passes, std::chrono::microseconds(5000), &drafted);
  EXPECT_GE(costly, 3) << "it should still be asked now and then";
  EXPECT_LE(costly, 15) << "asking every 24 passes would ask " << passes / 24 << " times";
  EXPECT_LE(drafted, 2) << "verified rows, all rejected";
  // A free drafter whose rows cost half a pass would pay at high acceptance.
  const int free_draft = simulate_fixed(0.010, 0.005, false, passes, std::chrono::microseconds(0), &drafted);
  EXPECT_GE(free_draft, passes * 9 / 10) << "a free drafter should shadow on every pass";
  EXPECT_LE(drafted, 2);
  // One whose rows cost two passes could not pay even so.
  const int hopeless = simulate_fixed(0.010, 0.020, false, passes, std::chrono::microseconds(1000), &drafted);
  EXPECT_GE(hopeless, 3);
  EXPECT_LE(hopeless, 15);
  EXPECT_LE(drafted, 2);
  const int paying = simulate_fixed(0.040, 0.004, true, passes, std::chrono::microseconds(0), &drafted);
  EXPECT_GT(paying, passes / 8 * 9 / 10);
  EXPECT_GT(drafted, passes * 9 / 10 * 7 / 8 * 8) << "drafts should be long when all are accepted";
}

// The first passes are slow (10x: a cold start). Before, they could leave the
// plain-pass time high while drafts were verified on every pass, so the rows looked
// free and drafting never stopped, whatever the acceptance. Now a rejected drafter
// whose row costs most of a pass verifies next to nothing.
TEST(SpeculativeAdaptive, ASlowStartDoesNotMakeDraftsLookFree) {
  int drafted = 0;
  simulate(0.010, 0.008, [](int) { return false; }, 1000, {}, /*slow_start=*/3, &drafted);
  EXPECT_LE(drafted, 2) << "verified rows that were all rejected";
}

// Text that turns repetitive after 500 passes of rejections: the shadows show that
// drafting would pay, it resumes once the acceptance measured over the last few
// dozen guesses is high enough (about 25 passes here), and drafts grow long.
TEST(SpeculativeAdaptive, TakesUpARepetitiveStretchAfterRejections) {
  auto repetitive_from_500 = [](int i) { return i >= 500; };
  int before = 0, all = 0;
  simulate(0.010, 0.002, repetitive_from_500, 500, {}, 0, &before);
  simulate(0.010, 0.002, repetitive_from_500, 600, {}, 0, &all);
  EXPECT_LE(before, 2) << "verified rows while every guess was wrong";
  EXPECT_GT(all - before, 300) << "100 passes of repetitive text should verify long drafts";
}

// Guesses accepted at random, 55% of the time, where a drafted row costs half a
// pass: one guess per pass would give 1.55 tokens for 1.5 passes, and drafting
// starts only at a 15% expected gain (70% acceptance). Measured acceptance swings
// above that by chance now and then; drafting on such a swing is a loss on
// average, so it must take more than the noise of a few dozen guesses (drafting on
// the point estimate verified 306 rows here, on its lower bound 63).
TEST(SpeculativeAdaptive, MarginalAcceptanceDoesNotStartDraftsOnNoise) {
  std::mt19937 rng(7);
  std::vector<bool> coin(3000);
  for (size_t i = 0; i < coin.size(); ++i) coin[i] = std::uniform_real_distribution<double>(0, 1)(rng) < 0.55;
  int drafted = 0;
  simulate(0.010, 0.005, [&](int i) { return bool(coin[size_t(i)]); }, int(coin.size()), {}, 0, &drafted);
  EXPECT_LE(drafted, 120) << "verified rows at a marginal acceptance, of " << coin.size() << " passes";
}
