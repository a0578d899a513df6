#include "store/streaming_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>

#include <xxhash.h>

#include "core/aligned.h"
#include "core/log.h"
#include "io/direct_file.h"
#include "io/io_pool.h"

namespace deltafin {

const char* cache_policy_name(CachePolicy p) { return p == CachePolicy::LRU ? "lru" : "lfu"; }

bool parse_cache_policy(const std::string& s, CachePolicy* out) {
  if (s == "lfu") *out = CachePolicy::LFU;
  else if (s == "lru") *out = CachePolicy::LRU;
  else return false;
  return true;
}

const char* prefetch_mode_name(PrefetchMode m) {
  return m == PrefetchMode::Off ? "off" : m == PrefetchMode::On ? "on" : "auto";
}

bool parse_prefetch_mode(const std::string& s, PrefetchMode* out) {
  if (s == "auto") *out = PrefetchMode::Auto;
  else if (s == "on") *out = PrefetchMode::On;
  else if (s == "off") *out = PrefetchMode::Off;
  else return false;
  return true;
}

LayerPrefetchStats StoreStats::prefetch_total() const {
  LayerPrefetchStats t;
  for (const LayerPrefetchStats& l : layers) {
    t.predictions += l.predictions;
    t.routed += l.routed;
    t.routed_predicted += l.routed_predicted;
    t.candidates += l.candidates;
    t.candidates_used += l.candidates_used;
    t.prefetch_reads += l.prefetch_reads;
    t.prefetch_used += l.prefetch_used;
    t.prefetch_bytes += l.prefetch_bytes;
    t.prefetch_used_bytes += l.prefetch_used_bytes;
    t.on |= l.on;
  }
  return t;
}

StoreStats StoreStats::operator-(const StoreStats& o) const {
  StoreStats d = *this;
  for (size_t i = 0; i < d.layers.size() && i < o.layers.size(); ++i) {
    LayerPrefetchStats& a = d.layers[i];
    const LayerPrefetchStats& b = o.layers[i];
    a.predictions -= b.predictions;
    a.routed -= b.routed;
    a.routed_predicted -= b.routed_predicted;
    a.candidates -= b.candidates;
    a.candidates_used -= b.candidates_used;
    a.prefetch_reads -= b.prefetch_reads;
    a.prefetch_used -= b.prefetch_used;
    a.prefetch_bytes -= b.prefetch_bytes;
    a.prefetch_used_bytes -= b.prefetch_used_bytes;
  }
  d.hits -= o.hits;
  d.misses -= o.misses;
  d.prefetch_hits -= o.prefetch_hits;
  d.evictions -= o.evictions;
  d.reads -= o.reads;
  d.prefetch_reads -= o.prefetch_reads;
  d.bytes_read -= o.bytes_read;
  d.read_busy_s -= o.read_busy_s;
  d.wait_s -= o.wait_s;
  return d;
}

std::string format_stats(const StoreStats& s) {
  return fmt::format(
      "expert cache: {} slots of {:.2f} MiB, {} in use; RAM hits {} misses {} (hit rate {:.1f}%, {} from prefetch), "
      "evictions {}\n"
      "expert reads: {} demand + {} prefetch, {:.1f} MiB, {:.2f} GiB/s while busy ({:.3f} s busy, {}), "
      "callers waited {:.3f} s\n",
      s.slots, s.slot_bytes / 1048576.0, s.cached, s.hits, s.misses, 100.0 * s.hit_rate(), s.prefetch_hits, s.evictions,
      s.reads, s.prefetch_reads, s.bytes_read / 1048576.0, s.read_gbps() * 1e9 / 1073741824.0, s.read_busy_s,
      s.direct ? "O_DIRECT" : "buffered, pages dropped", s.wait_s);
}

std::string format_prefetch_stats(const StoreStats& s) {
  if (s.prefetch == PrefetchMode::Off || s.layers.empty()) return "";
  std::string out = fmt::format(
      "next-layer prefetch ({}): per layer, recall = routed experts that were predicted; useful = predicted "
      "experts not in RAM that were then routed; used = prefetched bytes that were used; now = whether the "
      "layer prefetches at the end (auto switches off where it does not pay)\n",
      prefetch_mode_name(s.prefetch));
  auto line = [&](const std::string& name, const LayerPrefetchStats& l) {
    out += fmt::format("  {:>6}  predictions {:>6}  recall {:5.1f}%  useful {:5.1f}%  prefetched {:>6} ({:8.1f} MiB, "
                       "used {:5.1f}%)  now {}\n",
                       name, l.predictions, 100.0 * l.recall(), 100.0 * l.useful(), l.prefetch_reads,
                       l.prefetch_bytes / 1048576.0, 100.0 * l.used_bytes_fraction(), l.on ? "on" : "off");
  };
  for (const LayerPrefetchStats& l : s.layers)
    if (l.predictions > 0 || l.prefetch_reads > 0) line(fmt::format("L{}", l.layer), l);
  line("all", s.prefetch_total());
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Where part p of an expert lands in its slot: the aligned superset of the slice,
// each part starting on a kDirectAlign boundary.
struct PartLayout {
  uint64_t file_off = 0, len = 0;  // the aligned request
  uint64_t slot_pos = 0;           // where the request lands in the slot
  uint64_t view_pos = 0;           // where the slice's first byte lands
};
uint64_t layout(const ExpertSlices& s, PartLayout out[kExpertParts]) {
  uint64_t pos = 0;
  for (int p = 0; p < kExpertParts; ++p) {
    const ExpertSlice& sl = s.part[p];
    out[p] = {};
    if (sl.bytes == 0) continue;
    out[p].file_off = align_down(sl.offset, kDirectAlign);
    out[p].len = align_up(sl.offset + sl.bytes, kDirectAlign) - out[p].file_off;
    out[p].slot_pos = pos;
    out[p].view_pos = pos + (sl.offset - out[p].file_off);
    pos += out[p].len;
  }
  return pos;
}

enum class St : uint8_t { Absent, Pending, Reading, Ready };

struct Entry {
  St st = St::Absent;
  bool demand = false;         // pending as a demand read (else prefetch)
  bool urgent = false;         // a blocked caller waits: first in line
  bool promoted = false;       // a prefetch read a caller now waits for: the fetcher was told
  bool from_prefetch = false;  // brought in by a prefetch and not looked up since
  bool predicted = false;      // read ahead by a next-layer prediction (may evict)
  bool reserved = false;       // in a pending prediction: a prediction's read never evicts it
  int slot = -1;
  int pins = 0;
  int wanted = 0;      // asked for (request or a waiting acquire), not yet taken
  int parts_left = 0;  // reads in flight
  float freq = 0;      // LFU score, halved every age period
  uint64_t last_use = 0;
  uint64_t uses = 0;   // lookups by this process (profile)
  double profile = 0;  // count loaded from the profile
  std::string error;   // a failed demand read, handed to the next acquire
};

struct Slot {
  AlignedBuffer buf;
  int key = -1;
};

// The pending next-layer prediction of one MoE layer and the auto switch.
struct LayerPred {
  bool pending = false;
  std::vector<int> keys;        // predicted
  std::vector<char> candidate;  // per key: not in RAM when predicted
  double cand_w = 0, used_w = 0;  // recent candidates and used ones (decayed)
};

class Streaming final : public StreamingExpertStore {
 public:
  Streaming(ModelFile& file, ExpertIndex ix, const StreamingOptions& o) : file_(file), ix_(std::move(ix)), opts_(o) {}

  Status open() {
    slot_bytes_ = expert_slot_bytes(ix_);
    uint64_t n = slot_bytes_ ? opts_.cache_bytes / slot_bytes_ : 0;
    if (opts_.max_slots > 0) n = uint64_t(opts_.max_slots);
    n = std::min<uint64_t>(n, uint64_t(ix_.n_keys()));
    if (n == 0 && ix_.n_keys() > 0)
      return make_error("{}: the expert cache ({:.1f} MiB) has no room for one expert ({:.1f} MiB); raise --mem",
                        file_.path(), opts_.cache_bytes / 1048576.0, slot_bytes_ / 1048576.0);
    n_slots_ = int(n);
    spare_ = opts_.cache_bytes > n * slot_bytes_ ? opts_.cache_bytes - n * slot_bytes_ : 0;
    limit_ = n_slots_;
    slots_.resize(size_t(n_slots_));
    entries_.resize(size_t(ix_.n_keys()));
    if (opts_.verify && !opts_.fetcher) part_hash_.assign(size_t(ix_.n_keys()) * kExpertParts, 0);
    age_period_ = std::max<uint64_t>(256, 8 * uint64_t(n_slots_));
    preds_.resize(size_t(ix_.n_moe_layers()));
    stats_.layers.resize(size_t(ix_.n_moe_layers()));
    for (int m = 0; m < ix_.n_moe_layers(); ++m) {
      stats_.layers[size_t(m)].layer = ix_.model_layer(m);
      stats_.layers[size_t(m)].on = opts_.prefetch != PrefetchMode::Off;
    }
    for (int s = 0; s < file_.shard_count() && !opts_.fetcher; ++s) {
      auto f = DirectFile::open(file_.source(s).name(), opts_.direct);
      // Not a local file (an HTTP origin later): read through the model's source.
      files_.push_back(f.ok() ? std::move(f).value() : nullptr);
    }
    io_ = std::make_unique<IoPool>(std::max(1, opts_.io_threads));
    if (!opts_.profile_path.empty()) load_profile();
    return {};
  }

  ~Streaming() override {
    io_.reset();  // running reads finish; queued ones are dropped
    if (!opts_.profile_path.empty()) {
      Status s = save_profile();
      if (!s.ok()) DF_LOG_WARN("{}", s.error().message);
    }
  }

  // A plain acquire is a request of one expert followed by taking it.
  Result<ExpertWeights> acquire(int layer, int expert) override {
    const int32_t e = expert;
    int which = 0;
    return take(layer, &e, 1, &which, /*requested=*/false);
  }

  Result<ExpertWeights> acquire_any(int layer, const int32_t* experts, int n, int* which) override {
    return take(layer, experts, n, which, /*requested=*/true);
  }

  // No lookup: a draft's use must not count as a hit or shape the eviction policy.
  bool try_acquire_resident(int layer, int expert, ExpertWeights* out) override {
    auto k = key_of(layer, expert);
    if (!k.ok()) return false;
    std::lock_guard<std::mutex> lk(mu_);
    if (entries_[size_t(*k)].st != St::Ready) return false;
    auto w = pin(*k, /*waited=*/false, Clock::now());
    if (!w.ok()) return false;
    *out = *w;
    return true;
  }

  void release(int layer, int expert) override {
    auto k = key_of(layer, expert);
    if (!k.ok()) return;
    std::lock_guard<std::mutex> lk(mu_);
    Entry& e = entries_[size_t(*k)];
    if (e.pins > 0 && --e.pins == 0) pump();
  }

  void request(int layer, const int32_t* experts, int n) override {
    std::lock_guard<std::mutex> lk(mu_);
    resolve_prediction(layer, experts, n);
    for (int i = 0; i < n; ++i) {
      auto k = key_of(layer, experts[i]);
      if (!k.ok()) continue;  // acquire reports it
      Entry& e = entries_[size_t(*k)];
      ++e.wanted;
      lookup(*k);
      enqueue(*k, /*demand=*/true);
    }
    pump();
  }

  bool wants_prediction(int layer) const override {
    return opts_.prefetch != PrefetchMode::Off && !resident_only() && ix_.moe_index(layer) >= 0;
  }

  // Records the prediction; where the layer's prefetch is on, reads the predicted
  // experts that are not in RAM at prefetch priority. Those already in RAM, and
  // those read ahead, are reserved until the layer's request: another prediction's
  // read does not evict them (a demand read may).
  void predict(int layer, const int32_t* experts, int n) override {
    const int moe = ix_.moe_index(layer);
    if (moe < 0 || opts_.prefetch == PrefetchMode::Off) return;
    std::lock_guard<std::mutex> lk(mu_);
    LayerPred& p = preds_[size_t(moe)];
    drop_prediction(p);
    const bool on = stats_.layers[size_t(moe)].on;
    for (int i = 0; i < n; ++i) {
      auto k = key_of(layer, experts[i]);
      if (!k.ok()) continue;
      Entry& e = entries_[size_t(*k)];
      const bool in_ram = e.st == St::Ready || e.st == St::Reading;
      p.keys.push_back(*k);
      p.candidate.push_back(!in_ram);
      if (on && reserved_ < limit_ / 2 && !e.reserved) {
        e.reserved = true;
        ++reserved_;
      }
      if (on && e.st == St::Absent) {
        e.predicted = true;
        enqueue(*k, /*demand=*/false);
      }
    }
    p.pending = true;
    pump();
  }

  void prefetch(int layer, const int32_t* experts, int n) override {
    std::lock_guard<std::mutex> lk(mu_);
    for (int i = 0; i < n; ++i) {
      auto k = key_of(layer, experts[i]);
      if (k.ok()) enqueue(*k, /*demand=*/false);
    }
    pump();
  }

  // Waits for the first of `experts` to be in RAM and pins it. `requested`: the
  // caller asked for all of them with request() (each holds a claim, `wanted`);
  // otherwise this call makes the claim.
  Result<ExpertWeights> take(int layer, const int32_t* experts, int n, int* which, bool requested) {
    std::vector<int> keys;
    keys.reserve(size_t(n));
    for (int i = 0; i < n; ++i) {
      DF_ASSIGN(const int k, key_of(layer, experts[i]));
      keys.push_back(k);
    }
    std::unique_lock<std::mutex> lk(mu_);
    for (int k : keys) {
      Entry& e = entries_[size_t(k)];
      if (requested && e.wanted > 0) continue;  // (none left: request() was skipped)
      lookup(k);
      ++e.wanted;
      enqueue(k, /*demand=*/true);
    }
    pump();
    const Clock::time_point t0 = Clock::now();
    bool waited = false;
    for (;;) {
      bool in_flight = false;
      for (int i = 0; i < n; ++i) {
        Entry& e = entries_[size_t(keys[size_t(i)])];
        if (e.st == St::Ready) {
          *which = i;
          e.wanted = std::max(0, e.wanted - 1);
          return pin(keys[size_t(i)], waited, t0);
        }
        if (e.st == St::Absent && !e.error.empty()) {
          // The read failed: the caller gets the error and gives up the rest.
          *which = i;
          for (int k : keys) entries_[size_t(k)].wanted = std::max(0, entries_[size_t(k)].wanted - 1);
          pump();
          return take_error(e);
        }
        if (e.st == St::Absent) enqueue(keys[size_t(i)], /*demand=*/true);  // another caller took its error
        if (e.st == St::Reading && e.from_prefetch && !e.promoted && opts_.fetcher) {
          e.promoted = true;  // a prefetch must not delay this demand: let it go at demand priority
          opts_.fetcher->promote(keys[size_t(i)]);
        }
        in_flight |= e.st == St::Reading;
      }
      // Nothing of ours is being read (the cache is full of experts that other
      // callers are using or about to use): be first in line for the next free slot.
      if (!in_flight) make_urgent(keys[0]);
      if (entries_[size_t(keys[0])].st == St::Ready) continue;
      waited = true;
      cv_.wait(lk);
    }
  }

  StoreStats stats() const override {
    std::lock_guard<std::mutex> lk(mu_);
    StoreStats s = stats_;
    if (in_flight_ > 0) s.read_busy_s += seconds_since(busy_since_);
    s.slot_bytes = slot_bytes_;
    s.slots = n_slots_;
    s.cached = 0;
    for (const Slot& sl : slots_) s.cached += sl.key >= 0 && entries_[size_t(sl.key)].st == St::Ready;
    s.direct = !files_.empty() && files_[0] && files_[0]->direct();
    s.prefetch = opts_.prefetch;
    return s;
  }

  void reset_stats() override {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<LayerPrefetchStats> layers = std::move(stats_.layers);
    stats_ = {};
    for (LayerPrefetchStats& l : layers) l = {.layer = l.layer, .on = l.on};
    stats_.layers = std::move(layers);
    if (in_flight_ > 0) busy_since_ = Clock::now();
  }

  void drop_cache() override {
    std::lock_guard<std::mutex> lk(mu_);
    for (int k : prefetch_q_)
      if (entries_[size_t(k)].st == St::Pending && !entries_[size_t(k)].demand) entries_[size_t(k)].st = St::Absent;
    prefetch_q_.clear();
    for (int s = 0; s < int(slots_.size()); ++s) {
      const int key = slots_[size_t(s)].key;
      if (key < 0) continue;
      const Entry& e = entries_[size_t(key)];
      if (e.st != St::Ready || e.pins > 0 || e.wanted > 0) continue;
      evict(s);
      free_slots_.push_back(s);
    }
  }

  uint64_t lend_memory(uint64_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    const int floor = std::min(n_slots_, std::max(8, (n_slots_ + 3) / 4));
    const uint64_t want = slot_bytes_ ? (bytes + slot_bytes_ - 1) / slot_bytes_ : 0;
    limit_ = std::max(floor, n_slots_ - int(std::min<uint64_t>(want, uint64_t(n_slots_))));
    trim();
    rebuild_free_slots();
    return uint64_t(n_slots_ - limit_) * slot_bytes_;
  }

  Result<uint64_t> reserve_memory(uint64_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
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

  Status save_profile() override {
    if (opts_.profile_path.empty()) return {};
    std::vector<double> counts(entries_.size());
    double max_count = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (size_t k = 0; k < entries_.size(); ++k) {
        counts[k] = entries_[k].profile + double(entries_[k].uses);
        max_count = std::max(max_count, counts[k]);
      }
    }
    // Keep the numbers small and let old habits fade: halve when they grow large.
    while (max_count > 1e9) {
      for (double& c : counts) c *= 0.5;
      max_count *= 0.5;
    }
    const std::string& path = opts_.profile_path;
    if (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) make_dirs(path.substr(0, slash));
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::trunc);
      if (!f) return make_error("cannot write the expert usage profile '{}'", tmp);
      f << "deltafin-expert-profile 1\n" << identity() << "\n";
      for (int k = 0; k < int(counts.size()); ++k) {
        if (counts[size_t(k)] <= 0) continue;
        const int moe = ix_.key_moe(k);
        f << ix_.model_layer(moe) << ' ' << (k - ix_.key(moe, 0)) << ' ' << counts[size_t(k)] << '\n';
      }
      if (!f) return make_error("cannot write the expert usage profile '{}'", tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      return make_error("cannot write the expert usage profile '{}'", path);
    return {};
  }

  const ExpertIndex& index() const override { return ix_; }

 private:
  Result<int> key_of(int layer, int expert) const {
    const int moe = ix_.moe_index(layer);
    if (moe < 0) return make_error("layer {} has no experts", layer);
    if (expert < 0 || expert >= ix_.n_expert(moe))
      return make_error("expert {} of layer {} is out of range ({} experts)", expert, layer, ix_.n_expert(moe));
    return ix_.key(moe, expert);
  }

  // --- everything below runs with mu_ held ---

  // One lookup of an expert: a hit or a miss, and a use for the eviction policy.
  void lookup(int key) {
    Entry& e = entries_[size_t(key)];
    if (e.predicted && e.from_prefetch && (e.st == St::Ready || e.st == St::Reading)) {
      LayerPrefetchStats& l = stats_.layers[size_t(ix_.key_moe(key))];
      ++l.prefetch_used;
      l.prefetch_used_bytes += slot_read_bytes(key);
    }
    unreserve(e);
    e.predicted = false;
    if (e.st == St::Ready) {
      ++stats_.hits;
      if (e.from_prefetch) ++stats_.prefetch_hits;
    } else {
      ++stats_.misses;
    }
    e.from_prefetch = false;
    e.freq += 1.0f;
    e.last_use = ++clock_;
    ++e.uses;
    if (clock_ % age_period_ == 0)
      for (Entry& x : entries_) x.freq *= 0.5f;
  }

  void unreserve(Entry& e) {
    if (e.reserved) {
      e.reserved = false;
      --reserved_;
    }
  }

  // Forgets a layer's pending prediction: its reservations end and its prefetches
  // that have not started are cancelled.
  void drop_prediction(LayerPred& p) {
    for (int k : p.keys) {
      Entry& e = entries_[size_t(k)];
      unreserve(e);
      if (e.st == St::Pending && !e.demand) e.st = St::Absent;  // its queue entry goes stale
      if (e.st == St::Absent) e.predicted = false;
    }
    p.keys.clear();
    p.candidate.clear();
    p.pending = false;
  }

  // The layer's experts are known: scores its pending prediction, updates the auto
  // switch, and drops the prediction.
  void resolve_prediction(int layer, const int32_t* experts, int n) {
    const int moe = ix_.moe_index(layer);
    if (moe < 0 || !preds_[size_t(moe)].pending) return;
    LayerPred& p = preds_[size_t(moe)];
    LayerPrefetchStats& l = stats_.layers[size_t(moe)];
    uint64_t hit = 0, cand = 0, cand_used = 0;
    for (size_t i = 0; i < p.keys.size(); ++i) {
      const int e = p.keys[i] - ix_.key(moe, 0);
      const bool routed = std::find(experts, experts + n, e) != experts + n;
      hit += routed;
      cand += p.candidate[i];
      cand_used += p.candidate[i] && routed;
    }
    ++l.predictions;
    l.routed += uint64_t(n);
    l.routed_predicted += hit;
    l.candidates += cand;
    l.candidates_used += cand_used;
    if (opts_.prefetch == PrefetchMode::Auto) {
      // The last ~20 predictions of this layer weigh (a prompt chunk's many
      // candidates do not mask the decode that follows for long); on while too few
      // candidates have been seen to judge.
      p.cand_w = 0.95 * p.cand_w + double(cand);
      p.used_w = 0.95 * p.used_w + double(cand_used);
      l.on = p.cand_w < 8 || p.used_w >= opts_.prefetch_min_useful * p.cand_w;
    }
    drop_prediction(p);
  }

  uint64_t slot_read_bytes(int key) const {
    PartLayout lay[kExpertParts];
    return layout(ix_.slices(key), lay);
  }

  void enqueue(int key, bool demand) {
    Entry& e = entries_[size_t(key)];
    if (e.st == St::Absent) {
      e.st = St::Pending;
      e.demand = demand;
      (demand ? demand_q_ : prefetch_q_).push_back(key);
    } else if (e.st == St::Pending && demand && !e.demand) {
      e.demand = true;  // its prefetch queue entry goes stale
      demand_q_.push_back(key);
    }
  }

  // A caller blocks on `key` (Pending): put it first in line.
  void make_urgent(int key) {
    Entry& e = entries_[size_t(key)];
    if (e.st == St::Pending && !e.urgent) {
      e.urgent = true;
      e.demand = true;
      demand_q_.push_front(key);
    }
    pump();
  }

  Result<ExpertWeights> take_error(Entry& e) {
    Error err{std::move(e.error)};
    e.error.clear();
    return err;
  }

  Result<ExpertWeights> pin(int key, bool waited, Clock::time_point t0) {
    Entry& e = entries_[size_t(key)];
    ++e.pins;
    if (waited) stats_.wait_s += seconds_since(t0);
    const ExpertSlices& sl = ix_.slices(key);
    PartLayout lay[kExpertParts];
    layout(sl, lay);
    const char* base = static_cast<const char*>(slots_[size_t(e.slot)].buf.data());
    ExpertWeights w;
    Tensor* out[kExpertParts] = {&w.gate, &w.up, &w.down};
    for (int p = 0; p < kExpertParts; ++p) {
      if (sl.part[p].bytes == 0) continue;
      *out[p] = sl.part[p].view;
      out[p]->data = base + lay[p].view_pos;
    }
    return w;
  }

  void pump() {
    pump_queues();
    flush_batches();
  }

  // Hands the experts started by pump_queues to the fetcher, one batch per priority,
  // so that it can coalesce neighbours into one request.
  void flush_batches() {
    for (int d = 0; d < 2; ++d) {
      if (batch_[d].empty()) continue;
      const bool demand = d == 1;
      io_->submit(demand ? IoPriority::Demand : IoPriority::Prefetch, [this, jobs = std::move(batch_[d]), demand] {
        opts_.fetcher->fetch(jobs, demand, [this, demand](int key, const Status& s) {
          part_done(key, s, ix_.slices(key).bytes(), demand);
        });
      });
      batch_[d].clear();
    }
  }

  // Starts queued reads while slots can be found: demand before prefetch.
  void pump_queues() {
    for (;;) {
      int key = -1;
      bool demand = true;
      while (!demand_q_.empty()) {
        const Entry& e = entries_[size_t(demand_q_.front())];
        if (e.st == St::Pending && e.demand) {
          key = demand_q_.front();
          break;
        }
        demand_q_.pop_front();  // stale: started or served already
      }
      if (key < 0) {
        demand = false;
        while (!prefetch_q_.empty()) {
          const Entry& e = entries_[size_t(prefetch_q_.front())];
          if (e.st == St::Pending && !e.demand) {
            key = prefetch_q_.front();
            break;
          }
          prefetch_q_.pop_front();
        }
      }
      if (key < 0) return;
      const int slot = find_slot(demand, entries_[size_t(key)].predicted);
      if (slot < 0) {
        if (demand) return;  // waits for a release
        // Prefetch takes free room only, and there is none left: drop the rest.
        for (int k : prefetch_q_)
          if (entries_[size_t(k)].st == St::Pending && !entries_[size_t(k)].demand) entries_[size_t(k)].st = St::Absent;
        prefetch_q_.clear();
        return;
      }
      (demand ? demand_q_ : prefetch_q_).pop_front();
      start_read(key, slot, demand);
    }
  }

  // A free slot, else (demand and predicted reads only) a victim's: never an expert
  // that is pinned, being read, or asked for and not yet taken (so nothing a caller
  // waits for is evicted before it gets it, and callers cannot evict each other's in
  // turn). A predicted read never evicts a reserved expert (one that a pending
  // prediction expects); a demand read does, but prefers others.
  int find_slot(bool demand, bool predicted) {
    if (n_alloc_ > limit_) trim();
    while (!free_slots_.empty()) {
      const int s = free_slots_.back();
      free_slots_.pop_back();
      if (s >= limit_) continue;  // lent (trim frees its memory)
      Slot& sl = slots_[size_t(s)];
      if (sl.buf.size() == 0) sl.buf = AlignedBuffer(slot_bytes_);
      return s;
    }
    if (n_alloc_ < limit_) {
      Slot& s = slots_[size_t(n_alloc_)];
      if (s.buf.size() == 0) s.buf = AlignedBuffer(slot_bytes_);
      return n_alloc_++;
    }
    if (!demand && !predicted) return -1;
    int best = -1;
    for (int s = 0; s < limit_; ++s) {
      const int k = slots_[size_t(s)].key;
      if (k < 0) continue;
      const Entry& e = entries_[size_t(k)];
      if (e.st != St::Ready || e.pins > 0 || e.wanted > 0) continue;
      if (!demand && e.reserved) continue;
      if (best < 0) {
        best = s;
        continue;
      }
      const Entry& b = entries_[size_t(slots_[size_t(best)].key)];
      if (e.reserved != b.reserved ? !e.reserved : better_victim(e, b)) best = s;
    }
    if (best >= 0) {
      evict(best);
      ++stats_.evictions;
    }
    return best;
  }

  // Slots at or over the lending limit: evicts the experts there that are not in use
  // and frees the memory of every one that holds none (in use ones follow later).
  void trim() {
    for (int s = limit_; s < n_alloc_; ++s) {
      Slot& sl = slots_[size_t(s)];
      if (sl.key >= 0) {
        const Entry& e = entries_[size_t(sl.key)];
        if (e.st != St::Ready || e.pins > 0 || e.wanted > 0) continue;
        evict(s);
      }
      sl.buf = AlignedBuffer();
    }
    while (n_alloc_ > limit_ && slots_[size_t(n_alloc_ - 1)].key < 0) --n_alloc_;
  }

  // Every slot under the limit that holds no expert.
  void rebuild_free_slots() {
    free_slots_.clear();
    for (int s = 0; s < std::min(n_alloc_, limit_); ++s)
      if (slots_[size_t(s)].key < 0) free_slots_.push_back(s);
  }

  bool better_victim(const Entry& a, const Entry& b) const {
    if (opts_.policy == CachePolicy::LFU && a.freq != b.freq) return a.freq < b.freq;
    return a.last_use < b.last_use;
  }

  void evict(int slot) {
    Entry& e = entries_[size_t(slots_[size_t(slot)].key)];
    e.st = St::Absent;
    e.slot = -1;
    e.from_prefetch = false;
    e.predicted = false;
    unreserve(e);
    slots_[size_t(slot)].key = -1;
  }

  void start_read(int key, int slot, bool demand) {
    Entry& e = entries_[size_t(key)];
    e.st = St::Reading;
    e.slot = slot;
    e.urgent = false;
    e.promoted = false;
    e.error.clear();
    e.from_prefetch = !demand;
    slots_[size_t(slot)].key = key;
    ++(demand ? stats_.reads : stats_.prefetch_reads);
    if (demand) e.predicted = false;
    if (!demand && e.predicted) {
      LayerPrefetchStats& l = stats_.layers[size_t(ix_.key_moe(key))];
      ++l.prefetch_reads;
      l.prefetch_bytes += slot_read_bytes(key);
    }
    const ExpertSlices& sl = ix_.slices(key);
    PartLayout lay[kExpertParts];
    layout(sl, lay);
    e.parts_left = 0;
    for (int p = 0; p < kExpertParts; ++p) e.parts_left += sl.part[p].bytes > 0;
    char* base = static_cast<char*>(slots_[size_t(slot)].buf.data());
    if (opts_.fetcher) {
      ExpertFetch job;
      job.key = key;
      for (int p = 0; p < kExpertParts; ++p)
        if (sl.part[p].bytes > 0) job.dst[p] = base + lay[p].view_pos;
      e.parts_left = 1;
      if (in_flight_++ == 0) busy_since_ = Clock::now();
      batch_[demand ? 1 : 0].push_back(job);
      return;
    }
    for (int p = 0; p < kExpertParts; ++p) {
      if (sl.part[p].bytes == 0) continue;
      if (in_flight_++ == 0) busy_since_ = Clock::now();
      const ExpertSlice part = sl.part[p];
      const PartLayout pl = lay[p];
      io_->submit(demand ? IoPriority::Demand : IoPriority::Prefetch, [this, key, p, part, pl, base, demand] {
        DirectFile* f = files_[size_t(part.shard)].get();
        Status s = f ? f->read_aligned(pl.file_off, base + pl.slot_pos, pl.len)
                     : file_.source(part.shard).read_at(part.offset, base + pl.view_pos, part.bytes);
        if (s.ok() && opts_.verify) s = verify_part(key, p, base + pl.view_pos, part.bytes);
        part_done(key, s, f ? pl.len : part.bytes, demand);
      });
    }
  }

  // --verify: a part's XXH3-64 against the one of its first read by this store.
  // Called on the I/O thread that read it; only one read of a key is in flight, and
  // mu_ orders one read's record before the next read of the same key.
  Status verify_part(int key, int p, const void* data, uint64_t bytes) {
    const uint64_t h = XXH3_64bits(data, size_t(bytes)) | 1;  // 0: not read yet
    uint64_t& first = part_hash_[size_t(key) * kExpertParts + size_t(p)];
    if (first == 0) first = h;
    if (first == h) return {};
    const int moe = ix_.key_moe(key);
    static const char* const names[kExpertParts] = {"gate", "up", "down"};
    return make_error("{}: expert {} of layer {} ({} part, {} bytes at offset {}) is not what it was when first "
                      "read: the model file changed while deltafin ran (--verify)",
                      file_.source(ix_.slices(key).part[p].shard).name(), key - ix_.key(moe, 0),
                      ix_.model_layer(moe), names[p], bytes, ix_.slices(key).part[p].offset);
  }

  // An I/O thread finished one part of `key`.
  void part_done(int key, const Status& s, uint64_t bytes, bool demand) {
    std::lock_guard<std::mutex> lk(mu_);
    Entry& e = entries_[size_t(key)];
    if (s.ok()) stats_.bytes_read += bytes;
    if (--in_flight_ == 0) stats_.read_busy_s += seconds_since(busy_since_);
    if (!s.ok() && e.error.empty()) e.error = s.error().message;
    if (--e.parts_left > 0) return;
    if (e.error.empty()) {
      e.st = St::Ready;
    } else {
      if (!demand && e.wanted == 0) e.error.clear();  // a failed prefetch is forgotten
      const int slot = e.slot;
      evict(slot);
      free_slots_.push_back(slot);
    }
    cv_.notify_all();
    pump();
  }

  // --- profile ---

  std::string identity() const {
    return fmt::format("model {} {} {}", ix_.n_moe_layers(), ix_.n_keys(), ix_.expert_bytes());
  }

  void load_profile() {
    std::ifstream f(opts_.profile_path);
    if (!f) return;  // first run
    std::string magic, id;
    std::getline(f, magic);
    std::getline(f, id);
    if (magic != "deltafin-expert-profile 1" || id != identity()) {
      DF_LOG_WARN("ignoring the expert usage profile '{}': it was written for another model", opts_.profile_path);
      return;
    }
    int layer = 0, expert = 0;
    double count = 0, max_count = 0;
    std::lock_guard<std::mutex> lk(mu_);
    while (f >> layer >> expert >> count) {
      auto k = key_of(layer, expert);
      if (!k.ok() || !(count > 0)) continue;
      entries_[size_t(*k)].profile = count;
      max_count = std::max(max_count, count);
    }
    if (max_count <= 0) return;
    // Seed the LFU scores (the hottest expert starts as if used 4 times) and warm
    // the cache with the hottest experts that fit.
    std::vector<int> order;
    for (int k = 0; k < int(entries_.size()); ++k) {
      Entry& e = entries_[size_t(k)];
      if (e.profile <= 0) continue;
      e.freq = float(4.0 * e.profile / max_count);
      order.push_back(k);
    }
    if (!opts_.warm) return;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return entries_[size_t(a)].profile > entries_[size_t(b)].profile; });
    order.resize(std::min(order.size(), size_t(n_slots_)));
    for (int k : order) enqueue(k, /*demand=*/false);
    pump();
  }

