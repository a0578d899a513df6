// deepseek2: not implemented yet.
#include "model/arch.h"

namespace deltafin {

Result<std::unique_ptr<Model>> load_deepseek2(ModelFile& file, LoadOptions&) {
  return make_error("{}: architecture 'deepseek2' is not implemented yet", file.path());
}

}  // namespace deltafin
