// The core of one model part in the disk cache: the GGUF header and every tensor
// that is not a routed expert, kept at their own offsets in a sparse file
// (core-N.bin) so that a cached part reads like the original. Downloaded in chunks
// (at most 16 MiB); each stored chunk is synced, then recorded with its XXH3-64
// checksum in a journal (core-N.journal), so an interrupted download resumes where
// it stopped. When every chunk is in, a manifest (core-N.ok, written atomically)
// marks the core complete. verify() rehashes every chunk; a bad one is forgotten
// and fetched again. A clean verify is remembered (core-N.verified) until the data
// file or the manifest changes, so that opening a cached model does not reread its
// whole core each time.
//
// Thread safety: covers/read may be called from any thread; the rest from one
// thread holding the model's core lock.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "format/gguf.h"

namespace deltafin {

struct CoreChunk {
  uint64_t offset = 0, len = 0;
  uint64_t hash = 0;  // XXH3-64 of the bytes, once stored
};

// The largest chunk a plan makes (and a manifest or journal may name).
constexpr uint64_t kMaxCoreChunk = uint64_t(16) << 20;

// The chunks of a part's core: [0, header) (rounded up to the 1 MiB reads of the
// GGUF parser) and every tensor not in `expert_tensors`, adjacent ranges merged.
std::vector<CoreChunk> plan_core_chunks(const GGUFFile& meta, uint64_t file_size,
                                        const std::set<std::string>& expert_tensors,
                                        uint64_t max_chunk = kMaxCoreChunk);

class CoreFile {
 public:
  // `base`: path prefix of the part's files (".../core-1").
  static Result<std::unique_ptr<CoreFile>> open(const std::string& base, const std::string& tmp_dir,
                                                uint64_t file_size);
  ~CoreFile();

  bool complete() const { return complete_; }
  // True if the core is complete and [offset, offset + n) lies within its chunks.
  bool covers(uint64_t offset, uint64_t n) const;
  Status read(uint64_t offset, void* dst, size_t n) const;

  // Chunks of `plan` not stored yet.
  std::vector<CoreChunk> missing(const std::vector<CoreChunk>& plan) const;
  // Stores one planned chunk (len bytes): write, sync, then journal it.
  Status store(const CoreChunk& c, const char* data);
  // Marks the core complete; every chunk of `plan` must be stored.
  Status finish(const std::vector<CoreChunk>& plan);
  // Rehashes every stored chunk; a bad one is forgotten (the core becomes
  // incomplete). Returns the number of bad chunks. A complete core that verifies
  // clean is stamped (core-N.verified: the data file's size, inode, mtime and ctime,
  // and the manifest's hash).
  Result<int> verify();
  // verify(), skipped (0, *skipped = true) while the stamp still matches: a core is
  // rehashed once after it changes, not on every open. `cache verify` uses verify().
  Result<int> verify_if_changed(bool* skipped = nullptr);

  uint64_t stored_bytes() const;
  const std::string& data_path() const { return data_path_; }

 private:
  CoreFile() = default;
  Status rewrite_journal();
  std::string stamp() const;  // "" if the files cannot be read
  std::string base_, tmp_dir_, data_path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  bool complete_ = false;
  bool resumed_ = false;  // chunks came from the journal of an earlier process
  std::vector<CoreChunk> stored_;  // sorted by offset
};

}  // namespace deltafin
