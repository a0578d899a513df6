// kimi-k3: not implemented yet.
#include "model/arch.h"

namespace deltafin {

Result<std::unique_ptr<Model>> load_kimi_k3(ModelFile& file, LoadOptions&) {
  return make_error("{}: architecture 'kimi-k3' is not implemented yet", file.path());
}

}  // namespace deltafin
