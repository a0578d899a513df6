// One part of a remote model (store/remote_model.h): a GGUF file at the origin, or a
// Hugging Face folder's GGUF view (store/remote_hf.h), with its core in the disk
// cache. Internal to remote_model.cpp and remote_hf.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cache/core_file.h"
#include "io/http_source.h"
#include "store/disk_cache.h"
#include "store/remote_model.h"

namespace deltafin {

struct RemoteModel::Part {
  std::string url;
  HttpIdentity id;
  // An HttpSource, or a ConcatSource of the fragments' ones (a part cut into byte
  // fragments); null for a folder's view.
  std::unique_ptr<ByteSource> origin;
  std::vector<OriginFragment> frags;  // the fragments of a part cut into them (empty: one file)
  std::unique_ptr<ByteSource> view;    // a Hugging Face folder as GGUF (remote_hf.h)
  uint64_t view_header = 0;            // the view's GGUF header bytes (held in memory)
  // While the GGUF parser reads the view's header (in 1 MiB reads), the bytes past it
  // are not fetched: they read as zeros, which the parser never looks at.
  bool header_only = false;
  std::unique_ptr<CoreFile> core;
  std::vector<CoreChunk> plan;
  std::string core_base;
};

}  // namespace deltafin
