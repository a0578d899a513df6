#include "io/direct_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace deltafin {

Result<std::unique_ptr<DirectFile>> DirectFile::open(const std::string& path, bool want_direct) {
  std::unique_ptr<DirectFile> f(new DirectFile());
  f->path_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) return make_error("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(f->fd_, &st) != 0 || !S_ISREG(st.st_mode)) return make_error("'{}' is not a regular file", path);
  f->size_ = uint64_t(st.st_size);
  if (want_direct) f->direct_fd_ = platform::open_uncached(path);
  return f;
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

Status DirectFile::read_fd(int fd, uint64_t offset, char* dst, size_t n, int* err) {
  size_t done = 0;
  *err = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, dst + done, n - done, off_t(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return make_error("{}: read of {} bytes at offset {} failed: {}", path_, n - done, offset + done,
                        std::strerror(*err));
    }
    if (r == 0) {
      if (offset + done >= size_) {  // the aligned tail past the end of the file
        std::memset(dst + done, 0, n - done);
        return {};
      }
      return make_error("{}: unexpected end of file at offset {} (file shrank?)", path_, offset + done);
    }
    done += size_t(r);
  }
  return {};
}

Status DirectFile::read_aligned(uint64_t offset, void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  if (offset % kDirectAlign || n % kDirectAlign || reinterpret_cast<uintptr_t>(p) % kDirectAlign)
    return make_error("{}: unaligned read of {} bytes at offset {}", path_, n, offset);
  int err = 0;
  if (direct_fd_ >= 0 && !direct_failed_.load(std::memory_order_relaxed)) {
    Status s = read_fd(direct_fd_, offset, p, n, &err);
    if (s.ok()) return s;
    // Some file systems accept O_DIRECT at open and refuse it at read (EINVAL):
    // fall back to the buffered path for good.
    if (err != EINVAL) return s;
    direct_failed_.store(true, std::memory_order_relaxed);
  }
  DF_TRY(read_fd(fd_, offset, p, n, &err));
  platform::drop_cached_pages(fd_, offset, n);
  return {};
}

void drop_file_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  platform::drop_cached_pages(fd, 0, 0);
  ::close(fd);
}

}  // namespace deltafin
