#include "cache/core_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "cache/fs.h"
#include "core/log.h"
#include "core/platform.h"

namespace deltafin {

namespace {

bool by_offset(const CoreChunk& a, const CoreChunk& b) { return a.offset < b.offset; }

// Complete lines "offset len hash" of chunks within a file of `file_size` bytes; a
// torn last line (a killed writer) is ignored. A line that is malformed, names a
// chunk of more than kMaxCoreChunk bytes or past the end of the file, or overlaps
// another is left out and described in *bad (the first one), so that a damaged or
// tampered manifest never sizes a buffer.
std::vector<CoreChunk> parse_chunks(const std::string& text, size_t skip_lines, uint64_t file_size,
                                    std::string* bad) {
  std::vector<CoreChunk> out;
  size_t pos = 0, line_no = 0;
  auto complain = [&](const std::string& line, const char* why) {
    if (bad->empty()) *bad = fmt::format("line {} '{}' {}", line_no, line.substr(0, 80), why);
  };
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line_no++ < skip_lines) continue;
    unsigned long long o = 0, l = 0, h = 0;
    int used = 0;
    if (!(std::sscanf(line.c_str(), "%llu %llu %llx%n", &o, &l, &h, &used) == 3 && size_t(used) == line.size() &&
          std::isdigit(static_cast<unsigned char>(line[0]))))
      complain(line, "is malformed");
    else if (l == 0 || l > kMaxCoreChunk)
      complain(line, fmt::format("names a chunk of {} bytes (1 to {} allowed)", l, kMaxCoreChunk).c_str());
    else if (o > file_size || l > file_size - o)
      complain(line, fmt::format("names a chunk past the end of the {}-byte file", file_size).c_str());
    else
      out.push_back({o, l, h});
  }
  std::stable_sort(out.begin(), out.end(), by_offset);
  // The same chunk twice (stored again): the later line wins. Overlaps are damage.
  std::vector<CoreChunk> kept;
  for (const CoreChunk& c : out) {
    if (!kept.empty() && kept.back().offset == c.offset && kept.back().len == c.len) {
      kept.back() = c;
    } else if (!kept.empty() && c.offset < kept.back().offset + kept.back().len) {
      if (bad->empty()) *bad = fmt::format("chunks at offsets {} and {} overlap", kept.back().offset, c.offset);
    } else {
      kept.push_back(c);
    }
  }
  return kept;
}

std::string chunk_line(const CoreChunk& c) { return fmt::format("{} {} {:016x}\n", c.offset, c.len, c.hash); }

}  // namespace

std::vector<CoreChunk> plan_core_chunks(const GGUFFile& meta, uint64_t file_size,
                                        const std::set<std::string>& expert_tensors, uint64_t max_chunk) {
  std::vector<CoreChunk> ranges;
  const uint64_t mib = uint64_t(1) << 20;
  ranges.push_back({0, std::min(file_size, (meta.data_offset + mib - 1) / mib * mib), 0});
  for (const auto& t : meta.tensors)
    if (!expert_tensors.count(t.name) && t.bytes > 0) ranges.push_back({meta.data_offset + t.offset, t.bytes, 0});
  std::sort(ranges.begin(), ranges.end(), by_offset);
  std::vector<CoreChunk> merged;
  for (const CoreChunk& r : ranges) {
    // Merge overlapping ranges and those a little padding apart.
    if (!merged.empty() && r.offset <= merged.back().offset + merged.back().len + 4096) {
      uint64_t end = std::max(merged.back().offset + merged.back().len, r.offset + r.len);
      merged.back().len = end - merged.back().offset;
    } else {
      merged.push_back(r);
    }
  }
  std::vector<CoreChunk> chunks;
  for (const CoreChunk& m : merged)
    for (uint64_t o = m.offset; o < m.offset + m.len; o += max_chunk)
      chunks.push_back({o, std::min(max_chunk, m.offset + m.len - o), 0});
  return chunks;
}

