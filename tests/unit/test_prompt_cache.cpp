// The scheduler's prompt cache, on a tiny synthetic model of each architecture that
// batches: a request whose prompt continues a finished one (a chat's next turn),
// diverges from it, or repeats it takes the kept state, evaluates only the rest, and
// gives the same text as generate() alone with a fresh state; how many prompt tokens
// it was spared is reported. A KDA state (kimi-k3) rolls back only 16 positions or
// to its prompt's end (pinned), so a prompt that diverges earlier there starts from a
// new state instead. And n choices
// of one prompt continue from copies of one state.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "arch_names.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/prompt_disk_cache.h"
#include "runtime/scheduler.h"
#include "synth/synth.h"
#include "gen_wait.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

class PromptCache : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SynthSpec s;
    ASSERT_TRUE(synth_preset("tiny", GetParam(), &s));
    std::string why;
    const std::string path = synth_once("prompt_cache", std::string("tiny-") + GetParam(), s, &why);
    ASSERT_FALSE(path.empty()) << why;
    EngineOptions eo;
    eo.threads = 2;
    auto e = Engine::open(path, eo);
    ASSERT_TRUE(e.ok()) << e.error().message;
    engine_ = std::move(*e);
    auto t = Tokenizer::from_gguf(engine_->file().meta());
    ASSERT_TRUE(t.ok()) << t.error().message;
    tok_.emplace(std::move(*t));
  }

  std::vector<int32_t> encode(const std::string& text, bool bos) { return tok_->encode(text, bos, true); }

  std::string alone(const std::vector<int32_t>& prompt, int n) {
    GenerateParams gp;
    gp.n_predict = n;
    gp.sampling.temperature = 0;
    gp.ignore_eos = true;  // as the requests
    auto st = engine_->model().new_state(kCtx);
    std::string text;
    Status s = generate(engine_->model(), *st, *tok_, prompt, gp, [&](const std::string& t) {
      text += t;
      return true;
    }, nullptr);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return text;
  }

  // One greedy request, waited for: its text and the prompt tokens it was spared.
  std::pair<std::string, int> ask(Scheduler& sched, const std::vector<int32_t>& prompt, int n) {
    SubmitError err;
    std::string msg;
    auto h = sched.submit(greedy_request(prompt, n), &err, &msg);
    EXPECT_TRUE(h) << msg;
    if (!h) return {};
    std::string text;
    const GenUpdate u = wait_done(*h, &text);
    EXPECT_EQ(u.finish_reason, "length");
    return {text, u.n_cached};
  }

  // Submits a greedy request and waits until it decodes (its first text is out).
  std::shared_ptr<GenHandle> start(Scheduler& sched, const std::vector<int32_t>& prompt, int n, std::string* text) {
    SubmitError err;
    std::string msg;
    auto h = sched.submit(greedy_request(prompt, n), &err, &msg);
    EXPECT_TRUE(h) << msg;
    if (h) {
      EXPECT_FALSE(wait_first_text(*h, text).done);
    }
    return h;
  }

  // n_parallel places, the test context, no speculation.
  static SchedulerOptions options(int n_parallel = 2) {
    SchedulerOptions so;
    so.n_parallel = n_parallel;
    so.n_ctx = kCtx;
    so.spec_max = 0;
    return so;
  }

  static constexpr int kCtx = 160;
  std::unique_ptr<Engine> engine_;
  std::optional<Tokenizer> tok_;
};

TEST_P(PromptCache, ContinuedDivergedAndRepeatedPromptsMatchAFreshState) {
  const bool kda = std::string(GetParam()) == "kimi-k3";
  for (int spec_max : {0, 16}) {
    SCOPED_TRACE(::testing::Message() << "spec_max " << spec_max);
    SchedulerOptions so;
    so.n_parallel = 2;
    so.n_ctx = kCtx;
    so.prefill_chunk = 7;  // prompts go in several chunks
    so.spec_max = spec_max;
    Scheduler sched(engine_->model(), *tok_, so);

    const std::vector<int32_t> p1 = encode("one two three four five six seven one two three", true);
    auto [t1, c1] = ask(sched, p1, 8);
    EXPECT_EQ(t1, alone(p1, 8));
    EXPECT_EQ(c1, 0) << "nothing was kept yet";

    // The next turn: the first prompt (and maybe some of its reply), then more.
    std::vector<int32_t> p2 = p1;
    for (int32_t id : encode(" eight nine ten eleven", false)) p2.push_back(id);
    auto [t2, c2] = ask(sched, p2, 8);
    EXPECT_EQ(t2, alone(p2, 8));
    EXPECT_GE(c2, int(p1.size())) << "the first request's state holds its whole prompt";
    EXPECT_LT(c2, int(p2.size()));

    // Diverges after two tokens: a KV cache rolls back that far, a KDA state does not.
    std::vector<int32_t> p3(p1.begin(), p1.begin() + 2);
    for (int32_t id : encode(" zebra zebra quartz", false)) p3.push_back(id);
    ASSERT_NE(p3[2], p1[2]);
    auto [t3, c3] = ask(sched, p3, 8);
    EXPECT_EQ(t3, alone(p3, 8));
    if (kda) {
      EXPECT_EQ(c3, 0) << "a KDA state cannot roll back past its window";
    }
    else EXPECT_EQ(c3, 2);

    // The same prompt again: all but its last token (whose logits are needed).
    auto [t4, c4] = ask(sched, p3, 8);
    EXPECT_EQ(t4, t3);
    EXPECT_EQ(c4, int(p3.size()) - 1);

    const SchedulerStats ss = sched.stats();
    EXPECT_EQ(ss.prompt_cache_hits, uint64_t(kda ? 2 : 3));
    EXPECT_EQ(ss.cached_prompt_tokens, uint64_t(c2 + c3 + c4));
    EXPECT_EQ(ss.prompt_tokens, uint64_t(p1.size() + p2.size() + 2 * p3.size()) - ss.cached_prompt_tokens);
  }
}

