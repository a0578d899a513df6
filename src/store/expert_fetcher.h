// Where the streaming store's misses go when the experts are not in a local model
// file: a tier below the RAM cache (the disk cache over an HTTP origin) that fills
// an expert's parts into the store's slot.
#pragma once
#include <functional>
#include <vector>

#include "core/result.h"
#include "store/expert_index.h"

namespace deltafin {

struct ExpertFetch {
  int key = -1;                       // ExpertIndex key
  char* dst[kExpertParts] = {};       // part p: slices(key).part[p].bytes bytes; null if the part is absent
};

class ExpertFetcher {
 public:
  virtual ~ExpertFetcher() = default;
  using Done = std::function<void(int key, const Status& status)>;
  // Fills every job's destinations and calls done once per job (from this thread
  // or another) before returning. Jobs are fetched together, so that neighbours can
  // share a request. `demand`: a forward pass waits (else a prefetch, which must
  // never delay a demand fetch).
  virtual void fetch(const std::vector<ExpertFetch>& jobs, bool demand, const Done& done) = 0;
  // A prefetch of `key` that is in flight is now waited for: let it go on as a
  // demand fetch. Thread-safe; never calls back.
  virtual void promote(int key) { (void)key; }
};

}  // namespace deltafin
