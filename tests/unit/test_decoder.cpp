// The one decode loop (runtime/decoder.h) in its two users: the server's scheduler
// with the drafters that were once only the command line's (self-speculation on the
// resident experts of a streaming store, the MTP block) gives the text it gives
// without speculation, and `generate` with a forced call's grammar guesses its
// certain text (once only the server did) with the output unchanged.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/forced_calls.h"
#include "json/json_grammar.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/scheduler.h"
#include "runtime/speculative.h"
#include "store/streaming_store.h"
#include "synth/synth.h"
#include "synth_once.h"
#include "tiny_engine.h"

using namespace deltafin;

namespace {

// `arch`'s tiny model with its experts streamed through a cache of `slots` experts
// (self-speculation then drafts on the resident ones).
std::unique_ptr<Engine> open_streaming(const std::string& path, int slots, StreamingExpertStore** store) {
  EngineOptions eo;
  eo.threads = 2;
  eo.make_store = [store, slots](ModelFile& f) -> Result<std::unique_ptr<ExpertStore>> {
    StreamingOptions o;
    o.max_slots = slots;
    o.io_threads = 2;
    DF_ASSIGN(auto s, make_streaming_expert_store(f, find_expert_layers(f), o));
    *store = s.get();
    return std::unique_ptr<ExpertStore>(std::move(s));
  };
  auto e = Engine::open(path, eo);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(*e) : nullptr;
}

// Greedy completions of `prompts`, submitted together so their passes share steps.
std::vector<std::string> complete(Scheduler& sched, const std::vector<std::vector<int32_t>>& prompts, int n) {
  std::vector<std::shared_ptr<GenHandle>> hs;
  for (const auto& p : prompts) {
    GenRequest r;
    r.prompt = p;
    r.max_tokens = n;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    SubmitError err;
    std::string msg;
    hs.push_back(sched.submit(r, &err, &msg));
    EXPECT_TRUE(hs.back()) << msg;
    if (!hs.back()) return {};
  }
  std::vector<std::string> out;
  for (auto& h : hs) {
    std::string text;
    GenUpdate u;
    do {
      u = h->wait(std::chrono::milliseconds(100));
      text += u.text;
    } while (!u.done);
    EXPECT_EQ(u.finish_reason, "length") << u.error;
    out.push_back(text);
  }
  return out;
}

// The scheduler's texts without speculation and with `drafters` (guesses on every
// pass): equal, and guesses were verified.
void expect_same_with_drafters(Engine& e, const Tokenizer& tok, DrafterFactory drafters, const char* what) {
  const std::vector<std::vector<int32_t>> prompts = {
      tok.encode("Once upon a time, in a land far away,", true, true),
      tok.encode("one two three, one two three, one", true, true),
      tok.encode("The weather today is", true, true)};
  const int N = 24;
  std::vector<std::string> want;
  for (int side = 0; side < 2; ++side) {
    SchedulerOptions so;
    so.n_parallel = 3;
    so.n_ctx = 128;
    so.spec_max = side ? 3 : 0;
    so.spec_adaptive = false;
    so.make_drafters = drafters;
    Scheduler sched(e.model(), tok, so);
    const std::vector<std::string> got = complete(sched, prompts, N);
    ASSERT_EQ(got.size(), prompts.size());
    if (side == 0) {
      want = got;
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << what << ": request " << i;
    const SchedulerStats st = sched.stats();
    EXPECT_GT(st.drafted, uint64_t(N)) << what << ": every pass should carry guesses";
    EXPECT_GT(st.accepted, 0u) << what;
  }
}

}  // namespace

TEST(Decoder, ServerSelfSpeculationOnAStreamingStoreKeepsTheText) {
  SynthSpec s;
  ASSERT_TRUE(synth_preset("tiny", "qwen3moe", &s));
  std::string why;
  const std::string path = synth_once("sched", "tiny-qwen3moe", s, &why);
  ASSERT_FALSE(path.empty()) << why;
  StreamingExpertStore* store = nullptr;
  auto e = open_streaming(path, 6, &store);
  ASSERT_TRUE(e && store);
  auto tok = Tokenizer::from_gguf(e->file().meta());
  ASSERT_TRUE(tok.ok());
  SpecOptions so;
  ASSERT_TRUE(parse_spec_mode("self", &so).ok());
  auto f = make_drafter_factory(so, *e, *tok, 128, 2);
  ASSERT_TRUE(f.ok() && *f);
  expect_same_with_drafters(*e, *tok, *f, "self");
  EXPECT_GT(store->stats().misses, 0u) << "the experts should stream";
}

TEST(Decoder, ServerMtpSpeculationKeepsTheText) {
  SynthSpec s;
  ASSERT_TRUE(synth_preset("tiny", "deepseek2", &s));
  s.mla_split_kv_b = true;
  s.nextn = 1;
  std::string why;
  const std::string path = synth_once("decoder", "ds2-nextn", s, &why);
  ASSERT_FALSE(path.empty()) << why;
  EngineOptions eo;
  eo.threads = 2;
  auto e = Engine::open(path, eo);
  ASSERT_TRUE(e.ok()) << e.error().message;
  ASSERT_TRUE((*e)->model().has_mtp());
  auto tok = Tokenizer::from_gguf((*e)->file().meta());
  ASSERT_TRUE(tok.ok());
  SpecOptions so;
  ASSERT_TRUE(parse_spec_mode("mtp", &so).ok());
  auto f = make_drafter_factory(so, **e, *tok, 128, 2);
  ASSERT_TRUE(f.ok() && *f);
  expect_same_with_drafters(**e, *tok, *f, "mtp");
}

// generate() with a forced tool call's grammar: where the reply's next text is
// certain (the call's tags, a tool's name), it is guessed (once only the server did)
// and the greedy tokens are those of a pass per token. (A plain JSON schema has no
// certain text: whitespace may come between any two tokens.)
TEST(Decoder, GenerateGuessesAForcedCallsCertainText) {
  std::unique_ptr<Engine> e;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(2, &e, &tok));
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"]}}}])");
  const std::string text = "Weather?";
  auto grammar = forced_call_grammar(ToolFormat::Hermes, tools, "required", text, *tok, 3);
  ASSERT_TRUE(grammar);
  const std::vector<int32_t> prompt = tok->encode(text, true, false);
  auto run = [&](Speculator* spec, GenerateStats* st) {
    auto state = e->model().new_state(512);
    GenerateParams gp;
    gp.n_predict = 300;
    gp.sampling.temperature = 0;
    for (auto [s, bias] : {std::pair{"\"", 7.0f}, {"}", 5.0f}, {",", 3.0f}, {":", 3.0f}}) {
      const std::vector<int32_t> ids = tok->encode(s, false, false);
      if (ids.size() == 1) gp.sampling.logit_bias[ids[0]] = bias;
    }
    gp.json = grammar;
    gp.speculator = spec;
    std::string out;
    Status s = generate(e->model(), *state, *tok, prompt, gp,
                        [&](const std::string& t) {
                          out += t;
                          return true;
                        },
                        st);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return out;
  };
  GenerateStats plain, spec_st;
  const std::string want = run(nullptr, &plain);
  EXPECT_EQ(plain.drafted, 0);
  EXPECT_EQ(plain.stop_reason, "eos") << want;
  SpecOptions so;
  so.adaptive = false;
  so.max_draft = 8;
  ASSERT_TRUE(parse_spec_mode("ngram", &so).ok());
  auto spec = make_speculator(so, *e, *tok, 512, 2);
  ASSERT_TRUE(spec.ok() && *spec);
  const std::string got = run(spec->get(), &spec_st);
  EXPECT_EQ(got, want);
  EXPECT_EQ(spec_st.tokens, plain.tokens);
  EXPECT_EQ(spec_st.stop_reason, plain.stop_reason);
  std::printf("[ literal ] %d of %d literal guesses kept (%d guesses in all), %zu bytes\n", spec_st.literal_accepted,
              spec_st.literal_drafted, spec_st.drafted, want.size());
  EXPECT_GT(spec_st.literal_drafted, 0) << "the call's certain text should be guessed: " << want;
  EXPECT_GT(spec_st.literal_accepted, 0);
}
