// File-system helpers for the disk cache: directories, atomic file writes (temp
// file, fsync, rename: a reader sees the whole file or none of it, whatever kills
// the writer) and advisory locks between processes. Where the cache lives comes
// from the program (Environment::cache_dir, --cache-dir).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace deltafin {

Status make_dirs(const std::string& dir);

// Writes the concatenation of `pieces` to `path` atomically: a temp file in
// `tmp_dir` (same file system), fsync, rename over `path`. On any failure (ENOSPC
// included) the temp file is removed and `path` is untouched, and *errno_out (if
// given) is set to the error number.
Status write_file_atomic(const std::string& path, const std::string& tmp_dir,
                         const std::vector<std::string_view>& pieces, int* errno_out = nullptr);

// A temp-file name in `tmp_dir` owned by this process ("<pid>.<n>.tmp"), so that
// remove_stale_temps can tell a dead writer's leftovers from a live one's.
std::string temp_path(const std::string& tmp_dir);
// Removes temp files of processes that no longer run; returns how many.
int remove_stale_temps(const std::string& tmp_dir);

Result<std::string> read_small_file(const std::string& path);  // whole file (metadata)
// Reads exactly n bytes at `off` (retrying short reads and EINTR); false on an error
// or end of file first.
bool pread_full(int fd, void* dst, uint64_t n, uint64_t off);

// An flock(2) on a lock file, released by the destructor (or when the process dies).
class FileLock {
 public:
  FileLock() = default;
  // Blocks until the lock is held.
  static Result<FileLock> acquire(const std::string& path, bool exclusive = true);
  // Returns an unheld lock (held() false) if another process holds it.
  static Result<FileLock> try_acquire(const std::string& path, bool exclusive = true);
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&& o) noexcept;
  ~FileLock();
  bool held() const { return fd_ >= 0; }
  void release();

 private:
  int fd_ = -1;
};

// Byte-range locks on one file, one byte per key: open-file-description locks
// (F_OFD_SETLK), so they exclude other processes; threads of this process must
// exclude each other by other means.
class KeyLocks {
 public:
  static Result<KeyLocks> open(const std::string& path);
  KeyLocks(KeyLocks&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  KeyLocks& operator=(KeyLocks&& o) noexcept;
  ~KeyLocks();
  bool try_lock(uint64_t key);  // false: another process holds it
  Status lock(uint64_t key);    // waits
  void unlock(uint64_t key);

 private:
  KeyLocks() = default;
  int fd_ = -1;
};

// Bytes a file takes on disk (allocated blocks: a sparse file counts what it holds).
uint64_t disk_usage(const std::string& path);

}  // namespace deltafin
