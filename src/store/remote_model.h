// A model at an HTTP origin, bound to its directory in the disk cache: GGUF parts,
// or a Hugging Face folder of safetensors shards seen as one GGUF part
// (store/remote_hf.h).
//
//   open():        resolves the location (a Hugging Face revision is pinned to its
//                  commit), probes the first part (size, ETag; a GGUF published as
//                  byte fragments, format/fragments.h, is one part read from each
//                  fragment, each pinned), finds or creates
//                  the model's cache directory; a part whose size or ETag differs
//                  from what the cache pinned is an error, never a silent mix.
//                  Offline (asked for, or the origin unreachable while a cached
//                  copy with a complete core exists): the cache directory and the
//                  pinned identities come from meta.json, nothing is sent, and an
//                  expert that is not on disk fails with an error naming it.
//   open_file():   the GGUF parts, reading from the cached core when it is
//                  complete, else from the origin.
//   attach():      the expert index; plans the core; opens the expert cache.
//   ensure_core(): downloads the missing core chunks (resuming), verifies the rest.
//
// Thread safety: open/open_file/attach/ensure_core from one thread, before the
// model is used; experts() is thread-safe.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cache/core_file.h"
#include "store/disk_cache.h"
#include "core/progress.h"
#include "format/model_file.h"
#include "io/http_source.h"
#include "remote/location.h"
#include "store/expert_index.h"

namespace deltafin {

struct RemoteFolder;  // store/remote_hf.h

struct RemoteOptions {
  std::string cache_dir;     // the disk cache directory (--cache-dir, else Environment::cache_dir); required
  uint64_t disk_budget = 0;  // bytes for the whole cache directory (--disk-cache); 0: no limit
  HttpOptions http;
  bool offline = false;      // never contact the origin (--offline)
};

struct CoreStatus {
  uint64_t model_bytes = 0;     // all parts at the origin
  uint64_t core_bytes = 0;      // the core (header + non-expert tensors)
  uint64_t core_missing = 0;    // core bytes not on disk yet
  uint64_t expert_bytes = 0;    // all routed experts
  uint64_t slot_bytes = 0;      // one expert in the RAM cache
  int experts = 0, experts_on_disk = 0;
};

class RemoteModel {
 public:
  static Result<std::unique_ptr<RemoteModel>> open(const ModelLocation& loc, const RemoteOptions& opts);
  ~RemoteModel();

  Result<std::unique_ptr<ModelFile>> open_file();
  Status attach(const ModelFile& file, const std::vector<ExpertLayerInfo>& layers);
  CoreStatus status() const;
  Status ensure_core(const ProgressFactory& progress);

  ExpertCache& experts() { return *experts_; }
  const ExpertIndex& index() const { return *index_; }
  const std::string& dir() const { return dir_; }
  // Per part, the disk cache's file that holds its core at the part's own offsets
  // (cache/core_file.h).
  std::vector<std::string> core_files() const;
  const std::string& root() const { return root_; }
  const std::string& url() const;  // part 1, revision pinned
  const std::string& key() const { return key_; }
  std::shared_ptr<HttpClient> client() { return client_; }
  // Why the origin is not used ("" when online).
  const std::string& offline_reason() const { return offline_reason_; }
  // A Hugging Face folder (safetensors) rather than GGUF parts.
  bool is_folder() const { return folder_ != nullptr; }

  struct Part;

 private:
  RemoteModel() = default;
  Result<Part*> add_part(const std::string& url);
  // A part that is one GGUF cut into byte fragments at `urls` (format/fragments.h):
  // opens (or, offline, takes the pinned identities of) each fragment; `first`: the
  // first, already probed (may be null).
  Status open_fragment_part(Part* p, std::unique_ptr<HttpSource> first, const std::vector<std::string>& urls);
  Status write_meta();
  Status open_folder();  // remote_hf.cpp

  ModelLocation loc_;
  RemoteOptions opts_;
  std::string root_, dir_, key_;
  std::shared_ptr<HttpClient> client_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<HttpIdentity> pinned_;  // from meta.json, per part
  std::vector<std::vector<OriginFragment>> pinned_fragments_;  // from meta.json, per part (empty: one file)
  std::vector<std::string> revisions_;    // Hugging Face branches/tags seen resolving to this commit
  bool meta_dirty_ = false;
  std::string offline_reason_;
  std::unique_ptr<ExpertIndex> index_;
  std::unique_ptr<ExpertCache> experts_;
  std::unique_ptr<RemoteFolder> folder_;
};

}  // namespace deltafin

namespace deltafin {
// Two lines on the disk tier and the network: disk hits, experts fetched, requests,
// retries, bytes, the link rate while busy.
std::string format_remote_stats(RemoteModel& m);
}  // namespace deltafin
