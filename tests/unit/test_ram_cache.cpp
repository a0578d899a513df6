// The streaming store's RAM cache on its own (store/ram_cache.h), with no tier: the
// test plays the tier's part by marking a filled slot Ready.
//   - a free slot first, then a victim by policy (LFU: fewest uses; LRU: oldest use);
//   - never a pinned or claimed expert, and a prefetch never evicts;
//   - a pin's views point into the expert's slot with the index's shapes;
//   - slots are committed ahead of use, within the window and under the lending
//     limit, and a chunk committed while its slot was lent is given back;
//   - lending keeps at least a quarter of the slots (and 8); giving up every slot
//     is refused.
#include <gtest/gtest.h>

#include <cstring>

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

// An LFU cache of one slot per expert of the tiny model, at most 40; its slot count
// (0 when init failed).
int init_lfu(const Fixture& f, RamCache* c) {
  const int n = std::min(f.ix->n_keys(), 40);
  return c->init(*f.ix, 0, n, CachePolicy::LFU, "test").ok() ? n : 0;
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
  RamCache c;
  const int n = init_lfu(f, &c);
  ASSERT_GE(n, 12);
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

TEST(RamCache, PopulatesAheadOfUseAndNeverWhatIsLent) {
  std::string why;
  Fixture f = tiny_index(&why);
  if (!f.ix) GTEST_SKIP() << why;
  RamCache c;
  const int n = init_lfu(f, &c);
  ASSERT_GE(n, 12);
  const size_t slot = c.slot_bytes(), half = (slot / 2 + 4095) / 4096 * 4096;
  ASSERT_LT(half, slot);
  // Two slots ahead of none handed out: slot 0 in two chunks, then slot 1, then none.
  RamCache::PopulateChunk a = c.next_populate(2, half);
  EXPECT_EQ(a.slot, 0);
  EXPECT_EQ(a.len, half);
  RamCache::PopulateChunk b = c.next_populate(2, half);
  EXPECT_EQ(b.slot, 0);
  EXPECT_EQ(b.data, a.data + half);
  EXPECT_EQ(b.len, slot - half);
  EXPECT_EQ(c.next_populate(2, slot).slot, 1);
  EXPECT_EQ(c.next_populate(2, slot).slot, -1);
  // Handing out slots moves the window; what was handed out is not populated again.
  for (int k = 0; k < 3; ++k) ASSERT_EQ(fill(c, k), k);
  EXPECT_EQ(c.next_populate(2, slot).slot, 3);
  EXPECT_EQ(c.next_populate(2, slot).slot, 4);
  EXPECT_EQ(c.next_populate(2, slot).slot, -1);
  // Lend all but the floor: nothing at or over the limit is populated, and a chunk
  // taken before the lending is given back when it lands.
  RamCache::PopulateChunk late = c.next_populate(n, slot);
  ASSERT_EQ(late.slot, 5);
  std::memset(late.data, 1, late.len);  // as if committed
  const int floor = std::max(8, (n + 3) / 4);
  c.lend(uint64_t(n) * slot * 2);
  ASSERT_LT(late.slot, floor);  // the tiny model: slot 5 stays under the floor
  for (RamCache::PopulateChunk p; (p = c.next_populate(n, slot)).slot >= 0;) EXPECT_LT(p.slot, floor);
  EXPECT_EQ(c.next_populate(n, slot).slot, -1);
  c.populated(late);
  EXPECT_EQ(late.data[0], 1);  // under the limit: kept
  c.lend(0);
  RamCache::PopulateChunk over = c.next_populate(n, slot);
  ASSERT_EQ(over.slot, floor);
  std::memset(over.data, 2, over.len);
  c.lend(uint64_t(n) * slot * 2);
  c.populated(over);
#ifdef __linux__
  EXPECT_EQ(over.data[0], 0);  // lent meanwhile: released (reads as zeros on Linux)
#endif
}