Result<std::unique_ptr<CoreFile>> CoreFile::open(const std::string& base, const std::string& tmp_dir,
                                                 uint64_t file_size) {
  std::unique_ptr<CoreFile> c(new CoreFile());
  c->base_ = base;
  c->tmp_dir_ = tmp_dir;
  c->data_path_ = base + ".bin";
  c->file_size_ = file_size;
  struct stat st;
  // O_NONBLOCK: a FIFO or device in the data file's place must not block; anything
  // but a regular file is removed with what described it, and the core starts over.
  for (int tries = 0;; ++tries) {
    c->fd_ = ::open(c->data_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
    if (c->fd_ < 0 && !(errno == ENXIO || errno == EISDIR))
      return make_error("cannot open '{}': {}", c->data_path_, std::strerror(errno));
    if (c->fd_ >= 0 && ::fstat(c->fd_, &st) == 0 && S_ISREG(st.st_mode)) break;
    if (c->fd_ >= 0) ::close(c->fd_);
    c->fd_ = -1;
    if (tries > 0 || ::unlink(c->data_path_.c_str()) != 0)
      return make_error("'{}' is not a regular file; remove it", c->data_path_);
    DF_LOG_WARN("'{}' is not a regular file; removed it, the core is fetched again", c->data_path_);
    for (const char* ext : {".ok", ".journal", ".verified"}) ::unlink((base + ext).c_str());
  }
  if (uint64_t(st.st_size) != file_size && ::ftruncate(c->fd_, off_t(file_size)) != 0)
    return make_error("cannot size '{}' to {} bytes: {}", c->data_path_, file_size, std::strerror(errno));
  auto manifest = read_small_file(base + ".ok");
  const std::string head = fmt::format("deltafin-core 1 {}\n", file_size);
  std::string bad;
  if (manifest.ok() && manifest->rfind(head, 0) == 0) {
    c->stored_ = parse_chunks(*manifest, 1, file_size, &bad);
    c->complete_ = true;
  }
  if (c->complete_ && !bad.empty()) {
    // Written atomically, a manifest is whole or absent: a bad line is damage. Like
    // any corrupt cache entry it is dropped, and the core is fetched again.
    DF_LOG_WARN("{}.ok: {}; dropping the manifest, the core is fetched again", base, bad);
    ::unlink((base + ".ok").c_str());
    ::unlink((base + ".journal").c_str());
    ::unlink((base + ".verified").c_str());
    c->stored_.clear();
    c->complete_ = false;
  } else if (!c->complete_) {
    if (manifest.ok()) ::unlink((base + ".ok").c_str());  // another size: stale
    if (auto j = read_small_file(base + ".journal"); j.ok()) {
      if (j->rfind(head, 0) == 0) {
        c->stored_ = parse_chunks(*j, 1, file_size, &bad);  // bad lines: those chunks are fetched again
        c->resumed_ = !c->stored_.empty();
      } else {
        ::unlink((base + ".journal").c_str());  // another size: stale
      }
    }
  }
  return c;
}

CoreFile::~CoreFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool CoreFile::covers(uint64_t offset, uint64_t n) const {
  if (!complete_) return false;
  // Walk the chunks from the one holding `offset`; they must be contiguous to the end.
  auto it = std::upper_bound(stored_.begin(), stored_.end(), offset,
                             [](uint64_t o, const CoreChunk& c) { return o < c.offset; });
  if (it == stored_.begin()) return false;
  --it;
  uint64_t pos = offset;
  const uint64_t end = offset + n;
  for (; it != stored_.end() && pos < end; ++it) {
    if (it->offset > pos || it->offset + it->len <= pos) return false;
    pos = it->offset + it->len;
  }
  return pos >= end;
}

Status CoreFile::read(uint64_t offset, void* dst, size_t n) const {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return make_error("{}: read at offset {} failed: {}", data_path_, offset, r < 0 ? std::strerror(errno) : "end of file");
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
  return {};
}

std::vector<CoreChunk> CoreFile::missing(const std::vector<CoreChunk>& plan) const {
  std::vector<CoreChunk> out;
  for (const CoreChunk& c : plan) {
    auto it = std::lower_bound(stored_.begin(), stored_.end(), c, by_offset);
    if (it == stored_.end() || it->offset != c.offset || it->len != c.len) out.push_back(c);
  }
  return out;
}

Status CoreFile::store(const CoreChunk& chunk, const char* data) {
  CoreChunk c = chunk;
  c.hash = XXH3_64bits(data, c.len);
  ::unlink((base_ + ".verified").c_str());
  uint64_t done = 0;
  while (done < c.len) {
    ssize_t w = ::pwrite(fd_, data + done, c.len - done, off_t(c.offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return make_error("cannot write the model core to '{}': {}", data_path_, std::strerror(errno));
    done += uint64_t(w);
  }
  if (!platform::sync_data(fd_)) return make_error("cannot sync '{}': {}", data_path_, std::strerror(errno));
  // Journal: the chunk counts once its line is complete.
  const std::string jpath = base_ + ".journal";
  const std::string head = fmt::format("deltafin-core 1 {}\n", file_size_);
  int jfd = ::open(jpath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (jfd < 0) return make_error("cannot open '{}': {}", jpath, std::strerror(errno));
  struct stat st;
  std::string line = (::fstat(jfd, &st) == 0 && st.st_size == 0 ? head : std::string()) + chunk_line(c);
  ssize_t w = ::write(jfd, line.data(), line.size());
  const int err = errno;
  const bool synced = w == ssize_t(line.size()) && platform::sync_data(jfd);
  ::close(jfd);
  if (!synced) return make_error("cannot write '{}': {}", jpath, std::strerror(w < 0 ? err : ENOSPC));
  auto it = std::lower_bound(stored_.begin(), stored_.end(), c, by_offset);
  if (it != stored_.end() && it->offset == c.offset) *it = c;
  else stored_.insert(it, c);
  return {};
}

Status CoreFile::finish(const std::vector<CoreChunk>& plan) {
  if (!missing(plan).empty()) return make_error("{}: the core is not complete", data_path_);
  std::string text = fmt::format("deltafin-core 1 {}\n", file_size_);
  for (const CoreChunk& c : stored_) text += chunk_line(c);
  DF_TRY(write_file_atomic(base_ + ".ok", tmp_dir_, {text}));
  complete_ = true;
  ::unlink((base_ + ".journal").c_str());
  // Every chunk was hashed in memory and synced by this process: the stamp holds.
  // Chunks an earlier process stored have sat on disk since: the next open verifies.
  if (!resumed_) {
    const std::string st = stamp();
    if (!st.empty()) (void)write_file_atomic(base_ + ".verified", tmp_dir_, {st});
  }
  return {};
}

Result<int> CoreFile::verify() {
  int bad = 0;
  std::vector<char> buf;
  std::vector<CoreChunk> good;
  for (const CoreChunk& c : stored_) {
    buf.resize(c.len);
    if (read(c.offset, buf.data(), c.len).ok() && XXH3_64bits(buf.data(), c.len) == c.hash) good.push_back(c);
    else ++bad;
  }
  const std::string stamp_path = base_ + ".verified";
  if (bad == 0) {
    if (complete_) {
      const std::string text = stamp();
      // A stamp that cannot be written only costs a rehash next time.
      if (!text.empty()) (void)write_file_atomic(stamp_path, tmp_dir_, {text});
    }
    return 0;
  }
  ::unlink(stamp_path.c_str());
  stored_ = std::move(good);
  complete_ = false;
  ::unlink((base_ + ".ok").c_str());
  DF_TRY(rewrite_journal());
  return bad;
}

std::string CoreFile::stamp() const {
  struct stat st;
  auto manifest = read_small_file(base_ + ".ok");
  if (::fstat(fd_, &st) != 0 || !manifest.ok()) return "";
  constexpr int64_t kNs = 1000000000;
  const int64_t m = platform::mtime_ns(st), c = platform::ctime_ns(st);
  return fmt::format("deltafin-core-verified 1 {} {} {}.{:09} {}.{:09} {:016x}\n", uint64_t(st.st_size),
                     uint64_t(st.st_ino), m / kNs, m % kNs, c / kNs, c % kNs,
                     XXH3_64bits(manifest->data(), manifest->size()));
}

Result<int> CoreFile::verify_if_changed(bool* skipped) {
  if (skipped) *skipped = false;
  if (complete_) {
    auto was = read_small_file(base_ + ".verified");
    const std::string now = stamp();
    if (was.ok() && !now.empty() && *was == now) {
      if (skipped) *skipped = true;
      return 0;
    }
  }
  return verify();
}

Status CoreFile::rewrite_journal() {
  std::string text = fmt::format("deltafin-core 1 {}\n", file_size_);
  for (const CoreChunk& c : stored_) text += chunk_line(c);
  return write_file_atomic(base_ + ".journal", tmp_dir_, {text});
}

uint64_t CoreFile::stored_bytes() const {
  uint64_t n = 0;
  for (const CoreChunk& c : stored_) n += c.len;
  return n;
}

}  // namespace deltafin
