// core/platform.h on Linux: O_DIRECT, posix_fadvise, /proc/meminfo and the
// cgroup's memory limit, getauxval for the aarch64 CPU features.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>  // getauxval, and glibc's HWCAP_* for aarch64
#endif

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/platform.h"

namespace deltafin::platform {

namespace {

// The first number in a file ("max", a missing file: false).
bool read_number(const std::string& path, uint64_t* v) {
  std::ifstream f(path);
  unsigned long long x = 0;
  if (!(f >> x)) return false;
  *v = x;
  return true;
}

// `key value` from a cgroup's memory.stat; 0 if absent.
uint64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string k;
  unsigned long long v = 0;
  while (f >> k >> v)
    if (k == key) return v;
  return 0;
}

struct Room {
  uint64_t limit = UINT64_MAX;  // the lowest memory limit over the process's cgroup and those above it
  uint64_t left = UINT64_MAX;   // the least room left under any of them
};

// Walks from the process's cgroup directory up to the hierarchy's root. In a
// cgroup namespace the path /proc/self/cgroup names may not be mounted: then the
// mount's root is the process's own cgroup. Usage counts the page cache; its
// inactive file pages are reclaimable, so they count as room.
void walk_cgroup(const std::string& root, const std::string& rel, const char* limit_file, const char* usage_file,
                 const char* inactive_key, Room* room) {
  std::string dir = root + (rel == "/" ? "" : rel);
  if (::access(dir.c_str(), F_OK) != 0) dir = root;
  for (;;) {
    uint64_t limit = 0, usage = 0;
    if (read_number(dir + "/" + limit_file, &limit) && read_number(dir + "/" + usage_file, &usage)) {
      const uint64_t inactive = std::min(usage, stat_value(dir + "/memory.stat", inactive_key));
      room->limit = std::min(room->limit, limit);
      const uint64_t used = usage - inactive;
      room->left = std::min(room->left, limit > used ? limit - used : 0);
    }
    if (dir.size() <= root.size()) break;
    dir.resize(dir.rfind('/'));
  }
}

// cgroup v2 ("0::/path") and v1 ("N:...,memory,...:/path"); both where both are mounted.
Room cgroup_room() {
  Room room;
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), rel = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      walk_cgroup("/sys/fs/cgroup", rel, "memory.max", "memory.current", "inactive_file", &room);
    } else {
      std::stringstream list(controllers);
      std::string c;
      while (std::getline(list, c, ','))
        if (c == "memory")
          walk_cgroup("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes", "memory.usage_in_bytes",
                      "total_inactive_file", &room);
    }
  }
  return room;
}

}  // namespace

uint64_t page_size() {
  static const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  return page;
}

int open_uncached(const std::string& path) { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT); }

void drop_cached_pages(int fd, uint64_t offset, uint64_t len) {
  ::posix_fadvise(fd, off_t(offset), off_t(len), POSIX_FADV_DONTNEED);
}

// From 2 MiB up the mapping starts on a 2 MiB boundary (mapped 2 MiB larger, the ends
// cut off): the kernel backs only whole aligned 2 MiB ranges with huge pages. No swap
// is reserved for it (an expert cache is mapped whole at start and filled as it goes).
void* map_memory(size_t n) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (n < kHuge) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  void* raw = ::mmap(nullptr, n + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw), aligned = (start + kHuge - 1) & ~(kHuge - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  if (const size_t tail = start + n + kHuge - (aligned + n); tail > 0) ::munmap(reinterpret_cast<void*>(aligned + n), tail);
  void* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, n, MADV_HUGEPAGE);
  return p;
}
void unmap_memory(void* p, size_t n) {
  if (p != nullptr) ::munmap(p, n);
}

void release_memory(void* addr, size_t len) { ::madvise(addr, len, MADV_DONTNEED); }
bool populate_memory(void* addr, size_t len) {
#ifdef MADV_POPULATE_WRITE
  return ::madvise(addr, len, MADV_POPULATE_WRITE) == 0;
#else
  (void)addr, (void)len;
  return false;
#endif
}

bool sync_data(int fd) { return ::fdatasync(fd) == 0; }

int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }
int64_t ctime_ns(const struct stat& st) { return int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec; }

ssize_t send_nosignal(int fd, const void* data, size_t n) { return ::send(fd, data, n, MSG_NOSIGNAL); }

int wait_signal(const sigset_t& sigs, int timeout_ms) {
  const timespec wait{timeout_ms / 1000, long(timeout_ms % 1000) * 1000000};
  const int sig = ::sigtimedwait(&sigs, nullptr, &wait);
  return sig > 0 ? sig : 0;
}

MemoryInfo memory_info() {
  MemoryInfo m;
  std::ifstream f("/proc/meminfo");
  std::string line;
  unsigned long long kb = 0;
  while (std::getline(f, line)) {
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kb) == 1) m.total = uint64_t(kb) * 1024;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) m.available = uint64_t(kb) * 1024;
  }
  if (m.total == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) m.total = uint64_t(pages) * uint64_t(page);
  }
  const Room room = cgroup_room();
  if (room.limit < m.total) {
    m.total = room.limit;
    if (m.available) m.available = std::min(m.available, room.left);
  }
  return m;
}

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return uint64_t(ru.ru_maxrss) * 1024;  // kilobytes on Linux
}

std::string user_cache_dir(const std::string& xdg_cache_home, const std::string& home) {
  if (!xdg_cache_home.empty()) return xdg_cache_home;
  return home.empty() ? std::string() : home + "/.cache";
}

bool cpu_has_arm_dotprod() {
#if defined(__aarch64__) && defined(HWCAP_ASIMDDP)
  return (::getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

}  // namespace deltafin::platform