  static void make_dirs(const std::string& dir) {
    for (size_t i = 1; i <= dir.size(); ++i)
      if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
  }

  ModelFile& file_;
  ExpertIndex ix_;
  StreamingOptions opts_;
  uint64_t slot_bytes_ = 0;
  int n_slots_ = 0, n_alloc_ = 0;
  int limit_ = 0;  // slots the cache may use now (< n_slots_ while memory is lent)
  uint64_t spare_ = 0;  // budget beyond the slots (all experts fit), not reserved yet
  std::vector<std::unique_ptr<DirectFile>> files_;  // per shard; null: read through file_

  mutable std::mutex mu_;
  std::condition_variable cv_;  // an expert landed or failed
  std::vector<Entry> entries_;  // by key
  std::vector<uint64_t> part_hash_;  // --verify: per key and part, XXH3-64 | 1 of its first read (0: none yet)
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;
  std::deque<int> demand_q_, prefetch_q_;
  std::vector<LayerPred> preds_;  // by MoE layer
  int reserved_ = 0;              // entries with `reserved` set
  std::vector<ExpertFetch> batch_[2];  // started, not yet handed to the fetcher: [prefetch, demand]
  uint64_t clock_ = 0, age_period_ = 256;
  int in_flight_ = 0;
  Clock::time_point busy_since_;
  StoreStats stats_;

