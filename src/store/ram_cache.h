// The RAM tier of the streaming store: a fixed number of expert-sized slots and the
// state of every expert in them. It decides which expert a slot goes to (a free
// one, else a victim by policy), keeps what is pinned, claimed or reserved from
// eviction, and lends or gives up memory. No I/O and no lock: the store calls it
// with its own lock held, and tiers fill the slots it hands out.
//
// An expert is never evicted while pinned (in use), while claimed (`wanted`: asked
// for by a request or a waiting acquire, not yet taken) or while being read, so
// what a caller waits for cannot be evicted under it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/expert_index.h"
#include "store/expert_store.h"

namespace deltafin {

enum class CachePolicy {
  LFU,  // least frequently used, counts halved periodically (aging); ties: LRU
  LRU,  // least recently used
};
const char* cache_policy_name(CachePolicy p);
bool parse_cache_policy(const std::string& s, CachePolicy* out);  // "lfu" | "lru"

// Absent -> Pending (queued for a read) -> Reading (a tier fills its slot) -> Ready.
enum class ExpertState : uint8_t { Absent, Pending, Reading, Ready };

struct CacheEntry {
  ExpertState st = ExpertState::Absent;
  bool demand = false;         // pending as a demand read (else prefetch)
  bool urgent = false;         // a blocked caller waits: first in line
  bool promoted = false;       // a prefetch read a caller now waits for: the tier was told
  bool from_prefetch = false;  // brought in by a prefetch and not looked up since
  bool predicted = false;      // read ahead by a next-layer prediction (may evict)
  bool reserved = false;       // in a pending prediction: a prediction's read never evicts it
  bool converting = false;     // its slot is being rewritten into the layout's panels: no new pins
  bool converted = false;      // the parts the layout converts are in its form
  uint8_t pins_here = 0;       // pins since it landed (saturating): how hot it has proved
  int slot = -1;
  int pins = 0;
  int wanted = 0;      // claims: asked for (request or a waiting acquire), not yet taken
  float freq = 0;      // LFU score, halved every age period
  uint64_t last_use = 0;
  uint64_t uses = 0;   // lookups by this process (usage profile)
  double profile = 0;  // count loaded from the usage profile
  std::string error;   // a failed demand read, handed to the next acquire

  // In RAM and not being converted: a caller may pin it now.
  bool pinnable() const { return st == ExpertState::Ready && !converting; }
};

class RamCache {
 public:
  struct Counters {
    uint64_t hits = 0, misses = 0, prefetch_hits = 0, evictions = 0;
  };

  // Room for cache_bytes / slot_bytes experts (max_slots > 0: that many), at most
  // every expert; an error naming `what` when not one fits. Slots are allocated on
  // first use.
  Status init(const ExpertIndex& ix, uint64_t cache_bytes, int max_slots, CachePolicy policy,
              const std::string& what);

  CacheEntry& at(int key) { return entries_[size_t(key)]; }
  const CacheEntry& at(int key) const { return entries_[size_t(key)]; }
  int n_keys() const { return int(entries_.size()); }

  // One lookup of an expert: a hit or a miss, and a use for the eviction policy.
  void lookup(int key);
  // Pins a Ready expert and returns views of its parts in its slot (Tensor::panels
  // set on the parts in the layout's panels).
  ExpertWeights pin(int key);
  // Drops a pin; true when it was the last.
  bool unpin(int key);

  // A slot for an expert about to be read: a free one, else (demand and predicted
  // reads only) a victim's, evicted now. Never an expert that is pinned, being
  // read or claimed; a predicted read never evicts a reserved expert, a demand read
  // does but prefers others. -1: none.
  int find_slot(bool demand, bool predicted);
  // `key` is being read into `slot` (from find_slot).
  void start_fill(int key, int slot);
  char* slot_data(int slot) { return arena_.base + size_t(slot) * slot_bytes_; }
  // The read of `key` failed: its slot is free again.
  void fill_failed(int key);

