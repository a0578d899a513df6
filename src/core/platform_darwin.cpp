// core/platform.h on macOS: F_NOCACHE reads, sysctl and the Mach VM statistics
// for memory, sysctlbyname for the Apple Silicon CPU features.
// Compiled and linked against the macOS SDK's headers by scripts/test-macos (from
// Linux); not yet run on a Mac.
#include <fcntl.h>
#include <mach/mach.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysctl.h>
#include <unistd.h>

#include "core/platform.h"

namespace deltafin::platform {

uint64_t page_size() {
  static const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  return page;
}

// The expert reads are large and random: no caching and no read-ahead. The
// read path keeps several requests in flight to reach an M-series SSD's bandwidth.
int open_uncached(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (::fcntl(fd, F_NOCACHE, 1) != 0) {
    ::close(fd);
    return -1;
  }
  (void)::fcntl(fd, F_RDAHEAD, 0);
  return fd;
}

void drop_cached_pages(int, uint64_t, uint64_t) {}

void* map_memory(size_t n) {
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
void unmap_memory(void* p, size_t n) {
  if (p != nullptr) ::munmap(p, n);
}

// MADV_FREE_REUSABLE takes the pages out of the process's footprint at once (plain
// MADV_FREE leaves them counted until the system reclaims them).
void release_memory(void* addr, size_t len) { ::madvise(addr, len, MADV_FREE_REUSABLE); }
// No call commits anonymous pages without writing them; a write would race with the
// reads into the range.
bool populate_memory(void*, size_t) { return false; }

bool sync_data(int fd) { return ::fcntl(fd, F_FULLFSYNC) == 0 || ::fsync(fd) == 0; }

int64_t mtime_ns(const struct stat& st) {
  return int64_t(st.st_mtimespec.tv_sec) * 1000000000 + st.st_mtimespec.tv_nsec;
}
int64_t ctime_ns(const struct stat& st) {
  return int64_t(st.st_ctimespec.tv_sec) * 1000000000 + st.st_ctimespec.tv_nsec;
}

ssize_t send_nosignal(int fd, const void* data, size_t n) {
#if defined(MSG_NOSIGNAL)
  return ::send(fd, data, n, MSG_NOSIGNAL);
#else
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
  return ::send(fd, data, n, 0);
#endif
}

int wait_signal(const sigset_t& sigs, int timeout_ms) {
  for (int waited = 0;; waited += 10) {
    sigset_t pending;
    sigemptyset(&pending);
    if (::sigpending(&pending) == 0) {
      for (int s = 1; s < NSIG; ++s) {
        if (sigismember(&sigs, s) != 1 || sigismember(&pending, s) != 1) continue;
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, s);
        int got = 0;
        if (::sigwait(&one, &got) == 0) return got;
      }
    }
    if (waited >= timeout_ms) return 0;
    ::usleep(10000);
  }
}

MemoryInfo memory_info() {
  MemoryInfo m;
  uint64_t total = 0;
  size_t len = sizeof total;
  if (::sysctlbyname("hw.memsize", &total, &len, nullptr, 0) == 0) m.total = total;
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (::host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count) ==
      KERN_SUCCESS) {
    vm_size_t page = 0;
    ::host_page_size(mach_host_self(), &page);
    m.available = (uint64_t(vm.free_count) + vm.inactive_count + vm.purgeable_count + vm.speculative_count) *
                  uint64_t(page);
  }
  return m;
}

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return uint64_t(ru.ru_maxrss);  // bytes on macOS
}

std::string user_cache_dir(const std::string& xdg_cache_home, const std::string& home) {
  if (!xdg_cache_home.empty()) return xdg_cache_home;
  return home.empty() ? std::string() : home + "/Library/Caches";
}

bool cpu_has_arm_dotprod() {
#if defined(__aarch64__)
  int has = 0;
  size_t len = sizeof has;
  return ::sysctlbyname("hw.optional.arm.FEAT_DotProd", &has, &len, nullptr, 0) == 0 && has != 0;
#else
  return false;
#endif
}

}  // namespace deltafin::platform
