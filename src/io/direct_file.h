// A local file read in large aligned requests without filling the page cache: the
// expert store's read path. Bytes come through an uncached descriptor where the
// file system allows it (O_DIRECT on Linux, F_NOCACHE on macOS: core/platform.h);
// elsewhere (tmpfs, some network file systems) through a buffered descriptor whose
// pages are dropped right after each read, so that the process's memory budget
// stays honest.
//
// Thread safety: read_aligned may be called from many threads at once (pread).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/platform.h"
#include "core/result.h"

namespace deltafin {

// Uncached reads want offset, length and buffer address aligned (platform.h).
inline constexpr uint64_t kDirectAlign = platform::kDirectIoBlock;
inline uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }
inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

class DirectFile {
 public:
  // want_direct = false forces the buffered + drop-pages path (tests, comparison).
  static Result<std::unique_ptr<DirectFile>> open(const std::string& path, bool want_direct = true);
  ~DirectFile();
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  // Reads [offset, offset + n) into dst. offset, n and dst must be kDirectAlign
  // aligned. A range running past the end of the file is allowed (the aligned
  // superset of a file's last tensor): the bytes past the end are zero-filled.
  Status read_aligned(uint64_t offset, void* dst, size_t n);

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // True while reads bypass the page cache (O_DIRECT, F_NOCACHE).
  bool direct() const { return direct_fd_ >= 0 && !direct_failed_.load(std::memory_order_relaxed); }

 private:
  DirectFile() = default;
  Status read_fd(int fd, uint64_t offset, char* dst, size_t n, int* err);
  std::string path_;
  int fd_ = -1;         // buffered
  int direct_fd_ = -1;  // uncached (platform::open_uncached), -1 if unavailable
  std::atomic<bool> direct_failed_{false};  // the file system refused an uncached read (set once)
  uint64_t size_ = 0;
};

// Drops a file's pages from the page cache (after loading the resident core, so
// that the copy the kernel kept does not count against the machine's memory).
void drop_file_cache(const std::string& path);

}  // namespace deltafin
