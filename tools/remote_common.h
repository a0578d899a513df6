// Helpers for the commands that manage remote models (pull, cache).
#pragma once
#include <memory>
#include <string>

#include "store/remote_model.h"
#include "format/model_file.h"

namespace deltafin::tools {

struct OpenedRemote {
  std::unique_ptr<RemoteModel> remote;  // declared first: outlives the file
  std::unique_ptr<ModelFile> file;
};

// Opens a remote model's headers (from the cache or the origin) and binds its
// experts to the disk cache.
Result<OpenedRemote> open_remote(const std::string& location, const RemoteOptions& ro);

// A model's headers without its weights (inspect, plan): a local GGUF, or a remote
// model's through its disk cache (fetched once; *remote keeps it alive meanwhile).
Result<std::unique_ptr<ModelFile>> open_headers(const std::string& location, const RemoteOptions& ro,
                                                OpenedRemote* remote);

// "1.23 GiB", "456.7 MiB", "12.0 KiB" (the units --mem and --disk-cache take).
std::string human_bytes(uint64_t n);

// Free bytes on the file system holding `dir` (or its nearest existing parent).
uint64_t free_bytes(const std::string& dir);

}  // namespace deltafin::tools
