// Next-layer prefetch. An MoE block that has just finished layer L may apply the
// next layer's router to the hidden state and predict which experts its tokens will
// route to (ExpertStore::predict). This part records each prediction, reserves the
// predicted experts already in RAM, names the ones to read ahead, and scores the
// prediction when the layer's real request comes. In auto mode a layer prefetches
// only while enough of what it would read gets used. Per-layer counters say how
// well it predicts. No I/O and no lock: the store calls it with its lock held.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "store/expert_index.h"
#include "store/ram_cache.h"

namespace deltafin {

enum class PrefetchMode {
  Off,   // no prediction at all
  On,    // prefetch every prediction
  Auto,  // per layer: prefetch while enough of what it would read gets used
};
const char* prefetch_mode_name(PrefetchMode m);
bool parse_prefetch_mode(const std::string& s, PrefetchMode* out);  // "auto" | "on" | "off"

// Next-layer prediction of one MoE layer, counted at the layer's request().
struct LayerPrefetchStats {
  int layer = -1;
  uint64_t predictions = 0;       // requests that had a prediction
  uint64_t routed = 0;            // experts those requests asked for
  uint64_t routed_predicted = 0;  // ... of which predicted (recall = this / routed)
  uint64_t candidates = 0;        // predicted experts not in RAM when predicted (what a prefetch reads)
  uint64_t candidates_used = 0;   // ... of which routed (useful = this / candidates)
  uint64_t prefetch_reads = 0;    // predicted experts actually read ahead
  uint64_t prefetch_used = 0;     // ... and then looked up before eviction
  uint64_t prefetch_bytes = 0, prefetch_used_bytes = 0;
  bool on = false;                // prefetching now (auto may switch it)

  double recall() const { return routed ? double(routed_predicted) / double(routed) : 0.0; }
  double useful() const { return candidates ? double(candidates_used) / double(candidates) : 0.0; }
  double used_bytes_fraction() const {
    return prefetch_bytes ? double(prefetch_used_bytes) / double(prefetch_bytes) : 0.0;
  }
};

class NextLayerPrefetch {
 public:
  // min_useful: auto keeps a layer on while at least this fraction of its
  // candidates (predicted, not in RAM) is then routed to.
  void init(const ExpertIndex& ix, PrefetchMode mode, double min_useful);
  PrefetchMode mode() const { return mode_; }
  bool wants(int layer) const { return mode_ != PrefetchMode::Off && ix_->moe_index(layer) >= 0; }

  // Records a prediction of `layer`'s experts (keys) and replaces the layer's
  // pending one. Where the layer prefetches, the predicted experts are reserved until
  // the layer's request (another prediction's read does not evict them; a demand
  // read may) and those absent from RAM are marked predicted and appended to
  // *read_ahead, for the store to queue at prefetch priority.
  void predict(RamCache& c, int layer, const std::vector<int>& keys, std::vector<int>* read_ahead);
  // The layer's experts are known (its request): scores the pending prediction,
  // updates the auto switch, and drops the prediction.
  void resolve(RamCache& c, int layer, const int32_t* experts, int n);
  // Before the RAM cache's lookup of `key`: counts a read-ahead expert's use.
  void on_lookup(const CacheEntry& e, int key);
  // A read of `key` starts.
  void on_read(CacheEntry& e, int key, bool demand);

  std::vector<LayerPrefetchStats>& stats() { return stats_; }
  const std::vector<LayerPrefetchStats>& stats() const { return stats_; }
  void reset_stats();  // counters only; each layer stays on or off

 private:
  // The pending prediction of one MoE layer and the auto switch.
  struct LayerPred {
    bool pending = false;
    std::vector<int> keys;          // predicted
    std::vector<char> candidate;    // per key: not in RAM when predicted
    double cand_w = 0, used_w = 0;  // recent candidates and used ones (decayed)
  };
  void drop(RamCache& c, LayerPred& p);
  uint64_t read_bytes(int key) const;

  const ExpertIndex* ix_ = nullptr;
  PrefetchMode mode_ = PrefetchMode::Off;
  double min_useful_ = 0.9;
  std::vector<LayerPred> preds_;             // by MoE layer
  std::vector<LayerPrefetchStats> stats_;    // by MoE layer
};

}  // namespace deltafin