// A long reply (more than a KDA state's 16-position rollback window) and then the
// next turn: the state goes back to where its prompt ended (pinned there), so the
// first prompt is not evaluated again on any architecture.
TEST_P(PromptCache, NextTurnAfterALongReplyReturnsToThePromptsEnd) {
  const SchedulerOptions so = options();
  const std::vector<int32_t> p1 = encode("one two three four five six seven", true);
  std::vector<int32_t> p2 = p1;
  for (int32_t id : encode(" user: and then? assistant:", false)) p2.push_back(id);
  const std::string want1 = alone(p1, 30), want2 = alone(p2, 6);
  Scheduler sched(engine_->model(), *tok_, so);
  auto [t1, c1] = ask(sched, p1, 30);
  auto [t2, c2] = ask(sched, p2, 6);
  EXPECT_EQ(t1, want1);
  EXPECT_EQ(t2, want2);
  EXPECT_EQ(c1, 0);
  EXPECT_GE(c2, int(p1.size())) << "the first turn's prompt is reused";
}

TEST_P(PromptCache, OffMeansEveryPromptIsEvaluated) {
  SchedulerOptions so;
  so.n_parallel = 2;
  so.n_ctx = kCtx;
  so.prompt_cache = false;
  Scheduler sched(engine_->model(), *tok_, so);
  const std::vector<int32_t> p = encode("one two three four", true);
  auto [a, ca] = ask(sched, p, 4);
  auto [b, cb] = ask(sched, p, 4);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ca + cb, 0);
  EXPECT_EQ(sched.stats().prompt_tokens, uint64_t(2 * p.size()));
  // Nor is a running sequence's state copied.
  std::vector<int32_t> longer = encode("one two three four five six seven eight nine ten eleven twelve", true);
  ASSERT_GE(longer.size(), 17u);
  std::string running;
  auto h = start(sched, longer, 40, &running);
  ASSERT_TRUE(h);
  longer.push_back(longer.back());
  auto [c, cc] = ask(sched, longer, 2);
  EXPECT_EQ(cc, 0);
  h->cancel();
}

// A request asked to stop (the server's reply reader has all it may take: a second
// tool call with parallel_tool_calls false) ends at the next step as a finished one:
// "stop", its text so far as alone, counted as finished, not cancelled.
TEST_P(PromptCache, StopEndsARequestAsFinished) {
  const SchedulerOptions so = options();
  const std::vector<int32_t> p = encode("one two three four", true);
  const std::string want = alone(p, 100);
  Scheduler sched(engine_->model(), *tok_, so);
  std::string text;
  auto h = start(sched, p, 100, &text);
  ASSERT_TRUE(h);
  h->stop();
  const GenUpdate u = wait_done(*h, &text);
  EXPECT_EQ(u.finish_reason, "stop");
  EXPECT_LT(u.n_generated, 100);
  EXPECT_EQ(want.substr(0, text.size()), text);
  EXPECT_EQ(sched.stats().finished, 1u);
  EXPECT_EQ(sched.stats().cancelled, 0u);
}

