// The library entry point: a model file opened and loaded, with its thread pool.
// Tools, tests and the server create one Engine per model.
#pragma once
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "format/model_file.h"
#include "model/model.h"

namespace deltafin {

struct EngineOptions {
  int threads = 0;  // 0: all hardware threads
  // Expert store factory; null: all experts resident.
  std::function<Result<std::unique_ptr<ExpertStore>>(ModelFile&)> make_store;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> open(const std::string& path, const EngineOptions& opts = {});
  Model& model() { return *model_; }
  ModelFile& file() { return *file_; }
  ThreadPool& pool() { return *pool_; }

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ModelFile> file_;
  std::unique_ptr<Model> model_;
};

}  // namespace deltafin
