// A Hugging Face model folder at an HTTP origin, run as published: hf://OWNER/REPO
// [@REVISION] of a repository holding config.json and safetensors (no GGUF), or an
// http(s):// URL prefix of such a folder (ending in '/'). RemoteModel opens it
// through RemoteModel::open_folder (remote_hf.cpp):
//
//   - the revision is pinned to the commit the hub names for config.json
//     (X-Repo-Commit); every file is then read at that commit;
//   - the small files (config.json, the index, generation_config.json, the tokenizer
//     files) are fetched once into the model's cache directory (files/; a file the
//     origin does not have is remembered as NAME.absent), and so is each shard's
//     safetensors header (files/SHARD.header: the 8-byte length and the JSON, read
//     by two range requests);
//   - the folder is seen as the GGUF it converts to (format/hf_gguf_source.h): one
//     virtual part whose core (GGUF header and non-expert tensors, widened where
//     the converter widens) lands in core-1.bin like a GGUF part's, read from the
//     shards by range requests;
//   - routed experts are fetched by the expert cache straight from the shards
//     (ExpertCacheOptions::locate maps a slice of the view to its shard bytes), one
//     request per expert where its tensors lie together, neighbours joined;
//   - tensors of parts deltafin does not run (a vision tower) are never requested.
//
// meta.json records the shards' identities (size, ETag) and a hash of the view's
// GGUF header: a cached core made by a build that synthesizes another header is
// dropped and fetched again. At a pinned commit the shards are not probed again;
// an http(s):// prefix has each shard probed and compared with what was pinned.
// Offline (--offline, or the origin unreachable with a complete core cached), the
// folder is opened from files/ and meta.json alone.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "cache/core_file.h"
#include "format/gguf.h"
#include "io/http_client.h"

namespace deltafin {

class HfGgufSource;

struct RemoteShard {
  std::string file;  // relative name in the folder
  std::string url;   // at the pinned revision
  HttpIdentity id;
};

struct RemoteFolder {
  std::string base;                 // URL prefix at the pinned revision, ending in '/'
  std::vector<RemoteShard> shards;  // in the folder's shard order (HfFolder::shard_files)
  const HfGgufSource* view = nullptr;  // the GGUF view (owned by the model's part)
  std::string view_hash;            // XXH3-64 of the view's GGUF header, hex
};

// The core chunks of a folder's GGUF view: its header (exactly: the view holds it in
// memory, so the parser's 1 MiB reads need no more) and every tensor not in
// `expert_tensors`, in chunks of at most kMaxCoreChunk.
std::vector<CoreChunk> plan_view_core(const GGUFFile& meta, uint64_t header_bytes,
                                      const std::set<std::string>& expert_tensors);

// Does a repository listing hold a safetensors model (config.json and *.safetensors)
// and no GGUF model?
bool hf_listing_is_folder(const std::vector<std::string>& files);

// An http(s):// location naming a folder (its URL ends in '/').
bool url_is_folder(const std::string& url);

}  // namespace deltafin
