#include "runtime/engine.h"

#include <sys/stat.h>

namespace deltafin {

Result<std::unique_ptr<Engine>> Engine::open(const std::string& path, const EngineOptions& opts) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return make_error("model file '{}' does not exist (generate one with `deltafin synth -o {}` or "
                      "give the path of a .gguf file)", path, path);
  auto e = std::make_unique<Engine>();
  e->pool_ = std::make_unique<ThreadPool>(opts.threads > 0 ? opts.threads : default_thread_count());
  DF_ASSIGN(e->file_, ModelFile::open(path, local_file_opener()));
  LoadOptions lo;
  lo.pool = e->pool_.get();
  if (opts.make_store) {
    DF_ASSIGN(lo.experts, opts.make_store(*e->file_));
  }
  DF_ASSIGN(e->model_, load_model(*e->file_, std::move(lo)));
  return e;
}

}  // namespace deltafin
