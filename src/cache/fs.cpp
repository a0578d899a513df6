#include "cache/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace deltafin {

Status make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/') continue;
    const std::string d = dir.substr(0, i);
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
      return make_error("cannot create directory '{}': {}", d, std::strerror(errno));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return make_error("'{}' is not a directory", dir);
  return {};
}

std::string temp_path(const std::string& tmp_dir) {
  static std::atomic<uint64_t> n{0};
  return fmt::format("{}/{}.{}.tmp", tmp_dir, ::getpid(), n.fetch_add(1));
}

int remove_stale_temps(const std::string& tmp_dir) {
  DIR* d = ::opendir(tmp_dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    long pid = 0;
    unsigned long long n = 0;
    if (std::sscanf(e->d_name, "%ld.%llu.tmp", &pid, &n) != 2) continue;
    if (pid == ::getpid() || (::kill(pid_t(pid), 0) == 0 || errno == EPERM)) continue;  // alive
    if (::unlink((tmp_dir + "/" + e->d_name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

Status write_file_atomic(const std::string& path, const std::string& tmp_dir,
                         const std::vector<std::string_view>& pieces, int* errno_out) {
  int unused = 0;
  int& err_out = errno_out ? *errno_out : unused;
  err_out = 0;
  const std::string tmp = temp_path(tmp_dir);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    err_out = errno;
    return make_error("cannot create '{}': {}", tmp, std::strerror(errno));
  }
  auto fail = [&](const char* what) {
    const int err = errno;
    err_out = err;
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error("cannot write '{}' ({} '{}'): {}", path, what, tmp, std::strerror(err));
  };
  for (std::string_view p : pieces) {
    size_t done = 0;
    while (done < p.size()) {
      ssize_t w = ::write(fd, p.data() + done, p.size() - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        return fail("writing");
      }
      done += size_t(w);
    }
  }
  if (::fsync(fd) != 0) return fail("syncing");
  if (::close(fd) != 0) {
    const int err = errno;
    err_out = err;
    ::unlink(tmp.c_str());
    return make_error("cannot write '{}' (closing '{}'): {}", path, tmp, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    err_out = err;
    ::unlink(tmp.c_str());
    return make_error("cannot write '{}' (renaming '{}'): {}", path, tmp, std::strerror(err));
  }
  return {};
}

bool pread_full(int fd, void* dst, uint64_t n, uint64_t off) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= uint64_t(r);
    off += uint64_t(r);
  }
  return true;
}

Result<std::string> read_small_file(const std::string& path) {
  // O_NONBLOCK and a regular file only: a FIFO in the cache must not hang a reader.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return make_error("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("cannot read '{}': not a regular file", path);
  }
  std::string s;
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return make_error("cannot read '{}': {}", path, std::strerror(err));
    }
    if (r == 0) break;
    s.append(buf, size_t(r));
  }
  ::close(fd);
  return s;
}

namespace {
Result<FileLock> lock_impl(const std::string& path, bool exclusive, bool wait, int* fd_out) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return make_error("cannot open lock file '{}': {}", path, std::strerror(errno));
  int op = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
  while (::flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    if (!wait && err == EWOULDBLOCK) return FileLock();
    return make_error("cannot lock '{}': {}", path, std::strerror(err));
  }
  *fd_out = fd;
  return FileLock();
}
}  // namespace

Result<FileLock> FileLock::acquire(const std::string& path, bool exclusive) {
  int fd = -1;
  DF_ASSIGN(FileLock l, lock_impl(path, exclusive, true, &fd));
  l.fd_ = fd;
  return l;
}

Result<FileLock> FileLock::try_acquire(const std::string& path, bool exclusive) {
  int fd = -1;
  DF_ASSIGN(FileLock l, lock_impl(path, exclusive, false, &fd));
  l.fd_ = fd;
  return l;
}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
  fd_ = -1;
}

Result<KeyLocks> KeyLocks::open(const std::string& path) {
  KeyLocks k;
  k.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (k.fd_ < 0) return make_error("cannot open lock file '{}': {}", path, std::strerror(errno));
  return k;
}

KeyLocks& KeyLocks::operator=(KeyLocks&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

KeyLocks::~KeyLocks() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
struct flock key_range(short type, uint64_t key) {
  struct flock fl;
  std::memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = off_t(key);
  fl.l_len = 1;
  return fl;
}
}  // namespace

bool KeyLocks::try_lock(uint64_t key) {
  struct flock fl = key_range(F_WRLCK, key);
  return ::fcntl(fd_, F_OFD_SETLK, &fl) == 0;
}

Status KeyLocks::lock(uint64_t key) {
  struct flock fl = key_range(F_WRLCK, key);
  while (::fcntl(fd_, F_OFD_SETLKW, &fl) != 0) {
    if (errno == EINTR) continue;
    return make_error("cannot lock cache key {}: {}", key, std::strerror(errno));
  }
  return {};
}

void KeyLocks::unlock(uint64_t key) {
  struct flock fl = key_range(F_UNLCK, key);
  ::fcntl(fd_, F_OFD_SETLK, &fl);
}

uint64_t disk_usage(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return uint64_t(st.st_blocks) * 512;
}

}  // namespace deltafin
