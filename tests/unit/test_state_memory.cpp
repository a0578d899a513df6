// What a sequence's state takes (SeqState::memory_bytes, the figure --mem counts a
// server's batch with) against what the state really allocates, on a tiny synthetic
// model of each architecture: a new state's caches, and for kimi-k3 the KDA states
// with their rollback log and the copy pin() keeps.
#include <gtest/gtest.h>
#if defined(__APPLE__)
#include <malloc/malloc.h>
#else
#include <malloc.h>
#endif

#include <algorithm>

#include "arch_names.h"
#include "runtime/engine.h"
#include "synth/synth.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

// Bytes malloc has handed out on this thread's arena and in mmapped blocks
// (glibc); in the default zone (macOS).
uint64_t allocated() {
#if defined(__APPLE__)
  malloc_statistics_t st{};
  malloc_zone_statistics(malloc_default_zone(), &st);
  return uint64_t(st.size_in_use);
#else
  const struct mallinfo2 mi = mallinfo2();
  return uint64_t(mi.uordblks) + uint64_t(mi.hblkhd);
#endif
}

class StateMemory : public ::testing::TestWithParam<const char*> {};

TEST_P(StateMemory, MemoryBytesIsWhatTheStateAllocates) {
  SynthSpec s;
  ASSERT_TRUE(synth_preset("tiny", GetParam(), &s));
  std::string why;
  const std::string path = synth_once("state_memory", std::string("tiny-") + GetParam(), s, &why);
  ASSERT_FALSE(path.empty()) << why;
  EngineOptions eo;
  eo.threads = 2;
  auto e = Engine::open(path, eo);
  ASSERT_TRUE(e.ok()) << e.error().message;
  Model& model = (*e)->model();
  constexpr int kCtx = 2048, kTokens = 40;
  std::vector<int32_t> ids(kTokens);
  for (int i = 0; i < kTokens; ++i) ids[size_t(i)] = (i * 7 + 3) % model.info().n_vocab;
  std::vector<float> logits(size_t(model.info().n_vocab));

  const uint64_t before = allocated();
  auto st = model.new_state(kCtx);
  // Filled part way and pinned: a KDA state then holds its pinned copy too.
  ASSERT_TRUE(model.forward(*st, ids.data(), kTokens, logits.data(), false).ok());
  st->pin();
  const uint64_t held = allocated() - before;
  const uint64_t counted = st->memory_bytes();
  EXPECT_EQ(counted, model.state_bytes(kCtx)) << "a new state counts what it takes at most";
  EXPECT_GE(counted + 16384, held * 99 / 100) << "under-counted: " << held << " bytes allocated";
  EXPECT_LE(counted, held + held / 100 + 4096) << "over-counted: " << held << " bytes allocated";
  // The memory is for the whole context: filling it does not grow the state.
  std::vector<int32_t> more(size_t(kCtx - kTokens), 5);
  ASSERT_TRUE(model.forward(*st, more.data(), int(more.size()), logits.data(), false).ok());
  st->pin();
  EXPECT_LE(allocated() - before, held + held / 100 + 4096);
  EXPECT_EQ(st->memory_bytes(), counted);
  // Twice the context, about twice the caches (recurrent states do not grow).
  EXPECT_GT(model.state_bytes(2 * kCtx), counted);
}

INSTANTIATE_TEST_SUITE_P(Arch, StateMemory, ::testing::ValuesIn(arch_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
