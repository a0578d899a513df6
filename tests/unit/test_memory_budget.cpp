// The memory planner (runtime/memory_budget.h): its arithmetic on made-up model
// sizes (too small a budget names the sizes, the automatic budget, resident vs
// streaming, a paged core, states and the prompt cache out of the expert cache,
// lending), and on a real file the plan inspect prints is the one the Engine applies.
#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "runtime/memory_budget.h"
#include "synth_once.h"

namespace deltafin {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// 64 experts of 1 MiB, a 100 MiB core; the paged core needs 40 MiB.
ModelMemory sizes() {
  ModelMemory m;
  m.path = "m.gguf";
  m.core_bytes = 100 * kMiB;
  m.slot_bytes = kMiB;
  m.n_experts = 64;
  m.expert_bytes = 64 * kMiB;
  m.file_bytes = m.core_bytes + m.expert_bytes;
  m.core_least = 40 * kMiB;
  m.state_bytes = 5 * kMiB / 2;  // 2.5 slots
  m.batch_token_bytes = kMiB / 64;
  return m;
}

MemoryRequest with_mem(uint64_t mem, uint64_t reserve = 0) {
  MemoryRequest r;
  r.mem = mem;
  r.reserve = reserve;
  r.available = uint64_t(64) << 30;
  return r;
}

TEST(MemoryBudget, TooSmallABudgetNamesTheSizes) {
  const ModelMemory m = sizes();
  auto p = plan_memory(m, with_mem(50 * kMiB));
  ASSERT_FALSE(p.ok());
  const std::string& e = p.error().message;
  EXPECT_NE(e.find("m.gguf: a memory budget of 50.0 MiB is too small"), std::string::npos) << e;
  EXPECT_NE(e.find("the resident core takes 100.0 MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("65.5 MiB is kept"), std::string::npos) << e << " (64 MiB + 3% of 50 MiB)";
  EXPECT_NE(e.find("one expert takes 1.000 MiB"), std::string::npos) << e;
  // (100 + 64 + 1) / 0.97 MiB, the least budget that keeps the core and one expert.
  EXPECT_NE(e.find("give --mem of at least 170.2 MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("to stream the core's layers"), std::string::npos) << e;
  // Just above the least: streaming with a resident core.
  auto ok = plan_memory(m, with_mem(uint64_t(170.2 * kMiB)));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_FALSE(ok->paged_core);
  EXPECT_GE(ok->slots, 1);
  // A remote model's core pages too (from its disk cache): the same alternative.
  ModelMemory remote = m;
  remote.remote = true;
  auto r = plan_memory(remote, with_mem(50 * kMiB));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("stream the core"), std::string::npos) << r.error().message;
  auto rp = plan_memory(remote, with_mem(150 * kMiB));
  ASSERT_TRUE(rp.ok()) << rp.error().message;
  EXPECT_TRUE(rp->paged_core);
}

TEST(MemoryBudget, BelowTheResidentCoreTheCorePages) {
  const ModelMemory m = sizes();
  // 64 + 3% reserve of 150 MiB leaves 81.5 MiB: the least expert cache (4 slots) and
  // the core all the rest.
  auto p = plan_memory(m, with_mem(150 * kMiB));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE(p->streaming);
  EXPECT_TRUE(p->paged_core);
  const uint64_t avail = 150 * kMiB - p->reserve;
  EXPECT_EQ(p->expert_cache, 4 * kMiB);
  EXPECT_EQ(p->core_resident, avail - 4 * kMiB);
  EXPECT_EQ(p->core_resident + p->core_paged, m.core_bytes);
  EXPECT_EQ(p->slots, 4);
  // Two layers' routed experts when a token uses more than two, and the part of the
  // sequence state the reserve does not hold.
  ModelMemory k = m;
  k.n_used = 6;
  k.state_bytes = 50 * kMiB;  // more than the half of the reserve that holds a state
  MemoryRequest rq = with_mem(150 * kMiB);
  rq.seqs.n_ctx = 4096;
  rq.seqs.n_states = 1;
  auto q = plan_memory(k, rq);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_TRUE(q->paged_core);
  const uint64_t state_part = k.state_bytes - q->reserve / 2;
  EXPECT_EQ(q->expert_cache, 12 * kMiB + state_part);
  EXPECT_EQ(q->core_resident, avail - 12 * kMiB - state_part);
  EXPECT_EQ(q->slots_built, 12 + int(state_part / kMiB));
  EXPECT_EQ(q->states_from_cache, state_part);
}

TEST(MemoryBudget, AutomaticBudget) {
  ModelMemory m = sizes();
  MemoryRequest r = with_mem(kMemAuto);
  r.available = uint64_t(1) << 30;
  // The model fits 80% of the RAM available: resident.
  auto fits = plan_memory(m, r);
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(fits->automatic);
  EXPECT_EQ(fits->total, r.available);
  EXPECT_FALSE(fits->streaming);
  EXPECT_EQ(fits->experts_resident, m.expert_bytes);
  EXPECT_EQ(fits->expert_cache, 0u);
  // It does not: the experts stream in what the core and 64 MiB + 3% leave.
  m.expert_bytes = uint64_t(2) << 30;
  m.file_bytes = m.core_bytes + m.expert_bytes;
  m.n_experts = 2048;
  auto big = plan_memory(m, r);
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_TRUE(big->streaming);
  EXPECT_EQ(big->reserve, 64 * kMiB + uint64_t(double(r.available) * 0.03));
  EXPECT_EQ(big->expert_cache, r.available - m.core_bytes - big->reserve);
  EXPECT_EQ(big->slots, int(big->expert_cache / kMiB));
  // A remote model always streams (through its disk cache), fit or not; --mem 0 is automatic for it.
  ModelMemory remote = sizes();
  remote.remote = true;
  auto rp = plan_memory(remote, with_mem(0));
  ASSERT_TRUE(rp.ok());
  EXPECT_TRUE(rp->automatic);
  EXPECT_TRUE(rp->streaming);
}

TEST(MemoryBudget, ResidentOrStreaming) {
  const ModelMemory m = sizes();
  // No budget: resident, nothing reserved.
  auto none = plan_memory(m, with_mem(0));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->streaming);
  EXPECT_EQ(none->total, 0u);
  // An explicit --mem streams even when everything would fit; the cache then holds
  // every expert and keeps the rest spare.
  auto big = plan_memory(m, with_mem(uint64_t(4) << 30));
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(big->streaming);
  EXPECT_EQ(big->slots, m.n_experts);
  EXPECT_EQ(big->spare, big->expert_cache - uint64_t(m.n_experts) * kMiB);
  // A dense model has no experts to stream.
  ModelMemory dense = m;
  dense.n_experts = 0;
  dense.expert_bytes = 0;
  auto d = plan_memory(dense, with_mem(uint64_t(4) << 30));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->streaming);
}

TEST(MemoryBudget, ServerStatesAndPromptCacheComeOutOfTheCache) {
  const ModelMemory m = sizes();
  // --reserve 1M: 30.5 MiB of cache after the 100 MiB core, 30 slots and half a slot spare.
  MemoryRequest r = with_mem(100 * kMiB + kMiB + 30 * kMiB + kMiB / 2, kMiB);
  r.seqs = {.n_ctx = 1000, .n_states = 3, .serving = true, .prompt_cache = kMemAuto};
  auto p = plan_memory(m, r);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->slots_built, 30);
  // 7.5 MiB of states: the half slot spare, then 7 slots.
  EXPECT_EQ(p->states_from_cache, kMiB / 2 + 7 * kMiB);
  // The prompt cache: a tenth of the 23 slots left (2.3 MiB), in 3 whole slots.
  EXPECT_EQ(p->prompt_cache, 23 * kMiB / 10);
  EXPECT_EQ(p->prompt_cache_from_cache, 3 * kMiB);
  EXPECT_EQ(p->slots, 20);
  // Lending leaves a quarter of the slots, and at least 8.
  EXPECT_EQ(p->prompt_lend, 12 * kMiB);
  EXPECT_EQ(p->prompt_lend_tokens(), 12u * 64);

  // A command's one state: half the reserve holds it; only the rest is taken.
  MemoryRequest one = with_mem(100 * kMiB + 4 * kMiB + 30 * kMiB, 4 * kMiB);
  one.seqs = {.n_ctx = 1000, .n_states = 1};
  auto q = plan_memory(m, one);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->states_in_reserve, 2 * kMiB);
  EXPECT_EQ(q->states_from_cache, kMiB);
  EXPECT_EQ(q->slots, 29);

