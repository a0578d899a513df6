// The streaming expert store: the routed experts stay below RAM (in the local model
// file, or in the disk cache over an HTTP origin) and are read on demand into a RAM
// cache of fixed-size expert slots. It is put together from small parts:
//
//   store/expert_index.h   (layer, expert) -> byte ranges, built once at load
//   store/ram_cache.h      slots, states, pins and claims, eviction, lent memory
//   store/tier.h           where misses are read from: store/file_tier.h (the
//                          model file, O_DIRECT, --verify) or store/cache_tier.h
//                          (store/disk_cache.h: the disk cache over the origin)
//   store/prefetch.h       next-layer prediction, auto mode, per-layer stats
//   store/usage_profile.h  usage counts across processes, warm-up at open
//
// acquire(layer, e), top to bottom (streaming_store.cpp: take()):
//   1. Look up: a hit or a miss for the stats and the eviction policy; claim it.
//   2. RAM hit (Ready)? Go to 5.
//   3. Else queue it at demand priority; the read scheduler gives it a RAM slot
//      (a free one, else a victim's by policy) and hands it to the tier.
//   4. The tier reads its gate/up/down bytes into the slot (the file tier checks
//      them under --verify; the disk cache checks its entries' checksums and
//      fetches from the origin what it lacks); wait until it lands.
//   5. Pin it and return views of its parts; release() drops the pin (the last pin
//      of an expert that has proved hot converts it to the kernels' layout first,
//      store/ram_cache.h).
// request(layer, union) does steps 1 and 3 for a whole MoE block at once, and
// acquire_any() then does 4 and 5 for whichever expert lands first, so the block
// computes the first experts while the rest are in flight. prefetch() and warm-up
// are step 3 at prefetch priority into free slots only, with no claim and no pin.
//
// Memory: the cache holds at most cache_bytes / slot_bytes experts; reads go
// straight into the slots (no bounce buffers) and bypass the page cache. Slots are
// allocated on first use. Callers together must not hold or wait for more experts
// at once than the cache has slots (an MoE block holds one).
//
// Thread safety: every public member may be called from any thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "format/model_file.h"
#include "store/expert_index.h"
#include "store/expert_store.h"
#include "store/prefetch.h"
#include "store/ram_cache.h"

namespace deltafin {

class ExpertCache;  // store/disk_cache.h

struct StreamingOptions {
  uint64_t cache_bytes = 0;  // RAM for cached experts
  int max_slots = 0;         // > 0: cache at most this many experts (tests)
  CachePolicy policy = CachePolicy::LFU;
  int io_threads = 16;       // reads in flight at most
  bool direct = true;        // O_DIRECT where the file system allows it
  std::string profile_path;  // usage profile; empty: none
  PrefetchMode prefetch = PrefetchMode::Auto;
  // Auto: a layer prefetches while at least this fraction of the experts a
  // prediction would read (predicted, not in RAM) is then routed to. 0.9 keeps
  // the bytes read within ~1.1x of what the misses require (issue 4's bound):
  // at 0.75 the benchmark read 1.12x and decoded slower than with prefetch off.
  double prefetch_min_useful = 0.9;
  bool warm = true;          // prefetch the profile's hottest experts at open
  // Local files: every read of an expert part is checked against an XXH3-64 of its
  // first read, and a difference is a read error naming the expert (the file changed
  // under a running process). Reads through `disk_cache` are checked by the disk cache.
  bool verify = false;
  // Misses go to this disk cache over an HTTP origin instead of to the model file;
  // not owned, must outlive the store. Null: read the model file.
  ExpertCache* disk_cache = nullptr;
  // The kernels' layout (model/linear.h expert_layout): experts that prove hot in the
  // RAM cache are converted to it in place (ram_cache.h). Default: the file's bytes.
  ExpertLayout layout;
};

// Counters since open (or reset_stats). A lookup is one expert asked for by one
// request() or unrequested acquire().
struct StoreStats {
  // RAM tier
  uint64_t hits = 0;           // lookups found in RAM
  uint64_t misses = 0;         // lookups that needed a read (or joined one in flight)
  uint64_t prefetch_hits = 0;  // hits on experts that a prefetch brought in
  uint64_t evictions = 0;
  // Disk tier
  uint64_t reads = 0;           // experts read on demand
  uint64_t prefetch_reads = 0;  // experts read by prefetch / warm-up
  uint64_t bytes_read = 0;      // bytes transferred (aligned requests)
  double read_busy_s = 0;       // wall time with at least one read in flight
  double wait_s = 0;            // time callers spent blocked waiting for an expert
  uint64_t converted = 0;       // hot experts converted to the kernels' layout in their slots
  // Shape
  uint64_t slot_bytes = 0;
  int slots = 0;
  int cached = 0;              // experts in RAM now
  bool direct = false;         // reads bypass the page cache through O_DIRECT
  PrefetchMode prefetch = PrefetchMode::Off;
  std::vector<LayerPrefetchStats> layers;  // per MoE layer, in layer order

  LayerPrefetchStats prefetch_total() const;  // summed over layers (`on`: any layer on)

  double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
  double read_gbps() const { return read_busy_s > 0 ? double(bytes_read) / read_busy_s / 1e9 : 0.0; }
  StoreStats operator-(const StoreStats& o) const;  // counters only
};
std::string format_stats(const StoreStats& s);  // one human-readable paragraph
// The next-layer prediction table, one line per layer; empty when prefetch is off.
std::string format_prefetch_stats(const StoreStats& s);

class StreamingExpertStore : public ExpertStore {
 public:
  virtual StoreStats stats() const = 0;
  virtual void reset_stats() = 0;
  // Evicts every expert not in use (cold-cache measurements).
  virtual void drop_cache() = 0;
  // Writes the usage profile now (also done by the destructor).
  virtual Status save_profile() = 0;
  // Lends up to `bytes` of the cache's memory (at most three quarters of it, in whole
  // slots) to the caller, e.g. for the activations of a long prompt's batch: the
  // cache then holds fewer experts, evicting and freeing those over the new limit as
  // soon as they are not in use. Returns the bytes lent. A second call replaces the
  // first; return_memory() (or lend_memory(0)) gives everything back.
  virtual uint64_t lend_memory(uint64_t bytes) = 0;
  void return_memory() { lend_memory(0); }
  // Takes `bytes` (in whole slots) out of the cache for good, e.g. for the states of
  // the sequences a server decodes at once, so that the budget bounds them too; what
  // is lent later is a share of what remains. An error (nothing changed) when no slot
  // would remain.
  virtual Result<uint64_t> reserve_memory(uint64_t bytes) = 0;
  virtual const ExpertIndex& index() const = 0;
};

Result<std::unique_ptr<StreamingExpertStore>> make_streaming_expert_store(
    ModelFile& file, const std::vector<ExpertLayerInfo>& layers, const StreamingOptions& opts);

// <base>/deltafin/profiles/<model name>-<size>.profile (base: Environment::profile_base).
std::string default_profile_path(const ModelFile& file, const std::string& base);

}  // namespace deltafin
