// core/platform.h on the machine the tests run on: the memory it reports against
// what the OS says by other means, the cache directory's rules, an uncached read
// of a real file, the page and block sizes.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "core/platform.h"

using namespace deltafin;

TEST(Platform, MemoryIsPlausible) {
  const platform::MemoryInfo m = platform::memory_info();
  ASSERT_GT(m.total, uint64_t(64) << 20);
  EXPECT_GT(m.available, 0u);
  EXPECT_LE(m.available, m.total);
  // No more than the physical memory the C library counts.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  ASSERT_GT(pages, 0);
  EXPECT_LE(m.total, uint64_t(pages) * uint64_t(page));
}

// `deltafin serve`'s watcher: a blocked signal sent to this thread is taken, once;
// with none pending the wait ends after its timeout with 0.
TEST(Platform, WaitSignalTakesABlockedSignalOrTimesOut) {
  sigset_t sigs, old;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGUSR1);
  sigaddset(&sigs, SIGUSR2);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &sigs, &old), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(platform::wait_signal(sigs, 50), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(45));
  ASSERT_EQ(::pthread_kill(::pthread_self(), SIGUSR2), 0);
  EXPECT_EQ(platform::wait_signal(sigs, 1000), SIGUSR2);
  EXPECT_EQ(platform::wait_signal(sigs, 10), 0);  // taken, not left pending
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
}

TEST(Platform, PeakRssCountsWhatWasTouched) {
  const uint64_t before = platform::peak_rss_bytes();
  EXPECT_GT(before, uint64_t(1) << 20);  // bytes, not kilobytes
  std::vector<char> v(size_t(64) << 20, 1);
  EXPECT_GE(platform::peak_rss_bytes(), uint64_t(v.size()));
  EXPECT_EQ(v[v.size() / 2], 1);
}

// Mapped memory (large AlignedBuffers): page-aligned, zero-filled, writable to its
// last byte, and counted as resident once touched.
TEST(Platform, MappedMemory) {
  const size_t n = (size_t(5) << 20) + 123;
  auto* p = static_cast<unsigned char*>(platform::map_memory(n));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % platform::page_size(), 0u);
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[n - 1], 0);
  for (size_t i = 0; i < n; i += 4096) p[i] = static_cast<unsigned char>(i >> 12);
  p[n - 1] = 7;
  EXPECT_EQ(p[4096 * 300], static_cast<unsigned char>(300));
  EXPECT_EQ(p[n - 1], 7);
  EXPECT_GE(platform::peak_rss_bytes(), uint64_t(n));
#ifdef __linux__
  // Whole 2 MiB ranges can be huge pages only when the mapping starts on one.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20), 0u);
  // Released pages read as zeros again; their neighbours keep their bytes.
  platform::release_memory(p + 4096 * 300, 4096 * 2);
  EXPECT_EQ(p[4096 * 300], 0);
  EXPECT_EQ(p[4096 * 301], 0);
  EXPECT_EQ(p[4096 * 299], static_cast<unsigned char>(299));
  EXPECT_EQ(p[4096 * 302], static_cast<unsigned char>(302));
#endif
  platform::unmap_memory(p, n);
  platform::unmap_memory(nullptr, n);  // a no-op, as free(nullptr)

  // Both sides of the threshold, moved and replaced.
  AlignedBuffer big(AlignedBuffer::kMapFrom), small(AlignedBuffer::kMapFrom - 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 4096, 0u);
  static_cast<char*>(big.data())[AlignedBuffer::kMapFrom - 1] = 1;
  AlignedBuffer moved = std::move(big);
  EXPECT_EQ(big.data(), nullptr);
  EXPECT_EQ(static_cast<char*>(moved.data())[AlignedBuffer::kMapFrom - 1], 1);
  moved = std::move(small);
  EXPECT_EQ(moved.size(), AlignedBuffer::kMapFrom - 1);
}

