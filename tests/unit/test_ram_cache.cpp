// The streaming store's RAM cache on its own (store/ram_cache.h), with no tier: the
// test plays the tier's part by marking a filled slot Ready.
//   - a free slot first, then a victim by policy (LFU: fewest uses; LRU: oldest use);
//   - never a pinned or claimed expert, and a prefetch never evicts;
//   - a pin's views point into the expert's slot with the index's shapes;
//   - lending keeps at least a quarter of the slots (and 8); giving up every slot
//     is refused.
#include <gtest/gtest.h>

#include "model/model.h"
#include "store/ram_cache.h"
#include "store/slot_layout.h"
#include "synth/synth.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

struct Fixture {
  std::unique_ptr<ModelFile> file;
  std::unique_ptr<ExpertIndex> ix;
};

// The index of a tiny synthetic qwen3moe (empty on failure, with *why).
Fixture tiny_index(std::string* why) {
  SynthSpec s;
  if (!synth_preset("tiny", "qwen3moe", &s)) {
    *why = "no tiny preset";
    return {};
  }
  s.n_expert = std::max(s.n_expert, 8);
  const std::string path = synth_once("ram_cache", "tiny-qwen3moe", s, why);
  if (path.empty()) return {};
  Fixture f;
  auto file = ModelFile::open(path, local_file_opener());
  if (!file.ok()) {
    *why = file.error().message;
    return {};
  }
  f.file = std::move(file).value();
  auto ix = ExpertIndex::build(*f.file, find_expert_layers(*f.file));
  if (!ix.ok()) {
    *why = ix.error().message;
    return {};
  }
  f.ix = std::make_unique<ExpertIndex>(std::move(ix).value());
  return f;
}

// What the store does for a demand miss, with the tier's read done at once.
int fill(RamCache& c, int key) {
  const int slot = c.find_slot(/*demand=*/true, /*predicted=*/false);
  if (slot < 0) return -1;
  c.start_fill(key, slot);
  c.at(key).st = ExpertState::Ready;
  return slot;
}

}  // namespace

TEST(RamCache, EvictsByPolicyAndNeverWhatIsInUse) {
  std::string why;
  Fixture f = tiny_index(&why);
  if (!f.ix) GTEST_SKIP() << why;
  ASSERT_GE(f.ix->n_keys(), 3);
  for (CachePolicy policy : {CachePolicy::LFU, CachePolicy::LRU}) {
    SCOPED_TRACE(cache_policy_name(policy));
    RamCache c;
    ASSERT_TRUE(c.init(*f.ix, 0, /*max_slots=*/2, policy, "test").ok());
    EXPECT_EQ(c.slots(), 2);
    // Key 0 used three times, key 1 once but last.
    for (int i = 0; i < 3; ++i) c.lookup(0);
    ASSERT_GE(fill(c, 0), 0);
    c.lookup(1);
    ASSERT_GE(fill(c, 1), 0);
    EXPECT_EQ(c.cached(), 2);
    EXPECT_EQ(c.counters().evictions, 0u);
    // Full: a prefetch takes free room only.
    EXPECT_EQ(c.find_slot(/*demand=*/false, /*predicted=*/false), -1);
    EXPECT_EQ(c.cached(), 2);
    // LFU evicts key 1 (fewer uses), LRU key 0 (older use).
    const int victim = policy == CachePolicy::LFU ? 1 : 0, kept = 1 - victim;
    const int slot = c.find_slot(/*demand=*/true, /*predicted=*/false);
    ASSERT_GE(slot, 0);
    EXPECT_EQ(c.at(victim).st, ExpertState::Absent);
    EXPECT_EQ(c.at(kept).st, ExpertState::Ready);
    EXPECT_EQ(c.counters().evictions, 1u);
    c.start_fill(2, slot);
    c.at(2).st = ExpertState::Ready;
    // Pinned and claimed experts stay, whatever the policy says.
    c.pin(kept);
    c.at(2).wanted = 1;
    EXPECT_EQ(c.find_slot(/*demand=*/true, /*predicted=*/false), -1);
    EXPECT_EQ(c.cached(), 2);
    EXPECT_TRUE(c.unpin(kept));
    EXPECT_GE(c.find_slot(/*demand=*/true, /*predicted=*/false), 0);
    EXPECT_EQ(c.at(kept).st, ExpertState::Absent);
    EXPECT_EQ(c.at(2).st, ExpertState::Ready);
  }
}

TEST(RamCache, PinViewsPointIntoTheSlot) {
  std::string why;
  Fixture f = tiny_index(&why);
  if (!f.ix) GTEST_SKIP() << why;
  RamCache c;
  ASSERT_TRUE(c.init(*f.ix, 0, 1, CachePolicy::LFU, "test").ok());
  const int key = f.ix->n_keys() - 1;
  const int slot = fill(c, key);
  ASSERT_GE(slot, 0);
  const ExpertWeights w = c.pin(key);
  PartLayout lay[kExpertParts];
  EXPECT_LE(slot_layout(f.ix->slices(key), lay), c.slot_bytes());
  const Tensor* parts[kExpertParts] = {&w.gate, &w.up, &w.down};
  for (int p = 0; p < kExpertParts; ++p) {
    if (f.ix->slices(key).part[p].bytes == 0) continue;
    EXPECT_EQ(parts[p]->data, static_cast<const void*>(c.slot_data(slot) + lay[p].view_pos)) << "part " << p;
    EXPECT_EQ(parts[p]->rows(), f.ix->slices(key).part[p].view.rows()) << "part " << p;
  }
  EXPECT_TRUE(c.unpin(key));
}

TEST(RamCache, LendsAndGivesUpWholeSlots) {
  std::string why;
  Fixture f = tiny_index(&why);
  if (!f.ix) GTEST_SKIP() << why;
  const int n = std::min(f.ix->n_keys(), 40);
  ASSERT_GE(n, 12);
  RamCache c;
  ASSERT_TRUE(c.init(*f.ix, 0, n, CachePolicy::LFU, "test").ok());
  const uint64_t slot = c.slot_bytes();
  for (int k = 0; k < n; ++k) ASSERT_GE(fill(c, k), 0);
  // Lending everything keeps max(8, n/4) slots and evicts the rest.
  const int floor = std::max(8, (n + 3) / 4);
  EXPECT_EQ(c.lend(uint64_t(n) * slot * 2), uint64_t(n - floor) * slot);
  EXPECT_EQ(c.cached(), floor);
  EXPECT_EQ(c.lend(0), 0u);  // all back
  // Giving up leaves fewer slots for good; all of them is refused.
  auto r = c.give_up(slot + 1);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, 2 * slot);
  EXPECT_EQ(c.slots(), n - 2);
  EXPECT_FALSE(c.give_up(uint64_t(n) * slot).ok());
  EXPECT_EQ(c.slots(), n - 2);
}