// A request that shares a long prefix (a system prompt) with one still decoding
// starts from a copy of that one's state, which goes on unchanged. (A KDA state may
// have moved more than its 16-position window past the prefix by then: it may start
// anew there; the text is checked either way.)
TEST_P(PromptCache, RunningSequenceLendsACopyOfItsState) {
  const bool kda = std::string(GetParam()) == "kimi-k3";
  const std::vector<int32_t> system = encode("You are a careful reader of old books and you answer briefly", true);
  ASSERT_GE(system.size(), 16u);
  std::vector<int32_t> pa = system, pb = system;
  for (int32_t id : encode(" one two three", false)) pa.push_back(id);
  for (int32_t id : encode(" zebra quartz", false)) pb.push_back(id);
  // A runs long enough to be still decoding when B arrives (its first text is out
  // before B is submitted; a tiny model makes 30 tokens in a few ms).
  const int n_a = kCtx - int(pa.size()) - 1;
  ASSERT_GE(n_a, 60);
  const std::string want_a = alone(pa, n_a), want_b = alone(pb, 8);  // one pass at a time on the model
  const SchedulerOptions so = options();
  Scheduler sched(engine_->model(), *tok_, so);
  std::string text_a;
  auto ha = start(sched, pa, n_a, &text_a);
  ASSERT_TRUE(ha);
  auto [text_b, cached_b] = ask(sched, pb, 8);
  wait_done(*ha, &text_a);
  EXPECT_EQ(text_b, want_b);
  EXPECT_EQ(text_a, want_a) << "the copy leaves the running sequence as it was";
  const int shared = int(system.size());  // the suffixes' first tokens differ
  ASSERT_NE(pa[system.size()], pb[system.size()]);
  if (kda) {
    EXPECT_TRUE(cached_b == shared || cached_b == 0) << cached_b;
  }
  else EXPECT_EQ(cached_b, shared);
}

// More conversations than batch places: with one place, two users' chats take turns.
// The kept state that a new request needs the place of is fitted to its positions and
// parked in RAM (--prompt-cache-mem), so each user's next turn still skips the
// history; a new conversation that shares only the start with a kept one copies it
// instead of taking it. Without the RAM (or with too little for one state) the next
// turns evaluate everything again.
TEST_P(PromptCache, ParkedStatesServeMoreConversationsThanBatchPlaces) {
  const bool kda = std::string(GetParam()) == "kimi-k3";
  const std::vector<int32_t> sys = encode("System: be kind.", true);
  std::vector<int32_t> a1 = sys, b1 = sys;
  for (int32_t id : encode(" one two three four five six seven eight", false)) a1.push_back(id);
  for (int32_t id : encode(" zebra quartz lamp river stone cloud", false)) b1.push_back(id);
  ASSERT_NE(a1[sys.size()], b1[sys.size()]);
  std::vector<int32_t> a2 = a1, b2 = b1;
  for (int32_t id : encode(" nine ten eleven", false)) a2.push_back(id);
  for (int32_t id : encode(" tree apple", false)) b2.push_back(id);
  const std::string want_a2 = alone(a2, 6), want_b2 = alone(b2, 6);
  const uint64_t full = engine_->model().state_bytes(kCtx);
  for (uint64_t budget : {uint64_t(64) << 20, full / 16, uint64_t(0)}) {
    SCOPED_TRACE(::testing::Message() << "prompt_cache_bytes " << budget);
    SchedulerOptions so = options(1);
    so.prompt_cache_bytes = budget;
    Scheduler sched(engine_->model(), *tok_, so);
    ask(sched, a1, 6);
    auto [tb1, cb1] = ask(sched, b1, 6);
    // (A KDA state does not roll back that far: b starts anew there.)
    EXPECT_EQ(cb1, kda ? 0 : int(sys.size())) << "the shared start";
    const bool room = budget > full / 16;
    if (room) {
      const SchedulerStats ss = sched.stats();
      EXPECT_EQ(ss.parked, 1) << "a's state went to RAM for b's";
      EXPECT_GT(ss.parked_bytes, 0u);
      EXPECT_LT(ss.parked_bytes, full) << "fitted to the positions it holds";
    }
    auto [ta2, ca2] = ask(sched, a2, 6);
    auto [tb2, cb2] = ask(sched, b2, 6);
    EXPECT_EQ(ta2, want_a2);
    EXPECT_EQ(tb2, want_b2);
    if (room) {
      EXPECT_GE(ca2, int(a1.size())) << "a's next turn found its parked state";
      EXPECT_GE(cb2, int(b1.size())) << "b's next turn found its parked state";
    } else {
      EXPECT_LE(ca2, int(sys.size()));
      EXPECT_LE(cb2, int(sys.size()));
    }
    EXPECT_LE(sched.stats().parked_bytes, budget);
  }
}

