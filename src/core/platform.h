// The operating-system calls that differ between Linux and macOS, and nothing
// else: every such call in the program goes through here. One implementation is
// built per target: platform_linux.cpp or platform_darwin.cpp (CMakeLists.txt).
// What is plain POSIX on both (pread, flock, poll, statvfs, mmap) is called directly.
//
// x86 CPU features stay with the x86 kernels (kernels/types.cpp, guarded by
// DELTAFIN_X86); this layer answers for aarch64, where each OS asks differently.
//
// Thread safety: every function may be called from any thread.
#pragma once
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace deltafin::platform {

// Uncached reads want offset, length and buffer address aligned to this: the
// logical block size O_DIRECT asks for on Linux (4096 covers every device we
// expect); macOS's F_NOCACHE does not ask, and the same alignment suits it.
inline constexpr uint64_t kDirectIoBlock = 4096;

// The virtual memory page size (4 KiB on x86 Linux, 16 KiB on Apple Silicon).
uint64_t page_size();

// A second descriptor of `path` whose reads bypass the page cache (Linux:
// O_DIRECT, which may still refuse a read with EINVAL on some file systems;
// macOS: F_NOCACHE with read-ahead off), or -1 where the file system allows none.
int open_uncached(const std::string& path);

// Drops the cached pages of [offset, offset + len) of an open file (len 0: to the
// end), so that bytes already copied out do not also count against memory. Linux:
// posix_fadvise DONTNEED; macOS: nothing (its unified buffer cache gives clean
// pages back under pressure, and the expert reads do not fill it).
void drop_cached_pages(int fd, uint64_t offset, uint64_t len);

// Zero-filled anonymous memory of `n` bytes, page-aligned, for large long-lived
// buffers (weights, expert slots), or nullptr. Linux advises it for transparent huge
// pages (the kernel's "madvise" mode honours that; "never" ignores it): a model read
// into 2 MiB pages takes 512x fewer page faults and TLB entries (on the VM of
// docs/BENCHMARKS.md "Weights in huge pages", a 441 MB model's first prefill after
// loading ran 3x faster). macOS: plain anonymous memory.
void* map_memory(size_t n);
void unmap_memory(void* p, size_t n);

// Gives the pages of [addr, addr + len) of map_memory's memory back to the system;
// the range stays mapped and reads as zeros (Linux) or as undefined bytes (macOS)
// when next touched. addr and len are multiples of the page size.
void release_memory(void* addr, size_t len);
// Commits the pages of [addr, addr + len) of map_memory's memory now, zero-filling
// the ones not yet there and leaving the bytes of the others as they are, so that a
// later read into them (an expert slot filled by O_DIRECT) does not fault and zero
// pages inside the read. Safe while other threads read or write the range. Linux:
// MADV_POPULATE_WRITE (5.14+); false where the system has no such call (macOS, older
// kernels: the pages are committed on first touch instead).
bool populate_memory(void* addr, size_t len);

// Writes a file's data to stable storage (Linux: fdatasync; macOS: F_FULLFSYNC,
// as fsync there does not flush the drive's cache). False on failure (errno set).
bool sync_data(int fd);

// A file's modification and status-change times in nanoseconds.
int64_t mtime_ns(const struct stat& st);
int64_t ctime_ns(const struct stat& st);

// send() on a socket without SIGPIPE when the peer has gone (EPIPE instead).
ssize_t send_nosignal(int fd, const void* data, size_t n);

// Waits up to `timeout_ms` for one of `sigs`, which every thread blocks, and takes
// it: its number, or 0 when none came in time. Linux: sigtimedwait; macOS, which has
// none: sigpending every 10 ms, then sigwait for the one pending.
int wait_signal(const sigset_t& sigs, int timeout_ms);

// Memory, in bytes; 0 where unknown. Within a container's limit (Linux cgroup v2
// memory.max or v1 memory.limit_in_bytes) when that is lower than the machine's.
struct MemoryInfo {
  uint64_t total = 0;      // physical memory (Linux: MemTotal; macOS: hw.memsize)
  uint64_t available = 0;  // what can be had now without swapping (Linux: MemAvailable;
                           // macOS: free + inactive + purgeable + speculative pages)
};
MemoryInfo memory_info();

// The process's peak resident set size so far.
uint64_t peak_rss_bytes();

// The user's cache directory, from the values of XDG_CACHE_HOME and HOME (which
// tools/environment.cpp, the one reader of the environment, passes in); "" when
// neither is set. Linux: $XDG_CACHE_HOME, else $HOME/.cache. macOS: $XDG_CACHE_HOME
// when set, else $HOME/Library/Caches.
std::string user_cache_dir(const std::string& xdg_cache_home, const std::string& home);

// aarch64: the dot-product extension (SDOT/UDOT, vdotq_s32). Linux:
// getauxval(AT_HWCAP) & HWCAP_ASIMDDP; macOS: hw.optional.arm.FEAT_DotProd. False elsewhere.
bool cpu_has_arm_dotprod();

}  // namespace deltafin::platform
