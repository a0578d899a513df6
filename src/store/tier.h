// A tier below the RAM cache: where the streaming store reads the experts that are
// not in RAM. Two kinds: the local model file (store/file_tier.h) and the disk
// cache over an HTTP origin (store/cache_tier.h). A tier fills a RAM cache slot laid
// out by slot_layout() and says when it is done; it keeps no expert in RAM itself.
//
// Thread safety: read and promote may be called from any thread (the store calls
// them with its lock held, so they must not block and must not call back before
// returning).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/result.h"

namespace deltafin {

// One expert to read: its ExpertIndex key and the slot to fill (expert_slot_bytes).
struct TierRead {
  int key = -1;
  char* slot = nullptr;
};

class Tier {
 public:
  virtual ~Tier() = default;
  // `bytes`: what was transferred for the key (for the read rate).
  using Done = std::function<void(int key, const Status& status, uint64_t bytes)>;
  // Starts the reads and returns; calls done once per job from an I/O thread when
  // its bytes are in the slot (or failed). Jobs given together may share requests.
  // `demand`: a forward pass waits (else a prefetch, which must never delay a
  // demand read). Reads not started when the tier is destroyed are dropped.
  virtual void read(std::vector<TierRead> jobs, bool demand, Done done) = 0;
  // A prefetch of `key` that is in flight is now waited for: let it go on as a
  // demand read where the tier can tell the two apart. Never calls back.
  virtual void promote(int key) { (void)key; }
  // Reads bypass the page cache through O_DIRECT.
  virtual bool direct() const { return false; }
};

}  // namespace deltafin
