// Core layers streamed when the core does not fit the memory budget.
//
// Issue 4: "if the core alone does not fit, stream core layers as well rather than
// refuse". The pager decides at load which layers' core tensors (attention, norms,
// routers, shared experts, latent projections: every blk.N.* tensor that is not a
// routed expert) stay resident: the first layers, as many as the budget allows. The
// rest are mapped read-only from the model file instead of read into owned memory,
// and paged per layer while tokens run: when layer L's MoE block starts, the next
// layers' core ranges are asked for ahead (MADV_WILLNEED) and the layers behind are
// given back (MADV_DONTNEED and their page-cache pages dropped), so at most a
// window of `window` streamed layers is in memory at once.
//
// Correctness never depends on the hints: a mapped page that is not in memory is
// read by the kernel when touched, so outputs equal the resident run's exactly.
//
// Only local files are mapped (a remote model's core is a local file in its disk
// cache, but at other offsets): a remote model whose core does not fit is refused.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/model_file.h"

namespace deltafin {

struct CorePagerStats {
  int layers = 0;           // layers with core tensors
  int streamed_layers = 0;  // of those, mapped and paged
  uint64_t resident_bytes = 0;  // core bytes read into owned memory
  uint64_t streamed_bytes = 0;  // core bytes mapped (all streamed layers)
  uint64_t window_bytes = 0;    // the most a window of streamed layers takes
  uint64_t pages_in = 0;        // layer windows asked for (each a WILLNEED of one layer)
};

class CorePager final : public TensorMapper {
 public:
  // Plans which layers stream so that the core takes at most `resident_budget`
  // bytes in memory (sizes from the file's tensor directory; routed experts,
  // blk.N.ffn_*_exps.*, are not core).
  static Result<std::unique_ptr<CorePager>> plan(ModelFile& file, uint64_t resident_budget, int window = 2);
  // The least resident_budget plan() accepts: the core outside the layers plus a
  // window of the largest layers.
  static uint64_t least_bytes(const ModelFile& file, int window = 2);
  ~CorePager() override;

  // TensorMapper: maps blk.N.* tensors of streamed layers, nullptr for the rest.
  Result<const void*> map(const std::string& name, const TensorRef& t) override;
  // Layer `layer`'s MoE block is starting (the layer loop calls it, ArchModel::page_core).
  void on_moe_layer(int layer);

  const CorePagerStats& stats() const { return stats_; }
  std::string describe() const;  // one line for the log

 private:
  struct Range {
    const char* addr = nullptr;
    size_t len = 0;
    int fd = -1;
    uint64_t file_offset = 0;
  };
  struct Mapping {
    void* base = nullptr;
    size_t len = 0;
  };
  CorePager() = default;
  void page_in(int layer);
  void page_out(int layer);
  ModelFile* file_ = nullptr;
  int window_ = 2;
  int first_streamed_ = 0;                  // layers >= this are streamed
  std::vector<uint64_t> layer_bytes_;       // core bytes per layer
  std::vector<std::vector<Range>> ranges_;  // per layer: mapped tensors
  std::vector<Mapping> mappings_;
  std::vector<int> fds_;                    // per shard, opened on first map
  std::vector<char> in_;                    // per layer: paged in now
  int last_layer_ = -1;
  CorePagerStats stats_;
};

}  // namespace deltafin
