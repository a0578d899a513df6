#include "store/streaming_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "core/platform.h"
#include "store/cache_tier.h"
#include "store/file_tier.h"
#include "store/usage_profile.h"

namespace deltafin {

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
  d.converted -= o.converted;
  return d;
}

std::string format_stats(const StoreStats& s) {
  return fmt::format(
      "expert cache: {} slots of {:.2f} MiB, {} in use; RAM hits {} misses {} (hit rate {:.1f}%, {} from prefetch), "
      "evictions {}, {} hot experts converted to the kernels' layout\n"
      "expert reads: {} demand + {} prefetch, {:.1f} MiB, {:.2f} GiB/s while busy ({:.3f} s busy, {}), "
      "callers waited {:.3f} s\n",
      s.slots, s.slot_bytes / 1048576.0, s.cached, s.hits, s.misses, 100.0 * s.hit_rate(), s.prefetch_hits, s.evictions,
      s.converted, s.reads, s.prefetch_reads, s.bytes_read / 1048576.0, s.read_gbps() * 1e9 / 1073741824.0,
      s.read_busy_s, s.direct ? "O_DIRECT" : "buffered, pages dropped", s.wait_s);
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

class Streaming final : public StreamingExpertStore {
 public:
  Streaming(ModelFile& file, ExpertIndex ix, const StreamingOptions& o) : file_(file), ix_(std::move(ix)), opts_(o) {}

  Status open() {
    DF_TRY(cache_.init(ix_, opts_.cache_bytes, opts_.max_slots, opts_.policy, file_.path()));
    cache_.set_layout(opts_.layout);
    prefetch_.init(ix_, opts_.prefetch, opts_.prefetch_min_useful);
    tier_ = opts_.disk_cache ? make_cache_tier(*opts_.disk_cache, opts_.io_threads)
                             : make_file_tier(file_, ix_, opts_.io_threads, opts_.direct, opts_.verify);
    if (!opts_.profile_path.empty()) load_profile();
    populator_ = std::thread([this] { populate_loop(); });
    return {};
  }

  ~Streaming() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      closing_ = true;  // reads that finish now start no others
    }
    populate_cv_.notify_all();
    if (populator_.joinable()) populator_.join();
    tier_.reset();  // running reads finish; queued ones are dropped
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
    if (!cache_.at(*k).pinnable()) return false;
    *out = cache_.pin(*k);
    return true;
  }

  // The last pin of an expert that has proved hot converts it to the kernels' layout
  // first (ram_cache.h), holding the pin so that nothing evicts it meanwhile; callers
  // that want it wait, as for a read.
  void release(int layer, int expert) override {
    auto k = key_of(layer, expert);
    if (!k.ok()) return;
    std::unique_lock<std::mutex> lk(mu_);
    if (cache_.start_conversion(*k)) {
      lk.unlock();
      cache_.convert(*k);
      lk.lock();
      cache_.finish_conversion(*k);
      ++stats_.converted;
      cv_.notify_all();
    }
    if (cache_.unpin(*k)) pump();
  }

  void request(int layer, const int32_t* experts, int n) override {
    std::lock_guard<std::mutex> lk(mu_);
    prefetch_.resolve(cache_, layer, experts, n);
    for (int i = 0; i < n; ++i) {
      auto k = key_of(layer, experts[i]);
      if (!k.ok()) continue;  // acquire reports it
      ++cache_.at(*k).wanted;
      lookup(*k);
      enqueue(*k, /*demand=*/true);
    }
    pump();
  }

  bool wants_prediction(int layer) const override { return prefetch_.wants(layer); }

  void predict(int layer, const int32_t* experts, int n) override {
    if (!prefetch_.wants(layer)) return;
    std::vector<int> keys, read_ahead;
    for (int i = 0; i < n; ++i)
      if (auto k = key_of(layer, experts[i]); k.ok()) keys.push_back(*k);
    std::lock_guard<std::mutex> lk(mu_);
    prefetch_.predict(cache_, layer, keys, &read_ahead);
    for (int k : read_ahead) enqueue(k, /*demand=*/false);
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

  // The steps of acquire() (streaming_store.h): waits for the first of `experts` to
  // be in RAM and pins it. `requested`: the caller asked for all of them with
  // request() (each holds a claim, `wanted`); otherwise this call makes the claim.
  Result<ExpertWeights> take(int layer, const int32_t* experts, int n, int* which, bool requested) {
    std::vector<int> keys;
    keys.reserve(size_t(n));
    for (int i = 0; i < n; ++i) {
      DF_ASSIGN(const int k, key_of(layer, experts[i]));
      keys.push_back(k);
    }
    std::unique_lock<std::mutex> lk(mu_);
    // 1. Look up and claim (request() did it for a requested union).
    for (int k : keys) {
      CacheEntry& e = cache_.at(k);
      if (requested && e.wanted > 0) continue;  // (none left: request() was skipped)
      lookup(k);
      ++e.wanted;
      // 3. A miss is queued at demand priority (a hit or a read in flight: no-op).
      enqueue(k, /*demand=*/true);
    }
    pump();
    const Clock::time_point t0 = Clock::now();
    bool waited = false;
    for (;;) {
      bool in_flight = false;
      for (int i = 0; i < n; ++i) {
        const int key = keys[size_t(i)];
        CacheEntry& e = cache_.at(key);
        if (e.pinnable()) {
          // 2./5. In RAM: pin and return.
          *which = i;
          e.wanted = std::max(0, e.wanted - 1);
          if (waited) stats_.wait_s += seconds_since(t0);
          return cache_.pin(key);
        }
        if (e.st == ExpertState::Absent && !e.error.empty()) {
          // 4. The read failed: the caller gets the error and gives up the rest.
          *which = i;
          for (int k : keys) cache_.at(k).wanted = std::max(0, cache_.at(k).wanted - 1);
          pump();
          Error err{std::move(e.error)};
          e.error.clear();
          return err;
        }
        if (e.st == ExpertState::Absent) enqueue(key, /*demand=*/true);  // another caller took its error
        if (e.st == ExpertState::Reading && e.from_prefetch && !e.promoted) {
          e.promoted = true;  // a prefetch must not delay this demand: let it go at demand priority
          tier_->promote(key);
        }
        in_flight |= e.st == ExpertState::Reading || e.converting;
      }
      // Nothing of ours is being read (the cache is full of experts that other
      // callers are using or about to use): be first in line for the next free slot.
      if (!in_flight) make_urgent(keys[0]);
      if (cache_.at(keys[0]).pinnable()) continue;
      // 4. Wait for a read to land (read_done).
      waited = true;
      cv_.wait(lk);
    }
  }

  StoreStats stats() const override {
    std::lock_guard<std::mutex> lk(mu_);
    StoreStats s = stats_;
    const RamCache::Counters& c = cache_.counters();
    s.hits = c.hits;
    s.misses = c.misses;
    s.prefetch_hits = c.prefetch_hits;
    s.evictions = c.evictions;
    s.layers = prefetch_.stats();
    if (in_flight_ > 0) s.read_busy_s += seconds_since(busy_since_);
    s.slot_bytes = cache_.slot_bytes();
    s.slots = cache_.slots();
    s.cached = cache_.cached();
    s.direct = tier_->direct();
    s.prefetch = opts_.prefetch;
    return s;
  }

  void reset_stats() override {
    std::lock_guard<std::mutex> lk(mu_);
    stats_ = {};
    cache_.reset_counters();
    prefetch_.reset_stats();
    if (in_flight_ > 0) busy_since_ = Clock::now();
  }

  void drop_cache() override {
    std::lock_guard<std::mutex> lk(mu_);
    drop_prefetch_queue();
    cache_.drop_unused();
  }

  uint64_t lend_memory(uint64_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    return cache_.lend(bytes);
  }

  Result<uint64_t> reserve_memory(uint64_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    return cache_.give_up(bytes);
  }

  Status save_profile() override {
    if (opts_.profile_path.empty()) return {};
    std::vector<double> counts(size_t(cache_.n_keys()));
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (int k = 0; k < cache_.n_keys(); ++k) counts[size_t(k)] = cache_.at(k).profile + double(cache_.at(k).uses);
    }
    return save_usage_profile(opts_.profile_path, ix_, std::move(counts));
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
    prefetch_.on_lookup(cache_.at(key), key);
    cache_.lookup(key);
  }

  // The read scheduler: experts waiting for a slot and a read, demand before
  // prefetch. An entry is Pending while queued; stale queue entries are skipped.
  void enqueue(int key, bool demand) {
    CacheEntry& e = cache_.at(key);
    if (e.st == ExpertState::Absent) {
      e.st = ExpertState::Pending;
      e.demand = demand;
      (demand ? demand_q_ : prefetch_q_).push_back(key);
    } else if (e.st == ExpertState::Pending && demand && !e.demand) {
      e.demand = true;  // its prefetch queue entry goes stale
      demand_q_.push_back(key);
    }
  }

  // A caller blocks on `key` (Pending): put it first in line.
  void make_urgent(int key) {
    CacheEntry& e = cache_.at(key);
    if (e.st == ExpertState::Pending && !e.urgent) {
      e.urgent = true;
      e.demand = true;
      demand_q_.push_front(key);
    }
    pump();
  }

  // Cancels the prefetches that have not started.
  void drop_prefetch_queue() {
    for (int k : prefetch_q_)
      if (cache_.at(k).st == ExpertState::Pending && !cache_.at(k).demand) cache_.at(k).st = ExpertState::Absent;
    prefetch_q_.clear();
  }

  void pump() {
    if (closing_) return;
    pump_queues();
    flush_batches();
  }

  // Starts queued reads while slots can be found: demand before prefetch.
  void pump_queues() {
    for (;;) {
      int key = -1;
      bool demand = true;
      while (!demand_q_.empty()) {
        const CacheEntry& e = cache_.at(demand_q_.front());
        if (e.st == ExpertState::Pending && e.demand) {
          key = demand_q_.front();
          break;
        }
        demand_q_.pop_front();  // stale: started or served already
      }
      if (key < 0) {
        demand = false;
        while (!prefetch_q_.empty()) {
          const CacheEntry& e = cache_.at(prefetch_q_.front());
          if (e.st == ExpertState::Pending && !e.demand) {
            key = prefetch_q_.front();
            break;
          }
          prefetch_q_.pop_front();
        }
      }
      if (key < 0) return;
      const int slot = cache_.find_slot(demand, cache_.at(key).predicted);
      if (slot < 0) {
        if (demand) return;  // waits for a release
        // Prefetch takes free room only, and there is none left: drop the rest.
        drop_prefetch_queue();
        return;
      }
      (demand ? demand_q_ : prefetch_q_).pop_front();
      start_read(key, slot, demand);
    }
  }

  void start_read(int key, int slot, bool demand) {
    CacheEntry& e = cache_.at(key);
    cache_.start_fill(key, slot);
    e.urgent = false;
    e.promoted = false;
    e.error.clear();
    e.from_prefetch = !demand;
    ++(demand ? stats_.reads : stats_.prefetch_reads);
    prefetch_.on_read(e, key, demand);
    if (in_flight_++ == 0) busy_since_ = Clock::now();
    batch_[demand ? 1 : 0].push_back({key, cache_.slot_data(slot)});
    populate_cv_.notify_one();  // a slot was handed out: commit further ahead
  }

  // Commits the pages of the slots next in line (RamCache::next_populate) on a thread
  // of its own, up to 1 GiB ahead of those handed out, so that reads land in memory
  // that is already there. Ends where the system cannot (macOS, old kernels).
  void populate_loop() {
    constexpr size_t kChunk = size_t(8) << 20;
    const int ahead = int(std::max<uint64_t>(4, (uint64_t(1) << 30) / std::max<uint64_t>(1, cache_.slot_bytes())));
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      RamCache::PopulateChunk c;
      populate_cv_.wait(lk, [&] { return closing_ || (c = cache_.next_populate(ahead, kChunk)).slot >= 0; });
      if (closing_) return;
      lk.unlock();
      const bool ok = platform::populate_memory(c.data, c.len);
      lk.lock();
      cache_.populated(c);
      if (!ok) return;
    }
  }

  // Hands the reads started by pump_queues to the tier, one batch per priority, so
  // that it can coalesce neighbours into one request.
  void flush_batches() {
    for (int d = 0; d < 2; ++d) {
      if (batch_[d].empty()) continue;
      const bool demand = d == 1;
      tier_->read(std::move(batch_[d]), demand,
                  [this, demand](int key, const Status& s, uint64_t bytes) { read_done(key, s, bytes, demand); });
      batch_[d].clear();
    }
  }

  // A tier finished reading `key` (an I/O thread; takes mu_).
  void read_done(int key, const Status& s, uint64_t bytes, bool demand) {
    std::lock_guard<std::mutex> lk(mu_);
    CacheEntry& e = cache_.at(key);
    stats_.bytes_read += bytes;
    if (--in_flight_ == 0) stats_.read_busy_s += seconds_since(busy_since_);
    if (!s.ok() && e.error.empty()) e.error = s.error().message;
    if (e.error.empty()) {
      e.st = ExpertState::Ready;
    } else {
      if (!demand && e.wanted == 0) e.error.clear();  // a failed prefetch is forgotten
      cache_.fill_failed(key);
    }
    cv_.notify_all();
    pump();
  }

  // Seeds the LFU scores from the usage profile (the hottest expert starts as if
  // used 4 times) and warms the cache with the hottest experts that fit.
  void load_profile() {
    const std::vector<double> counts = load_usage_profile(opts_.profile_path, ix_);
    std::lock_guard<std::mutex> lk(mu_);
    double max_count = 0;
    std::vector<int> order;
    for (int k = 0; k < int(counts.size()); ++k) {
      if (!(counts[size_t(k)] > 0)) continue;
      cache_.at(k).profile = counts[size_t(k)];
      max_count = std::max(max_count, counts[size_t(k)]);
      order.push_back(k);
    }
    if (max_count <= 0) return;
    for (int k : order) cache_.at(k).freq = float(4.0 * cache_.at(k).profile / max_count);
    if (!opts_.warm) return;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return cache_.at(a).profile > cache_.at(b).profile; });
    order.resize(std::min(order.size(), size_t(cache_.slots())));
    for (int k : order) enqueue(k, /*demand=*/false);
    pump();
  }

  ModelFile& file_;
  ExpertIndex ix_;
  StreamingOptions opts_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // an expert landed or failed
  std::condition_variable populate_cv_;  // populate_loop: a slot was handed out, or closing
  std::thread populator_;
  RamCache cache_;
  NextLayerPrefetch prefetch_;
  std::deque<int> demand_q_, prefetch_q_;
  std::vector<TierRead> batch_[2];  // started, not yet handed to the tier: [prefetch, demand]
  int in_flight_ = 0;               // experts being read
  Clock::time_point busy_since_;
  StoreStats stats_;                // the read counters (the RAM cache and prefetch keep their own)
  bool closing_ = false;

  std::unique_ptr<Tier> tier_;  // last: its threads call back into the members above
};

}  // namespace

Result<std::unique_ptr<StreamingExpertStore>> make_streaming_expert_store(
    ModelFile& file, const std::vector<ExpertLayerInfo>& layers, const StreamingOptions& opts) {
  DF_ASSIGN(ExpertIndex ix, ExpertIndex::build(file, layers));
  auto s = std::make_unique<Streaming>(file, std::move(ix), opts);
  DF_TRY(s->open());
  return std::unique_ptr<StreamingExpertStore>(std::move(s));
}

std::string default_profile_path(const ModelFile& file, const std::string& base) {
  std::string name = file.path();
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
  return fmt::format("{}/deltafin/profiles/{}-{:x}.profile", base, name, file.total_bytes());
}

}  // namespace deltafin