// The disk tier: with no RAM for parked states, a conversation's state the batch
// place is needed for goes to disk, the others at shutdown; a new scheduler over a
// new index of the same directory (a restarted server) resumes both conversations
// from there, with the text a fresh state gives. A damaged file costs only its
// prompt evaluation, and another model's files are not used.
TEST_P(PromptCache, DiskTierResumesConversationsAfterARestart) {
  const std::string dir = test_dir("prompt_disk") + "/" + GetParam();
  std::filesystem::remove_all(dir);
  std::vector<int32_t> a1 = encode("System: be kind. one two three four five six", true);
  std::vector<int32_t> b1 = encode("Zebra quartz lamp river stone cloud tree", true);
  std::vector<int32_t> a2 = a1, b2 = b1;
  for (int32_t id : encode(" nine ten eleven", false)) a2.push_back(id);
  for (int32_t id : encode(" apple pear", false)) b2.push_back(id);
  const std::string want_a2 = alone(a2, 6), want_b2 = alone(b2, 6);
  SchedulerOptions so = options(1);
  so.prompt_cache_bytes = 0;
  {
    auto disk = PromptDiskCache::open(dir, "tiny", 64 << 20);
    ASSERT_TRUE(disk.ok()) << disk.error().message;
    so.disk = disk->get();
    Scheduler sched(engine_->model(), *tok_, so);
    ask(sched, a1, 6);
    ask(sched, b1, 6);  // a's state leaves its place: to disk
    EXPECT_EQ(sched.stats().disk_states, 1);
    sched.shutdown(true, std::chrono::milliseconds(1000));  // b's too
    EXPECT_EQ((*disk)->stats().entries, 2);
  }
  auto disk = PromptDiskCache::open(dir, "tiny", 64 << 20);
  ASSERT_TRUE(disk.ok()) << disk.error().message;
  EXPECT_EQ((*disk)->stats().entries, 2) << "the entries outlive the process's index";
  so.disk = disk->get();
  {
    Scheduler sched(engine_->model(), *tok_, so);
    auto [ta2, ca2] = ask(sched, a2, 6);
    auto [tb2, cb2] = ask(sched, b2, 6);
    EXPECT_EQ(ta2, want_a2);
    EXPECT_EQ(tb2, want_b2);
    EXPECT_GE(ca2, int(a1.size())) << "a resumed from disk";
    EXPECT_GE(cb2, int(b1.size())) << "b resumed from disk";
    EXPECT_EQ(sched.stats().prompt_cache_disk_hits, 2u);
  }
  // Damage every entry: the next request evaluates its prompt, the files go.
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(std::streamoff(std::filesystem::file_size(f.path()) / 2));
    io.put('\x5a');
  }
  auto again = PromptDiskCache::open(dir, "tiny", 64 << 20);
  ASSERT_TRUE(again.ok());
  so.disk = again->get();
  {
    Scheduler sched(engine_->model(), *tok_, so);
    auto [ta2, ca2] = ask(sched, a2, 6);
    EXPECT_EQ(ta2, want_a2);
    EXPECT_EQ(ca2, 0) << "a damaged entry is not used";
    EXPECT_GE((*again)->stats().failures, 1u);
  }
  auto other = PromptDiskCache::open(dir, "another model", 64 << 20);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->stats().entries, 0) << "another model's states are not offered";
  // A file of another format version (a newer deltafin's) is neither used nor removed;
  // one of ours cut inside its header is removed.
  const std::string foreign = dir + "/0000000000000001.dfpc", cut = dir + "/0000000000000002.dfpc";
  std::ofstream(foreign, std::ios::binary) << std::string("DFPCACHE\x02\x00\x00\x00", 12) << "later format";
  std::ofstream(cut, std::ios::binary) << std::string("DFPCACHE\x01\x00\x00\x00\x04\x00", 14);
  auto mixed = PromptDiskCache::open(dir, "tiny", 64 << 20);
  ASSERT_TRUE(mixed.ok());
  EXPECT_TRUE(std::filesystem::exists(foreign));
  EXPECT_FALSE(std::filesystem::exists(cut));
}

// n choices: the others continue from a copy of the first's state (SeqState::clone):
// greedy, every choice is what a fresh state gives, and decoding one copy leaves the
// others as they were.
TEST_P(PromptCache, ChoicesContinueFromCopiesOfOneState) {
  SchedulerOptions so;
  so.n_parallel = 3;
  so.n_ctx = kCtx;
  so.prefill_chunk = 5;
  Scheduler sched(engine_->model(), *tok_, so);
  const GenRequest r = greedy_request(encode("one two three four five six seven", true), 10);
  const std::string want = alone(r.prompt, 10);  // before: one pass at a time on the model
  SubmitError err;
  std::string msg;
  auto hs = sched.submit_choices(r, 3, &err, &msg);
  ASSERT_EQ(hs.size(), 3u) << msg;
  for (auto& h : hs) {
    std::string text;
    wait_done(*h, &text);
    EXPECT_EQ(text, want);
  }
  EXPECT_EQ(sched.stats().prompt_tokens, r.prompt.size());
}

INSTANTIATE_TEST_SUITE_P(Arch, PromptCache, ::testing::ValuesIn(arch_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
