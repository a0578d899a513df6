// core/platform.h on the machine the tests run on: the memory it reports against
// what the OS says by other means, the cache directory's rules, an uncached read
// of a real file, the page and block sizes.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

TEST(Platform, PeakRssCountsWhatWasTouched) {
  const uint64_t before = platform::peak_rss_bytes();
  EXPECT_GT(before, uint64_t(1) << 20);  // bytes, not kilobytes
  std::vector<char> v(size_t(64) << 20, 1);
  EXPECT_GE(platform::peak_rss_bytes(), uint64_t(v.size()));
  EXPECT_EQ(v[v.size() / 2], 1);
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