  std::unique_ptr<IoPool> io_;  // last: its threads call back into the members above
};

}  // namespace

uint64_t expert_slot_bytes(const ExpertIndex& ix) {
  uint64_t m = 0;
  for (int k = 0; k < ix.n_keys(); ++k) {
    PartLayout lay[kExpertParts];
    m = std::max(m, layout(ix.slices(k), lay));
  }
  return m;
}

Result<std::unique_ptr<StreamingExpertStore>> make_streaming_expert_store(
    ModelFile& file, const std::vector<ExpertLayerInfo>& layers, const StreamingOptions& opts) {
  DF_ASSIGN(ExpertIndex ix, ExpertIndex::build(file, layers));
  auto s = std::make_unique<Streaming>(file, std::move(ix), opts);
  DF_TRY(s->open());
  return std::unique_ptr<StreamingExpertStore>(std::move(s));
}

uint64_t default_mem_budget() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  unsigned long long kb = 0;
  while (std::getline(f, line))
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) return uint64_t(kb) * 1024 / 10 * 8;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : (uint64_t(4) << 30);
}

std::string default_profile_path(const ModelFile& file, const std::string& base) {
  std::string name = file.path();
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
  return fmt::format("{}/deltafin/profiles/{}-{:x}.profile", base, name, file.total_bytes());
}

}  // namespace deltafin
