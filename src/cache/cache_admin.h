// The cache directory as a whole: what it holds, usage counts, eviction to a
// budget, verification and clearing. Layout under the root:
//   models/<name>-<hash>/meta.json          origin, pinned size and ETag per part
//   models/<name>-<hash>/core-N.{bin,journal,ok}   the core of part N (core_file.h)
//   models/<name>-<hash>/experts/<layer>-<expert>  one entry per expert (expert_entry.h)
//   models/<name>-<hash>/usage              how often each expert was fetched
//   tmp/                                    temp files, renamed into place when whole
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace deltafin {

struct CachedEntry {
  std::string path;
  int layer = -1, expert = -1;
  uint64_t bytes = 0;
  int64_t mtime = 0;
};

struct CachedModel {
  std::string dir, location, key;
  int parts = 0, core_complete_parts = 0;
  uint64_t model_bytes = 0;  // the model's size at the origin
  std::vector<uint64_t> part_sizes;  // per part, as meta.json pins them
  uint64_t core_bytes = 0;   // on disk
  uint64_t expert_bytes = 0;
  std::vector<CachedEntry> entries;
};

std::string models_dir(const std::string& root);
std::string tmp_dir(const std::string& root);

// Every model directory under `root` (an absent root holds none).
Result<std::vector<CachedModel>> scan_cache(const std::string& root);
uint64_t cache_bytes(const std::vector<CachedModel>& models);

// Usage counts per (layer, expert) in a model directory.
using UsageCounts = std::map<std::pair<int, int>, double>;
UsageCounts read_usage(const std::string& model_dir);
// Adds `deltas` to the model's counts (under a lock; counts halve when they grow large).
Status merge_usage(const std::string& model_dir, const std::string& tmp, const UsageCounts& deltas);

struct PruneReport {
  int removed = 0;
  uint64_t freed = 0, before = 0, after = 0;
};
// Evicts the least used experts (then the oldest) of every model until the cache
// holds at most `budget` bytes. Cores are never evicted.
Result<PruneReport> prune_cache(const std::string& root, uint64_t budget);

struct VerifyReport {
  int entries_ok = 0, entries_bad = 0, core_parts_ok = 0, core_chunks_bad = 0, temps_removed = 0;
  std::vector<std::string> problems;  // one line each
};
// Checks every entry and every core chunk of the models matching `filter` (all if
// empty; see model_matches); removes what is corrupt and dead writers' temp files.
Result<VerifyReport> verify_cache(const std::string& root, const std::string& filter);

// True if `filter` names the model: its location as given, its pinned key, or its directory name.
bool model_matches(const CachedModel& m, const std::string& filter);

// Removes the models matching `filter` (all if empty; the command line asks for --all
// before it passes an empty one). Returns the models removed, as they were.
Result<std::vector<CachedModel>> clear_cache(const std::string& root, const std::string& filter);

}  // namespace deltafin
