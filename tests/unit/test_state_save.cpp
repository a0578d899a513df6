// Sequence states as bytes (the prompt cache's disk tier): a state saved and loaded
// into a new state of the same model continues exactly as the original, on a tiny
// model of each architecture (deepseek2 with its MTP block's caches too, kimi-k3 with
// its KDA states, their rollback log and pinned copy), and bytes that do not fit are
// an error.
#include <gtest/gtest.h>

#include <algorithm>

#include "arch_names.h"
#include "runtime/engine.h"
#include "synth/synth.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

struct Case {
  const char* arch;
  int nextn;
};

// Every architecture, and deepseek2 with its MTP block.
std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* a : arch_names()) v.push_back({a, 0});
  v.push_back({"deepseek2", 1});
  return v;
}

class StateSave : public ::testing::TestWithParam<Case> {};

std::unique_ptr<Engine> open_arch(const Case& c) {
  SynthSpec s;
  EXPECT_TRUE(synth_preset("tiny", c.arch, &s));
  s.nextn = c.nextn;
  std::string why;
  const std::string path =
      synth_once("state_save", std::string("tiny-") + c.arch + (c.nextn ? "-nextn" : ""), s, &why);
  EXPECT_FALSE(path.empty()) << why;
  EngineOptions eo;
  eo.threads = 2;
  auto e = Engine::open(path, eo);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(*e) : nullptr;
}

TEST_P(StateSave, LoadedStateContinuesAsTheOriginal) {
  auto engine = open_arch(GetParam());
  ASSERT_TRUE(engine);
  Model& model = engine->model();
  if (GetParam().nextn) model.enable_mtp();  // passes record what the MTP block needs
  const int64_t V = model.info().n_vocab;
  std::vector<int32_t> ids(60);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7 + 3) % size_t(V));
  std::vector<float> a(static_cast<size_t>(V), 0.0f), b(static_cast<size_t>(V), 0.0f);

  // A prompt, pinned (its end is where a chat comes back to), then more tokens.
  auto st = model.new_state(128);
  ASSERT_TRUE(model.forward(*st, ids.data(), 30, a.data(), false).ok());
  st->pin();
  ASSERT_TRUE(model.forward(*st, ids.data() + 30, 10, a.data(), false).ok());
  if (GetParam().nextn) {  // the MTP block's cache catches up on what the trunk recorded
    std::vector<int32_t> seq(ids.begin(), ids.begin() + 41), d;
    ASSERT_TRUE(model.mtp_draft(*st, seq, 2, &d).ok());
  }
  const std::string bytes = st->save();

  // Into a state with another context size that holds the positions.
  auto loaded = model.new_state(96);
  ASSERT_TRUE(loaded->load(bytes).ok());
  EXPECT_EQ(loaded->n_past, 40);
  EXPECT_EQ(loaded->save(), bytes) << "saving the loaded state gives the same bytes";
  ASSERT_TRUE(model.forward(*st, ids.data() + 40, 5, a.data(), false).ok());
  ASSERT_TRUE(model.forward(*loaded, ids.data() + 40, 5, b.data(), false).ok());
  EXPECT_EQ(a, b) << "the loaded state continues bit for bit as the original";
  if (GetParam().nextn) {
    std::vector<int32_t> seq(ids.begin(), ids.begin() + 46), da, db;
    ASSERT_TRUE(model.mtp_draft(*st, seq, 2, &da).ok());
    ASSERT_TRUE(model.mtp_draft(*loaded, seq, 2, &db).ok());
    EXPECT_EQ(da, db) << "the MTP block drafts the same from the loaded state";
  }
  // Back to the pinned prompt end, then a different continuation: still the same.
  ASSERT_EQ(loaded->reachable(30), st->reachable(30));
  if (st->reachable(30) == 30) {
    ASSERT_TRUE(st->truncate(30).ok());
    ASSERT_TRUE(loaded->truncate(30).ok());
    ASSERT_TRUE(model.forward(*st, ids.data() + 50, 4, a.data(), false).ok());
    ASSERT_TRUE(model.forward(*loaded, ids.data() + 50, 4, b.data(), false).ok());
    EXPECT_EQ(a, b) << "after rolling back to the pinned position";
  }
}

TEST_P(StateSave, BytesThatDoNotFitAreAnError) {
  auto engine = open_arch(GetParam());
  ASSERT_TRUE(engine);
  Model& model = engine->model();
  std::vector<int32_t> ids(20, 3);
  std::vector<float> logits(size_t(model.info().n_vocab));
  auto st = model.new_state(64);
  ASSERT_TRUE(model.forward(*st, ids.data(), 20, logits.data(), false).ok());
  const std::string bytes = st->save();
  // Cut short, one byte too many, and a context too small for its positions.
  for (const std::string& bad : {bytes.substr(0, bytes.size() - 1), bytes.substr(0, 5), bytes + "x", std::string()}) {
    auto fresh = model.new_state(64);
    Status s = fresh->load(bad);
    EXPECT_FALSE(s.ok()) << bad.size() << " bytes";
    if (!s.ok()) {
      EXPECT_NE(s.error().message.find("does not fit"), std::string::npos);
    }
  }
  EXPECT_FALSE(model.new_state(16)->load(bytes).ok()) << "20 positions into a context of 16";
}

// Damaged bytes (a disk entry's checksum is what catches those; this is the next
// line of defence): a load either fails or gives a state the model can run on.
TEST_P(StateSave, DamagedBytesNeverBreakTheModel) {
  auto engine = open_arch(GetParam());
  ASSERT_TRUE(engine);
  Model& model = engine->model();
  std::vector<int32_t> ids(12, 5);
  std::vector<float> logits(size_t(model.info().n_vocab));
  auto st = model.new_state(32);
  ASSERT_TRUE(model.forward(*st, ids.data(), 12, logits.data(), false).ok());
  st->pin();
  const std::string bytes = st->save();
  uint64_t x = 88172645463325252ull;
  int loaded = 0;
  for (int i = 0; i < 300; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::string bad = bytes;
    // Mostly the leading counts and lengths, where a bad value could do harm.
    const size_t at = i % 2 ? size_t(x % std::min<size_t>(bad.size(), 64)) : size_t(x % bad.size());
    bad[at] = char(uint8_t(bad[at]) ^ uint8_t(1u << (x >> 60 & 7)));
    auto fresh = model.new_state(32);
    if (!fresh->load(bad).ok()) continue;
    ++loaded;
    ASSERT_LE(fresh->n_past, 32);
    const int32_t tok = 3;
    if (fresh->n_past < 32) {
      EXPECT_TRUE(model.forward(*fresh, &tok, 1, logits.data(), false).ok());
    }
  }
  EXPECT_GT(loaded, 0) << "flipped float bits load (and run)";
}

// Another architecture's state does not load.
TEST(StateSaveAcross, AnotherArchitecturesStateIsRefused) {
  auto q = open_arch({"qwen3moe", 0});
  auto k = open_arch({"kimi-k3", 0});
  ASSERT_TRUE(q && k);
  std::vector<int32_t> ids(8, 2);
  std::vector<float> logits(size_t(k->model().info().n_vocab));
  auto st = k->model().new_state(32);
  ASSERT_TRUE(k->model().forward(*st, ids.data(), 8, logits.data(), false).ok());
  EXPECT_FALSE(q->model().new_state(32)->load(st->save()).ok());
}

INSTANTIATE_TEST_SUITE_P(Arch, StateSave,
                         ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string s = std::string(info.param.arch) + (info.param.nextn ? "_nextn" : "");
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
