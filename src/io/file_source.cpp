#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/platform.h"
#include "io/byte_source.h"

namespace deltafin {
namespace {

class FileSource final : public ByteSource {
 public:
  FileSource(std::string path, int fd, int direct_fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), direct_fd_(direct_fd), size_(size) {}
  ~FileSource() override {
    ::close(fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
  }
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return path_; }

  Status read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset > size_ || n > size_ - offset)
      return make_error("{}: read of {} bytes at offset {} is past the end of the file ({} bytes)",
                        path_, n, offset, size_);
    // Uncached reads need offset, length and buffer aligned to the block size.
    constexpr uint64_t block = platform::kDirectIoBlock;
    bool aligned = direct_fd_ >= 0 && offset % block == 0 && n % block == 0 &&
                   reinterpret_cast<uintptr_t>(dst) % block == 0;
    int fd = aligned ? direct_fd_ : fd_;
    auto* p = static_cast<char*>(dst);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return make_error("{}: read failed at offset {}: {}", path_, offset + done, std::strerror(errno));
      }
      if (r == 0)
        return make_error("{}: unexpected end of file at offset {} (file shrank?)", path_, offset + done);
      done += static_cast<size_t>(r);
    }
    return {};
  }

 private:
  std::string path_;
  int fd_;
  int direct_fd_;
  uint64_t size_;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string bytes, std::string name) : bytes_(std::move(bytes)), name_(std::move(name)) {}
  uint64_t size() const override { return bytes_.size(); }
  const std::string& name() const override { return name_; }
  Status read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset > bytes_.size() || n > bytes_.size() - offset)
      return make_error("{}: read of {} bytes at offset {} is past the end ({} bytes)", name_, n,
                        offset, bytes_.size());
    std::memcpy(dst, bytes_.data() + offset, n);
    return {};
  }

 private:
  std::string bytes_;
  std::string name_;
};

}  // namespace

Result<std::unique_ptr<ByteSource>> open_file_source(const std::string& path, FileSourceOptions opts) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("'{}' is not a regular file", path);
  }
  const int direct_fd = opts.direct ? platform::open_uncached(path) : -1;
  return std::unique_ptr<ByteSource>(
      new FileSource(path, fd, direct_fd, static_cast<uint64_t>(st.st_size)));
}

std::unique_ptr<ByteSource> memory_source(std::string bytes, std::string name) {
  return std::make_unique<MemorySource>(std::move(bytes), std::move(name));
}

}  // namespace deltafin
