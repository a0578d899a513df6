#include "store/prefetch.h"

#include <algorithm>

#include "store/slot_layout.h"

namespace deltafin {

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

void NextLayerPrefetch::init(const ExpertIndex& ix, PrefetchMode mode, double min_useful) {
  ix_ = &ix;
  mode_ = mode;
  min_useful_ = min_useful;
  preds_.assign(size_t(ix.n_moe_layers()), {});
  stats_.assign(size_t(ix.n_moe_layers()), {});
  for (int m = 0; m < ix.n_moe_layers(); ++m) {
    stats_[size_t(m)].layer = ix.model_layer(m);
    stats_[size_t(m)].on = mode != PrefetchMode::Off;
  }
}

void NextLayerPrefetch::reset_stats() {
  for (LayerPrefetchStats& l : stats_) l = {.layer = l.layer, .on = l.on};
}

uint64_t NextLayerPrefetch::read_bytes(int key) const {
  PartLayout lay[kExpertParts];
  return slot_layout(ix_->slices(key), lay);
}

void NextLayerPrefetch::predict(RamCache& c, int layer, const std::vector<int>& keys, std::vector<int>* read_ahead) {
  const int moe = ix_->moe_index(layer);
  if (moe < 0 || mode_ == PrefetchMode::Off) return;
  LayerPred& p = preds_[size_t(moe)];
  drop(c, p);
  const bool on = stats_[size_t(moe)].on;
  for (int k : keys) {
    CacheEntry& e = c.at(k);
    const bool in_ram = e.st == ExpertState::Ready || e.st == ExpertState::Reading;
    p.keys.push_back(k);
    p.candidate.push_back(!in_ram);
    if (on) c.reserve(k);
    if (on && e.st == ExpertState::Absent) {
      e.predicted = true;
      read_ahead->push_back(k);
    }
  }
  p.pending = true;
}

// Forgets a layer's pending prediction: its reservations end and its read-aheads
// that have not started are cancelled.
void NextLayerPrefetch::drop(RamCache& c, LayerPred& p) {
  for (int k : p.keys) {
    CacheEntry& e = c.at(k);
    c.unreserve(e);
    if (e.st == ExpertState::Pending && !e.demand) e.st = ExpertState::Absent;  // its queue entry goes stale
    if (e.st == ExpertState::Absent) e.predicted = false;
  }
  p.keys.clear();
  p.candidate.clear();
  p.pending = false;
}

void NextLayerPrefetch::resolve(RamCache& c, int layer, const int32_t* experts, int n) {
  const int moe = ix_->moe_index(layer);
  if (moe < 0 || !preds_[size_t(moe)].pending) return;
  LayerPred& p = preds_[size_t(moe)];
  LayerPrefetchStats& l = stats_[size_t(moe)];
  uint64_t hit = 0, cand = 0, cand_used = 0;
  for (size_t i = 0; i < p.keys.size(); ++i) {
    const int e = p.keys[i] - ix_->key(moe, 0);
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
  if (mode_ == PrefetchMode::Auto) {
    // The last ~20 predictions of this layer weigh (a prompt chunk's many
    // candidates do not mask the decode that follows for long); on while too few
    // candidates have been seen to judge.
    p.cand_w = 0.95 * p.cand_w + double(cand);
    p.used_w = 0.95 * p.used_w + double(cand_used);
    l.on = p.cand_w < 8 || p.used_w >= min_useful_ * p.cand_w;
  }
  drop(c, p);
}

void NextLayerPrefetch::on_lookup(const CacheEntry& e, int key) {
  if (e.predicted && e.from_prefetch && (e.st == ExpertState::Ready || e.st == ExpertState::Reading)) {
    LayerPrefetchStats& l = stats_[size_t(ix_->key_moe(key))];
    ++l.prefetch_used;
    l.prefetch_used_bytes += read_bytes(key);
  }
}

void NextLayerPrefetch::on_read(CacheEntry& e, int key, bool demand) {
  if (demand) e.predicted = false;
  if (!demand && e.predicted) {
    LayerPrefetchStats& l = stats_[size_t(ix_->key_moe(key))];
    ++l.prefetch_reads;
    l.prefetch_bytes += read_bytes(key);
  }
}

}  // namespace deltafin