  // Too many states: an error naming the sizes and what to change.
  r.seqs.n_states = 13;
  auto bad = plan_memory(m, r);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("13 sequence states of 1000 positions take 32.5 MiB (2.50 MiB each): more than "
                                     "the expert cache's 30.5 MiB (30 experts) can give; lower -c/--ctx-size or "
                                     "--parallel, or raise --mem"),
            std::string::npos)
      << bad.error().message;
  // A prompt cache over what is left.
  r.seqs.n_states = 3;
  r.seqs.prompt_cache = 30 * kMiB;
  auto pc = plan_memory(m, r);
  ASSERT_FALSE(pc.ok());
  EXPECT_NE(pc.error().message.find("--prompt-cache-mem 30.0 MiB: more than the expert cache's 23.0 MiB"),
            std::string::npos)
      << pc.error().message;
  // Resident: the states are bounded by the RAM available; the prompt cache defaults to 1 GiB.
  MemoryRequest res = with_mem(0);
  res.available = 10 * kMiB;
  res.seqs = {.n_ctx = 1000, .n_states = 5, .serving = true, .prompt_cache = kMemAuto};
  auto rb = plan_memory(m, res);
  ASSERT_FALSE(rb.ok());
  EXPECT_NE(rb.error().message.find("5 sequence states of 1000 positions would take 12.5 MiB, more than the 10.0 MiB"),
            std::string::npos)
      << rb.error().message;
  res.seqs.n_states = 2;
  auto rs = plan_memory(m, res);
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->prompt_cache, uint64_t(1) << 30);
  EXPECT_EQ(rs->states_from_cache, 0u);
}

