// The disk cache over the HTTP origin, the tier under a remote model's RAM cache
// (store/cache_tier.h hands it the store's misses): one file per (layer, expert) in
// the model's cache directory, filled from the origin on a miss. The on-disk entry
// format, the directory layout and its administration live in cache/.
//
//   fetch(jobs): each expert on disk (checksum verified) -> copied into the slot.
//   A corrupt entry is removed and fetched again. The missing ones are claimed
//   (threads of this process by a set, other processes by a per-expert byte-range
//   lock, so an expert is fetched once however many want it), experts whose bytes
//   continue each other's at the origin share range requests (adjacent experts of a
//   GGUF layer: one request per part, gate/up/down; an expert whose tensors lie
//   together in a safetensors shard: one request, neighbours in the file joined), the
//   bytes are copied into the slots (the caller may compute), then written as
//   entries (temp file, fsync, rename) and the claims dropped. A process that
//   finds an expert claimed by another waits for it and reads the entry.
//
// Offline (opts.offline_reason set): nothing is fetched; an expert not on disk
// fails with an error naming it, its entry path and why the origin is not used.
//
// Size: before a write that would take the cache directory over its budget, the
// least used experts (counts kept per model in `usage`, merged across processes)
// are evicted, never a core; a write that finds the disk full (ENOSPC) before the
// budget is reached evicts more and is tried once again. A failed write is
// reported once and the expert is still served from memory.
//
// Thread safety: every public member may be called from any thread.
#pragma once
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cache/fs.h"
#include "io/http_client.h"
#include "store/expert_index.h"

namespace deltafin {

// One expert to fetch into memory.
struct ExpertFetch {
  int key = -1;                  // ExpertIndex key
  char* dst[kExpertParts] = {};  // part p: slices(key).part[p].bytes bytes; null if the part is absent
};

// One byte fragment of a part cut into fragments (format/fragments.h).
struct OriginFragment {
  std::string url;
  HttpIdentity id;
  uint64_t start = 0;  // where its bytes begin in the part
};

// One part (file) of the model at the origin; one GGUF published as byte fragments
// is one part whose bytes lie in `fragments` (url, id: the first's, and the whole's
// size).
struct OriginPart {
  std::string url;
  HttpIdentity id;
  std::vector<OriginFragment> fragments;  // empty: the one file at url
};

// HttpClient::get_range on a part: a range that crosses fragments is fetched from
// each (one request per fragment, done once when all have landed, with the first
// error). The part must outlive the request.
void get_origin_range(HttpClient& client, const OriginPart& part, uint64_t offset, uint64_t n, char* dst,
                      IoPriority prio, HttpClient::Done done, std::shared_ptr<const std::atomic<bool>> urgent = nullptr);

// A slice's bytes at the origin: as many bytes at (part, offset), the same bytes when
// `unpack` is null, else unpack(fetched, slice) puts them in the slice's order (a
// compressed-tensors MXFP4 expert: its codes and scales side by side -> MXFP4 blocks).
struct OriginSpan {
  int part = 0;
  uint64_t offset = 0;
  std::function<void(const char* src, char* dst)> unpack;
};

struct ExpertCacheOptions {
  uint64_t budget = 0;                      // bytes for the whole cache directory; 0: no limit
  uint64_t max_request = uint64_t(64) << 20;  // a coalesced request at most
  std::string model;                        // the location, for messages
  std::string offline_reason;               // non-empty: never fetch; a missing expert is an error saying this
  // Where a slice's bytes lie at the origin when the model file is a view over other
  // files (a Hugging Face folder's safetensors shards). Null: the slice's own shard
  // and offset.
  std::function<Result<OriginSpan>(const ExpertSlice&)> locate;
};

struct ExpertCacheStats {
  uint64_t disk_hits = 0;      // experts served from disk
  uint64_t fetched = 0;        // experts fetched from the origin
  uint64_t requests = 0;       // range requests for them
  uint64_t fetched_bytes = 0;
  uint64_t waited = 0;         // experts another process was fetching
  uint64_t corrupt = 0;        // entries dropped for a bad checksum
  uint64_t write_errors = 0;
  uint64_t evicted = 0;
};

class ExpertCache final {
 public:
  // `root`: the cache directory; `model_dir`: this model's directory in it.
  static Result<std::unique_ptr<ExpertCache>> open(const std::string& root, const std::string& model_dir,
                                                   const ExpertIndex& ix, std::shared_ptr<HttpClient> client,
                                                   std::vector<OriginPart> parts, ExpertCacheOptions opts);
  ~ExpertCache();  // saves the usage counts

  using Done = std::function<void(int key, const Status& status)>;
  // Fills every job's destinations and calls done once per job (from this thread
  // or another) before returning. Jobs are fetched together, so that neighbours can
  // share a request. `demand`: a forward pass waits (else a prefetch, which must
  // never delay a demand fetch).
  void fetch(const std::vector<ExpertFetch>& jobs, bool demand, const Done& done);
  // A prefetch of `key` that is in flight is now waited for: let it go on as a
  // demand fetch. Thread-safe; never calls back.
  void promote(int key);

  // Makes sure `keys` are on disk (pull, warm) at prefetch priority with at most
  // `window` bytes in flight; progress(bytes) as experts land (or are found).
  Status fill(const std::vector<int>& keys, uint64_t window, const std::function<void(uint64_t)>& progress);

  bool on_disk(int key) const;
  std::string entry_path(int key) const;
  ExpertCacheStats stats() const;
  Status save_usage();
  const ExpertIndex& index() const { return ix_; }

 private:
  struct Want {
    int key;
    char* const* dst;  // null: disk only
  };
  ExpertCache(const ExpertIndex& ix) : ix_(ix) {}
  bool from_disk(int key, char* const* dst);
  void fetch_missing(std::vector<Want> wants, bool demand, const Done& done);
  void fetch_runs(std::vector<Want> wants, bool demand, const Done& done);
  struct Extent {
    int part = 0;
    uint64_t offset = 0, bytes = 0;
  };
  void release(int key);  // drops this process's claim and the cross-process lock
  // warn: report the first failure (the expert is in use from memory); else the
  // caller reports it.
  Status store_entry(int key, const char* const parts[kExpertParts], bool warn);
  // Evicts so that `need` more bytes fit the budget; `disk_full`: also below what
  // is there now (the disk is full before the budget is).
  void make_room(uint64_t need, bool disk_full);

  const ExpertIndex& ix_;
  std::string root_, dir_, tmp_;
  std::shared_ptr<HttpClient> client_;
  std::vector<OriginPart> parts_;
  std::vector<std::array<Extent, kExpertParts>> origin_;  // by key: each part's bytes at the origin
  // by key, where a part's origin bytes are reordered (OriginSpan::unpack); mostly empty
  std::map<int, std::array<std::function<void(const char*, char*)>, kExpertParts>> unpack_;
  ExpertCacheOptions opts_;
  std::unique_ptr<KeyLocks> locks_;

  mutable std::mutex mu_;
  std::condition_variable released_;
  std::set<int> claimed_;            // being fetched by a thread of this process
  std::map<int, std::shared_ptr<std::atomic<bool>>> urgent_;  // prefetched keys in flight: their run's flag
  std::set<int> promoted_early_;  // promoted before their prefetch reached fetch_runs
  std::map<int, double> new_uses_;   // uses since the last save, by key
  ExpertCacheStats st_;
  bool warned_write_ = false;
  uint64_t usage_estimate_ = 0;      // bytes in the cache directory, last scanned + added since
};

}  // namespace deltafin
