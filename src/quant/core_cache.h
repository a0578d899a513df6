// --core-type: a model's core (every tensor but the routed experts)
// re-encoded once to another type and kept in the cache directory, so a core that
// does not fit in RAM as published (Kimi K3's 114 GB of BF16) can stay resident at
// Q8_0 or Q4_K while the expert bytes stay the model's own.
//
//   CACHE_DIR/cores/NAME-TYPE-ID.gguf   the re-encoded core (quant/quantize_model.h,
//                                       core_only), laid over the model with
//                                       ModelFile::overlay
//   CACHE_DIR/cores/NAME-TYPE-ID.json   what it was made from, its size and XXH3-64
//
// ID hashes the model's size, every part's header and the type, so a changed model
// gets a new core and an old one is never used for it. A core whose size differs
// from its record (a torn or truncated file) is made again; with `verify`, so is one
// whose checksum differs.
#pragma once
#include <string>

#include "core/result.h"
#include "format/model_file.h"

namespace deltafin {

struct CoreCacheInfo {
  std::string path;       // the core GGUF
  bool made = false;      // made by this call (else reused)
  uint64_t bytes = 0;     // its size
  std::string type;       // the type name, as deltafin spells it
  std::string note;       // why it was made again ("" if not)
};

// The re-encoded core of the model `file` (a GGUF, a Hugging Face folder, or a
// remote model whose core is in its disk cache) in
// `type_name` (Q8_0, Q4_K, ...: quantize's names of single types), making it if
// missing. Errors name the type, the model or the cache file.
Result<CoreCacheInfo> cached_core(ModelFile& file, const std::string& type_name, const std::string& cache_dir,
                                  bool verify);

}  // namespace deltafin
