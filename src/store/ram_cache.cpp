#include "store/ram_cache.h"

#include <algorithm>

#include "core/platform.h"
#include "store/slot_layout.h"

namespace deltafin {

const char* cache_policy_name(CachePolicy p) { return p == CachePolicy::LRU ? "lru" : "lfu"; }

bool parse_cache_policy(const std::string& s, CachePolicy* out) {
  if (s == "lfu") *out = CachePolicy::LFU;
  else if (s == "lru") *out = CachePolicy::LRU;
  else return false;
  return true;
}

RamCache::Arena::~Arena() { platform::unmap_memory(base, bytes); }

uint64_t expert_slot_bytes(const ExpertIndex& ix) {
  uint64_t m = 0;
  for (int k = 0; k < ix.n_keys(); ++k) {
    PartLayout lay[kExpertParts];
    m = std::max(m, slot_layout(ix.slices(k), lay));
  }
  return m;
}

Status RamCache::init(const ExpertIndex& ix, uint64_t cache_bytes, int max_slots, CachePolicy policy,
                      const std::string& what) {
  ix_ = &ix;
  policy_ = policy;
  slot_bytes_ = expert_slot_bytes(ix);
  uint64_t n = slot_bytes_ ? cache_bytes / slot_bytes_ : 0;
  if (max_slots > 0) n = uint64_t(max_slots);
  n = std::min<uint64_t>(n, uint64_t(ix.n_keys()));
  if (n == 0 && ix.n_keys() > 0)
    return make_error("{}: the expert cache ({:.1f} MiB) has no room for one expert ({:.1f} MiB); raise --mem", what,
                      cache_bytes / 1048576.0, slot_bytes_ / 1048576.0);
  n_slots_ = int(n);
  spare_ = cache_bytes > n * slot_bytes_ ? cache_bytes - n * slot_bytes_ : 0;
  limit_ = n_slots_;
  slots_.resize(size_t(n_slots_));
  if (n_slots_ > 0) {
    arena_.bytes = size_t(n_slots_) * slot_bytes_;
    arena_.base = static_cast<char*>(platform::map_memory(arena_.bytes));
    if (arena_.base == nullptr)
      return make_error("{}: cannot map {:.1f} MiB for the expert cache", what, arena_.bytes / 1048576.0);
  }
  entries_.resize(size_t(ix.n_keys()));
  age_period_ = std::max<uint64_t>(256, 8 * uint64_t(n_slots_));
  return {};
}

void RamCache::lookup(int key) {
  CacheEntry& e = entries_[size_t(key)];
  unreserve(e);
  e.predicted = false;
  if (e.st == ExpertState::Ready) {
    ++counters_.hits;
    if (e.from_prefetch) ++counters_.prefetch_hits;
  } else {
    ++counters_.misses;
  }
  e.from_prefetch = false;
  e.freq += 1.0f;
  e.last_use = ++clock_;
  ++e.uses;
  if (clock_ % age_period_ == 0)
    for (CacheEntry& x : entries_) x.freq *= 0.5f;
}

ExpertWeights RamCache::pin(int key) {
  CacheEntry& e = entries_[size_t(key)];
  ++e.pins;
  if (e.pins_here < 255) ++e.pins_here;
  const ExpertSlices& sl = ix_->slices(key);
  PartLayout lay[kExpertParts];
  slot_layout(sl, lay);
  const char* base = slot_data(e.slot);
  ExpertWeights w;
  Tensor* out[kExpertParts] = {&w.gate, &w.up, &w.down};
  for (int p = 0; p < kExpertParts; ++p) {
    if (sl.part[p].bytes == 0) continue;
    *out[p] = sl.part[p].view;
    out[p]->data = base + lay[p].view_pos;
    out[p]->panels = e.converted && in_layout(sl.part[p]);
  }
  return w;
}

bool RamCache::start_conversion(int key) {
  CacheEntry& e = entries_[size_t(key)];
  if (e.pins != 1 || !e.pinnable() || e.converted || e.pins_here < kConvertAfter) return false;
  const ExpertSlices& sl = ix_->slices(key);
  for (int p = 0; p < kExpertParts; ++p) {
    if (!in_layout(sl.part[p])) continue;
    e.converting = true;
    return true;
  }
  return false;
}

void RamCache::convert(int key) {
  const CacheEntry& e = entries_[size_t(key)];
  const ExpertSlices& sl = ix_->slices(key);
  PartLayout lay[kExpertParts];
  slot_layout(sl, lay);
  char* base = slot_data(e.slot);
  for (int p = 0; p < kExpertParts; ++p) {
    const Tensor& v = sl.part[p].view;
    if (in_layout(sl.part[p])) layout_.convert(v.type, base + lay[p].view_pos, v.rows(), v.cols());
  }
}

void RamCache::finish_conversion(int key) {
  CacheEntry& e = entries_[size_t(key)];
  e.converting = false;
  e.converted = true;
}

bool RamCache::unpin(int key) {
  CacheEntry& e = entries_[size_t(key)];
  return e.pins > 0 && --e.pins == 0;
}

int RamCache::find_slot(bool demand, bool predicted) {
  if (n_alloc_ > limit_) trim();
  while (!free_slots_.empty()) {
    const int s = free_slots_.back();
    free_slots_.pop_back();
    if (s >= limit_) continue;  // lent (trim frees its memory)
    slots_[size_t(s)].touched = true;
    return s;
  }
  if (n_alloc_ < limit_) {
    slots_[size_t(n_alloc_)].touched = true;
    return n_alloc_++;
  }
  if (!demand && !predicted) return -1;
  int best = -1;
  for (int s = 0; s < limit_; ++s) {
    const int k = slots_[size_t(s)].key;
    if (k < 0) continue;
    const CacheEntry& e = entries_[size_t(k)];
    if (e.st != ExpertState::Ready || e.pins > 0 || e.wanted > 0) continue;
    if (!demand && e.reserved) continue;
    if (best < 0) {
      best = s;
      continue;
    }
    const CacheEntry& b = entries_[size_t(slots_[size_t(best)].key)];
    if (e.reserved != b.reserved ? !e.reserved : better_victim(e, b)) best = s;
  }
  if (best >= 0) {
    evict(best);
    ++counters_.evictions;
  }
  return best;
}

void RamCache::start_fill(int key, int slot) {
  CacheEntry& e = entries_[size_t(key)];
  e.st = ExpertState::Reading;
  e.converted = false;
  e.pins_here = 0;
  e.slot = slot;
  slots_[size_t(slot)].key = key;
}

void RamCache::fill_failed(int key) {
  const int slot = entries_[size_t(key)].slot;
  evict(slot);
  free_slots_.push_back(slot);
}

bool RamCache::reserve(int key) {
  CacheEntry& e = entries_[size_t(key)];
  if (reserved_ >= limit_ / 2 || e.reserved) return false;
  e.reserved = true;
  ++reserved_;
  return true;
}

void RamCache::unreserve(CacheEntry& e) {
  if (e.reserved) {
    e.reserved = false;
    --reserved_;
  }
}

// Slots at or over the lending limit: evicts the experts there that are not in use
// and frees the memory of every one that holds none (in use ones follow later).
void RamCache::trim() {
  const int end = std::max(n_alloc_, pop_slot_ + (pop_off_ > 0 ? 1 : 0));
  for (int s = limit_; s < end; ++s) {
    Slot& sl = slots_[size_t(s)];
    if (sl.key >= 0) {
      const CacheEntry& e = entries_[size_t(sl.key)];
      if (e.st != ExpertState::Ready || e.pins > 0 || e.wanted > 0) continue;
      evict(s);
    }
    if (sl.touched) platform::release_memory(slot_data(s), slot_bytes_);
    sl.touched = false;
  }
  while (n_alloc_ > limit_ && slots_[size_t(n_alloc_ - 1)].key < 0) --n_alloc_;
  if (pop_slot_ >= limit_) pop_slot_ = limit_, pop_off_ = 0;
}

RamCache::PopulateChunk RamCache::next_populate(int ahead, size_t max_len) {
  if (pop_slot_ < n_alloc_) pop_slot_ = n_alloc_, pop_off_ = 0;
  if (pop_slot_ >= std::min(limit_, n_alloc_ + ahead) || max_len == 0) return {};
  PopulateChunk c{pop_slot_, slot_data(pop_slot_) + pop_off_, std::min<size_t>(max_len, slot_bytes_ - pop_off_)};
  slots_[size_t(c.slot)].touched = true;
  pop_off_ += c.len;
  if (pop_off_ == slot_bytes_) ++pop_slot_, pop_off_ = 0;
  return c;
}

void RamCache::populated(const PopulateChunk& c) {
  if (c.slot < 0) return;
  Slot& sl = slots_[size_t(c.slot)];
  if (c.slot < limit_)
    sl.touched = true;  // a trim meanwhile may have released it before the pages came
  else if (sl.key < 0)
    platform::release_memory(c.data, c.len);  // lent while being committed
}

// Every slot under the limit that holds no expert.
void RamCache::rebuild_free_slots() {
  free_slots_.clear();
  for (int s = 0; s < std::min(n_alloc_, limit_); ++s)
    if (slots_[size_t(s)].key < 0) free_slots_.push_back(s);
}

bool RamCache::better_victim(const CacheEntry& a, const CacheEntry& b) const {
  if (policy_ == CachePolicy::LFU && a.freq != b.freq) return a.freq < b.freq;
  return a.last_use < b.last_use;
}

void RamCache::evict(int slot) {
  CacheEntry& e = entries_[size_t(slots_[size_t(slot)].key)];
  e.st = ExpertState::Absent;
  e.slot = -1;
  e.from_prefetch = false;
  e.predicted = false;
  unreserve(e);
  slots_[size_t(slot)].key = -1;
}

void RamCache::drop_unused() {
  for (int s = 0; s < int(slots_.size()); ++s) {
    const int key = slots_[size_t(s)].key;
    if (key < 0) continue;
    const CacheEntry& e = entries_[size_t(key)];
    if (e.st != ExpertState::Ready || e.pins > 0 || e.wanted > 0) continue;
    evict(s);
    free_slots_.push_back(s);
  }
}

// Lends whole slots, keeping at least a quarter of them (and at least 8).
uint64_t RamCache::lend(uint64_t bytes) {
  const int floor = std::min(n_slots_, std::max(8, (n_slots_ + 3) / 4));
  const uint64_t want = slot_bytes_ ? (bytes + slot_bytes_ - 1) / slot_bytes_ : 0;
  limit_ = std::max(floor, n_slots_ - int(std::min<uint64_t>(want, uint64_t(n_slots_))));
  trim();
  rebuild_free_slots();
  return uint64_t(n_slots_ - limit_) * slot_bytes_;
}

Result<uint64_t> RamCache::give_up(uint64_t bytes) {
  // First what the slots leave unused (a cache that holds every expert).
  const uint64_t from_spare = std::min(bytes, spare_);
  const uint64_t rest = bytes - from_spare;
  const uint64_t want = slot_bytes_ ? (rest + slot_bytes_ - 1) / slot_bytes_ : 0;
  if (want >= uint64_t(n_slots_))
    return make_error("more than the expert cache's {:.1f} MiB ({} experts) can give",
                      double(uint64_t(n_slots_) * slot_bytes_ + spare_) / 1048576.0, n_slots_);
  spare_ -= from_spare;
  n_slots_ -= int(want);
  limit_ = std::min(limit_, n_slots_);
  trim();
  rebuild_free_slots();
  return from_spare + want * slot_bytes_;
}

int RamCache::cached() const {
  int n = 0;
  for (const Slot& sl : slots_) n += sl.key >= 0 && entries_[size_t(sl.key)].st == ExpertState::Ready;
  return n;
}

}  // namespace deltafin