// mincore takes (void*, size_t, unsigned char*) on Linux, (caddr_t, size_t, char*) on macOS.
template <typename Addr, typename Vec>
int call_mincore(int (*f)(Addr, size_t, Vec*), const void* p, size_t n, unsigned char* v) {
  return f(static_cast<Addr>(const_cast<void*>(p)), n, reinterpret_cast<Vec*>(v));
}

// Pages of [p, p + n) resident now (mincore), counted in system pages.
size_t resident_pages(const void* p, size_t n) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((n + page - 1) / page);
  if (call_mincore(&::mincore, p, n, v.data()) != 0) return 0;
  size_t k = 0;
  for (unsigned char c : v) k += c & 1;
  return k;
}

// populate_memory commits pages without changing what is already written there.
TEST(Platform, PopulateMemoryCommitsAndKeepsBytes) {
  const size_t n = size_t(8) << 20, page = size_t(::sysconf(_SC_PAGESIZE));
  auto* p = static_cast<unsigned char*>(platform::map_memory(n));
  ASSERT_NE(p, nullptr);
  p[5] = 42;
  p[n / 2 + 7] = 43;
  EXPECT_LT(resident_pages(p, n), n / page);
  if (!platform::populate_memory(p, n)) {
    platform::unmap_memory(p, n);
#ifdef __linux__
    // Only a kernel older than 5.14 has no MADV_POPULATE_WRITE.
    GTEST_SKIP() << "this kernel cannot populate memory";
#else
    return;
#endif
  }
  EXPECT_EQ(resident_pages(p, n), n / page);
  EXPECT_EQ(p[5], 42);
  EXPECT_EQ(p[n / 2 + 7], 43);
  EXPECT_EQ(p[n / 2], 0);
  EXPECT_EQ(p[n - 1], 0);
  platform::release_memory(p, n);
  EXPECT_EQ(resident_pages(p, n), 0u);
  platform::unmap_memory(p, n);
}

TEST(Platform, Sizes) {
  const uint64_t page = platform::page_size();
  EXPECT_GE(page, 4096u);
  EXPECT_EQ(page & (page - 1), 0u);
  EXPECT_EQ(platform::kDirectIoBlock % 512, 0u);
}

TEST(Platform, UserCacheDir) {
  EXPECT_EQ(platform::user_cache_dir("/x/cache", "/home/u"), "/x/cache");  // XDG_CACHE_HOME wins
  EXPECT_EQ(platform::user_cache_dir("", ""), "");
#if defined(__APPLE__)
  EXPECT_EQ(platform::user_cache_dir("", "/Users/u"), "/Users/u/Library/Caches");
#else
  EXPECT_EQ(platform::user_cache_dir("", "/home/u"), "/home/u/.cache");
#endif
}

// An uncached descriptor reads the same bytes as a buffered one, aligned (the
// file system may refuse to open one: tmpfs does for O_DIRECT).
TEST(Platform, UncachedReadMatches) {
  const std::string dir = ::testing::TempDir().empty() ? std::string("/tmp") : ::testing::TempDir();
  const std::string path = dir + "/deltafin_platform_test.bin";
  std::string bytes(3 * platform::kDirectIoBlock, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 131 % 251);
  { std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size())); }
  const int fd = platform::open_uncached(path);
  if (fd >= 0) {
    void* buf = nullptr;
    ASSERT_EQ(::posix_memalign(&buf, platform::kDirectIoBlock, 2 * platform::kDirectIoBlock), 0);
    const ssize_t n = ::pread(fd, buf, 2 * platform::kDirectIoBlock, off_t(platform::kDirectIoBlock));
    if (n >= 0) {  // EINVAL: the file system took the flag at open and refuses it at read
      ASSERT_EQ(size_t(n), 2 * platform::kDirectIoBlock);
      EXPECT_EQ(std::string(static_cast<char*>(buf), size_t(n)), bytes.substr(platform::kDirectIoBlock));
    }
    std::free(buf);
    platform::drop_cached_pages(fd, 0, 0);
    ::close(fd);
  }
  std::filesystem::remove(path);
}
