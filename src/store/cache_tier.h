// The disk cache over an HTTP origin as a tier (a remote model's experts): the
// store's misses go to ExpertCache::fetch (store/disk_cache.h) on the I/O threads,
// each batch as one call so that neighbouring experts share a range request. The
// disk cache checks its entries' checksums itself.
#pragma once
#include <memory>

#include "store/disk_cache.h"
#include "store/tier.h"

namespace deltafin {

// `cache` must outlive the tier. io_threads: batches in flight at most.
std::unique_ptr<Tier> make_cache_tier(ExpertCache& cache, int io_threads);

}  // namespace deltafin