  // A pending prediction expects `key`: no predicted read may evict it. At most
  // half the slots are reserved at once; false when this one is not.
  bool reserve(int key);
  void unreserve(CacheEntry& e);

  // Hot experts in the kernels' layout (store/expert_store.h ExpertLayout): slots
  // are filled with the file's bytes, which the panel kernels read with the same bits
  // as panels but slower; an expert pinned kConvertAfter times since it landed has
  // proved worth a conversion in place. start_conversion: true (and `converting` set)
  // when the caller holds its only pin and it is hot, not converted yet, and has a
  // part the layout converts; the caller then runs convert() without the store's lock
  // (its pin keeps the slot) and finish_conversion() with it.
  static constexpr int kConvertAfter = 3;
  void set_layout(const ExpertLayout& layout) { layout_ = layout; }
  bool start_conversion(int key);
  void convert(int key);
  void finish_conversion(int key);

  // Evicts every expert not in use (cold-cache measurements).
  void drop_unused();
  // StreamingExpertStore::lend_memory and reserve_memory.
  uint64_t lend(uint64_t bytes);
  Result<uint64_t> give_up(uint64_t bytes);

  // Committing slots' pages before reads land in them (platform::populate_memory),
  // so that a read into a slot never handed out before does not fault and zero its
  // pages inside the read: with K3's 16.7 MiB experts that had cut the read rate to a
  // quarter until the cache was full (docs/BENCHMARKS.md). The next chunk (at most
  // max_len bytes) of the first slot not handed out, while that slot is within
  // `ahead` slots of the ones handed out and under the lending limit; slot -1: none
  // now. The caller commits it without the store's lock and then calls populated(),
  // which gives the chunk back if its slot was lent meanwhile.
  struct PopulateChunk {
    int slot = -1;
    char* data = nullptr;
    size_t len = 0;
  };
  PopulateChunk next_populate(int ahead, size_t max_len);
  void populated(const PopulateChunk& c);

  uint64_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return n_slots_; }
  int cached() const;  // experts Ready now
  const Counters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

 private:
  struct Slot {
    int key = -1;
    bool touched = false;  // its memory may be committed (handed out since last released)
  };
  // Every slot's memory in one mapping (huge pages where the system gives them: an
  // expert smaller than 2 MiB in small pages of its own ran decode 14-22% slower, see
  // docs/BENCHMARKS.md), committed as slots are first filled and given back by trim.
  struct Arena {
    char* base = nullptr;
    size_t bytes = 0;
    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena();
  };
  bool better_victim(const CacheEntry& a, const CacheEntry& b) const;
  bool in_layout(const ExpertSlice& part) const { return part.bytes != 0 && layout_.converts(part.view); }
  void evict(int slot);
  void trim();
  void rebuild_free_slots();

  const ExpertIndex* ix_ = nullptr;
  ExpertLayout layout_;
  CachePolicy policy_ = CachePolicy::LFU;
  uint64_t slot_bytes_ = 0;
  int n_slots_ = 0, n_alloc_ = 0;
  int limit_ = 0;       // slots the cache may use now (< n_slots_ while memory is lent)
  int pop_slot_ = 0;    // next_populate's place: slots from n_alloc_ up to here are committed
  size_t pop_off_ = 0;  //   and this many bytes of pop_slot_
  uint64_t spare_ = 0;  // budget beyond the slots (all experts fit), not given up yet
  std::vector<CacheEntry> entries_;  // by key
  std::vector<Slot> slots_;
  Arena arena_;
  std::vector<int> free_slots_;
  int reserved_ = 0;  // entries with `reserved` set
  uint64_t clock_ = 0, age_period_ = 256;
  Counters counters_;
};

// Bytes one cache slot takes for this model: the largest expert's three aligned ranges.
uint64_t expert_slot_bytes(const ExpertIndex& ix);

}  // namespace deltafin