TEST(MemoryBudget, PromptStepsAreEqual) {
  ModelInfo mi;
  mi.n_embd = 16;
  mi.n_expert_used = 4;
  const uint64_t per = batch_bytes_per_token(mi);
  EXPECT_EQ(prompt_step_tokens(mi, 700, 512, 0), 350) << "two equal passes";
  EXPECT_EQ(prompt_step_tokens(mi, 700, 512, 188 * per), 700) << "one pass when the loan holds the rest";
  EXPECT_EQ(prompt_step_tokens(mi, 700, 512, 100 * per), 350);
}

// On a real file: what inspect plans (sizes from the headers, the state from a
// checked model) is what the Engine applies to its store.
TEST(MemoryBudget, InspectPlansWhatTheEngineApplies) {
  SynthSpec spec;
  ASSERT_TRUE(synth_preset("tiny", "qwen3moe", &spec));
  spec.n_expert = 32;
  std::string why;
  const std::string path = synth_once("memory_budget", "tiny-e32", spec, &why);
  ASSERT_FALSE(path.empty()) << why;
  auto file = ModelFile::open(path, local_file_opener());
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto sizes = model_memory(**file, false, 300);
  ASSERT_TRUE(sizes.ok()) << sizes.error().message;
  MemoryRequest r;
  r.reserve = kMiB;
  r.mem = sizes->core_bytes + kMiB + 20 * sizes->slot_bytes + sizes->slot_bytes / 3;
  r.seqs = {.n_ctx = 300, .n_states = 3, .serving = true, .prompt_cache = kMemAuto};
  auto inspected = plan_memory(**file, *sizes, r);
  ASSERT_TRUE(inspected.ok()) << inspected.error().message;
  ASSERT_GT(inspected->states_from_cache, 0u);

  EngineOptions eo;
  eo.threads = 2;
  eo.mem_bytes = r.mem;
  eo.reserve_bytes = r.reserve;
  eo.stream.profile_path = "";
  auto e = Engine::open(path, eo);
  ASSERT_TRUE(e.ok()) << e.error().message;
  ASSERT_TRUE((*e)->plan_sequences(r.seqs).ok());
  const MemoryPlan& run = (*e)->memory_plan();
  EXPECT_EQ(format_plan(run), format_plan(*inspected));
  EXPECT_EQ(run.state_bytes, inspected->state_bytes);
  ASSERT_NE((*e)->streaming_store(), nullptr);
  const StoreStats st = (*e)->streaming_store()->stats();
  EXPECT_EQ(st.slots, run.slots);
  EXPECT_EQ(st.slot_bytes, run.slot_bytes);
}

}  // namespace
}  // namespace deltafin
