// The library entry point: a model file opened and loaded, with its thread pool.
// Tools, tests and the server create one Engine per model.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cache/remote_model.h"
#include "core/environment.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "format/model_file.h"
#include "model/core_pager.h"
#include "model/model.h"
#include "store/streaming_store.h"

namespace deltafin {

struct EngineOptions {
  int threads = 0;  // 0: all hardware threads
  // Expert store factory; null: all experts resident (or streamed, per mem_bytes).
  std::function<Result<std::unique_ptr<ExpertStore>>(ModelFile&)> make_store;
  // Everything deltafin may use for this model, in bytes (--mem). With a budget (and
  // no make_store) the core stays resident and the routed experts stream from the
  // file through a RAM cache of mem_bytes - core - reserve_bytes.
  // 0: no budget, every expert resident. kMemAuto: a safe share of the available
  // RAM, streaming only when the whole model does not fit in it.
  static constexpr uint64_t kMemAuto = ~uint64_t(0);
  uint64_t mem_bytes = 0;
  // Kept out of the expert cache for the KV cache, activations and the program;
  // 0: 64 MiB + 3% of the budget.
  uint64_t reserve_bytes = 0;
  // Policy, I/O threads, profile ("auto": default_profile_path() under env.profile_base); cache_bytes is
  // computed from mem_bytes.
  StreamingOptions stream;
  // Remote models (http://, https://, hf:// locations): the disk cache and the
  // network. The core is downloaded into the cache first (progress drawn by
  // `progress` if set), then experts stream from the origin through the cache.
  RemoteOptions remote;
  // Draws the core download, and the load of a large (>= 1 GiB) set of resident
  // weights; null: no progress lines.
  ProgressFactory progress;
  // The program's environment (tools/environment.h): the disk cache when
  // remote.cache_dir is empty, the profile directory, the Hugging Face endpoint and token.
  Environment env;
};

// The part of a --mem budget kept out of the expert cache for the KV cache,
// activations and the program when EngineOptions::reserve_bytes is 0: 64 MiB + 3%.
uint64_t default_reserve_bytes(uint64_t mem);
// The reserve `opts` gives the engine: reserve_bytes, else the default for its budget
// (for kMemAuto, the budget default_mem_budget() picks).
uint64_t effective_reserve_bytes(const EngineOptions& opts);

class Engine {
 public:
  // `path`: a local .gguf file or a remote location (see remote/location.h).
  static Result<std::unique_ptr<Engine>> open(const std::string& path, const EngineOptions& opts = {});
  Model& model() { return *model_; }
  ModelFile& file() { return *file_; }
  ThreadPool& pool() { return *pool_; }
  // The streaming expert store when experts stream (stats, cache control), else null.
  StreamingExpertStore* streaming_store() { return streaming_; }
  // The remote model and its disk cache when the model is remote, else null.
  RemoteModel* remote() { return remote_.get(); }
  // The core pager when core layers stream (the core did not fit --mem), else null.
  const CorePager* core_pager() const { return pager_.get(); }
  // Takes the memory of n_states sequence states of n_ctx positions out of the expert
  // cache (StreamingExpertStore::reserve_memory), so that the budget bounds a
  // server's batch as well; an error naming the sizes when the cache is too small.
  // Returns what one state takes (nothing is taken when the experts are resident).
  // covered: bytes of them the reserve already holds (a single command's state fits
  // in it unless its context is long); only the rest is taken.
  Result<uint64_t> reserve_states(int n_ctx, int n_states, uint64_t covered = 0);

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<RemoteModel> remote_;  // outlives the file and the model that read through it
  std::unique_ptr<ModelFile> file_;
  std::unique_ptr<CorePager> pager_;  // core layers streamed when the core does not fit; outlives the model
  std::unique_ptr<Model> model_;
  StreamingExpertStore* streaming_ = nullptr;  // owned by model_
};

}  // namespace deltafin
