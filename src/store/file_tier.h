// The local model file as a tier: each part of an expert is one aligned O_DIRECT
// read straight into its slot on the I/O threads (buffered reads with the pages
// dropped where the file system refuses O_DIRECT; a shard that is not a local file
// reads through the model's byte source). With `verify`, every read of a part is
// checked against the XXH3-64 of its first read, and a difference is a read error
// naming the expert (the file changed under a running process).
#pragma once
#include <memory>

#include "core/result.h"
#include "format/model_file.h"
#include "store/expert_index.h"
#include "store/tier.h"

namespace deltafin {

// `file` and `ix` must outlive the tier. io_threads: reads in flight at most.
std::unique_ptr<Tier> make_file_tier(ModelFile& file, const ExpertIndex& ix, int io_threads, bool direct,
                                     bool verify);

}  // namespace deltafin
