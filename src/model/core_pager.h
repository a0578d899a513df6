// Core layers streamed when the core does not fit the memory budget.
//
// Issue 4: "if the core alone does not fit, stream core layers as well rather than
// refuse". The pager decides at load which layers' core tensors (attention, norms,
// routers, shared experts, latent projections: every blk.N.* tensor that is not a
// routed expert) stay resident: the first layers, as many as the budget allows with
// the buffers sized for the others (a large dense first layer stays rather than
// sizing every buffer). The others stream: a few layer buffers of the pager's own (window + 1, allocated and
// committed once) take turns, layer L always in buffer L mod (window + 1), so the
// tensor views the model binds at load stay valid. The layer loop says when a layer
// starts (enter); the pager waits until that layer's bytes are in its buffer, then
// reads the next `window` layers into theirs, in large uncached reads on threads of
// its own (O_DIRECT: the page cache neither fills nor has to be faulted in), so that
// reading the next layers overlaps computing this one.
//
// A part that is not a plain local file (a Hugging Face folder's GGUF view, byte
// fragments, a remote model's disk cache) is read through the model's own source,
// tensor by tensor. At load, a mapped tensor smaller than 1 MiB (norms, biases:
// what architectures copy out at load) is read into its buffer at once; the larger
// ones are read when their layer first runs.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "format/model_file.h"

namespace deltafin {

class DirectFile;
class IoPool;

struct CorePagerStats {
  int layers = 0;           // layers with core tensors
  int streamed_layers = 0;  // of those, streamed through the layer buffers
  uint64_t resident_bytes = 0;  // core bytes read into owned memory
  uint64_t streamed_bytes = 0;  // core bytes of the streamed layers
  uint64_t reread_bytes = 0;    // of streamed_bytes, read again each token (layers sharing a buffer)
  uint64_t window_bytes = 0;    // the layer buffers, all together
  uint64_t pages_in = 0;        // layer reads started
  uint64_t bytes_read = 0;      // by those reads (aligned requests)
  double wait_s = 0;            // the layer loop waited for a layer's bytes
};

class CorePager final : public TensorMapper {
 public:
  // Plans which layers stream so that the core takes at most `resident_budget`
  // bytes in memory (sizes from the file's tensor directory; routed experts,
  // blk.N.ffn_*_exps.*, are not core). local_files: per part, a local file holding
  // its core bytes at the part's own offsets (a remote model's disk cache); empty:
  // the part's own path. Allocates nothing until start().
  static Result<std::unique_ptr<CorePager>> plan(ModelFile& file, uint64_t resident_budget,
                                                 const std::vector<std::string>& local_files = {}, int window = 2,
                                                 int io_threads = 8);
  // The least resident_budget plan() accepts: the core outside the layers plus the
  // layer buffers (window + 1 of the largest layers).
  static uint64_t least_bytes(const ModelFile& file, int window = 2);
  ~CorePager() override;

  // Allocates and commits the layer buffers and starts the read threads (the
  // first map() does it when not done before).
  Status start();
  // TensorMapper: a view into the layer buffer for blk.N.* tensors of streamed
  // layers, nullptr (read into owned memory) for the rest.
  Result<const void*> map(const std::string& name, const TensorRef& t) override;
  // Layer `layer` is about to run (the one before it is done): waits until its
  // core is in its buffer, then starts reading the layers expected next (the order
  // layers ran in before, else the next ones, wrapping to the next token's). An
  // error names the read that failed.
  Status enter(int layer);
  // Layer `layer`'s core is needed while the current one still runs (the next
  // layer's router predicting its experts): waits until it is in its buffer.
  Status peek(int layer);

  CorePagerStats stats() const;
  std::string describe() const;  // one line for the log

 private:
  struct Extent {  // one request: an aligned file range, or one tensor (read_at)
    int shard = 0;
    uint64_t file_off = 0, len = 0, buf_off = 0;
  };
  struct Layer {
    int buffer = -1;  // -1: resident
    std::vector<Extent> extents;
    uint64_t bytes = 0;  // buffer bytes it needs
  };
  struct Buffer {
    char* base = nullptr;
    size_t size = 0;
    int holder = -1;   // the layer read (or being read) into it; -1: none
    int pending = 0;   // requests in flight
    Status status;     // of the holder's read
  };
  CorePager() = default;
  Status place(int layer);  // layer's extents and buffer offsets
  const Extent* extent_of(int layer, const TensorRef& t) const;
  void start_read(int layer);  // mu_ held; the buffer is idle
  Status wait_for(int layer, std::unique_lock<std::mutex>& lk);
  void read_ahead(int from);
  Status read_extent(const Extent& e, char* dst);

  ModelFile* file_ = nullptr;
  int window_ = 2;
  int io_threads_ = 8;
  int first_streamed_ = 0;  // layers >= this are streamed
  std::vector<Layer> layers_;
  std::vector<Buffer> buffers_;
  std::vector<std::unique_ptr<DirectFile>> files_;  // per shard; null: read through the model's source
  std::vector<int> next_;  // per layer: the layer that ran after it last time (-1: not seen)
  int current_ = -1;       // the layer running now
  mutable std::mutex mu_;
  std::condition_variable cv_;
  CorePagerStats stats_;
  std::unique_ptr<IoPool> io_;  // last: its threads use the members above
};

}  // namespace deltafin
