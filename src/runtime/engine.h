// The library entry point: a model file opened and loaded, with its thread pool.
// Tools, tests and the server create one Engine per model.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "store/remote_model.h"
#include "core/environment.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "format/model_file.h"
#include "model/core_pager.h"
#include "model/model.h"
#include "runtime/memory_budget.h"
#include "store/streaming_store.h"

namespace deltafin {

struct EngineOptions {
  int threads = 0;  // 0: all hardware threads
  // Expert store factory; null: all experts resident (or streamed, per mem_bytes).
  std::function<Result<std::unique_ptr<ExpertStore>>(ModelFile&)> make_store;
  // Everything deltafin may use for this model, in bytes (--mem), planned by
  // plan_memory (runtime/memory_budget.h) unless make_store is given: with a budget
  // the routed experts stream through a RAM cache of what the core and the reserve
  // leave. 0: no budget, every expert resident. kMemAuto: a safe share of the
  // available RAM, streaming only when the whole model does not fit in it.
  static constexpr uint64_t kMemAuto = deltafin::kMemAuto;
  uint64_t mem_bytes = 0;
  // Kept out of the expert cache for the KV cache, activations and the program
  // (--reserve); 0: 64 MiB + 3% of the budget.
  uint64_t reserve_bytes = 0;
  // Policy, I/O threads, profile ("auto": default_profile_path() under
  // env.profile_base); cache_bytes comes from the memory plan.
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
  // --core-type: the core re-encoded once to this type (quant/core_cache.h) in the
  // cache directory (remote.cache_dir, else env.cache_dir) and laid over the model;
  // "" keeps the model's own. Local models only.
  std::string core_type;
  bool verify_core = false;  // check the cached core's checksum before using it
};

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
  // The memory plan: the store's part from open(), the sequences' once planned.
  const MemoryPlan& memory_plan() const { return plan_; }
  // Completes the plan with the sequences decoded at once (and a server's prompt
  // cache) and takes their memory out of the expert cache, so that the budget bounds
  // them too; an error naming the sizes and what to lower when they do not fit
  // (nothing is taken then). Once per engine.
  Status plan_sequences(const SequenceRequest& seqs);

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<RemoteModel> remote_;  // outlives the file and the model that read through it
  std::unique_ptr<ModelFile> file_;
  std::unique_ptr<CorePager> pager_;  // core layers streamed when the core does not fit; outlives the model
  std::unique_ptr<Model> model_;
  StreamingExpertStore* streaming_ = nullptr;  // owned by model_
  ModelMemory sizes_;        // what the plan was made from
  MemoryRequest request_;
  MemoryPlan plan_;
  bool sequences_planned_ = false;
};

}  // namespace deltafin
