#include "runtime/prompt_disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "cache/fs.h"
#include "core/log.h"
#include "core/platform.h"

namespace deltafin {

namespace {

constexpr char kMagic[8] = {'D', 'F', 'P', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kVersion = 1;
constexpr const char* kSuffix = ".dfpc";
constexpr uint64_t kMaxTokens = uint64_t(1) << 26;

template <class T>
void put_pod(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// What read_header found.
enum class Header { Ok, Foreign, Damaged };

// The header of an entry file: its model identity and tokens. Foreign: not an entry
// of this format version (another deltafin's; left alone); Damaged: one of ours that
// cannot be read.
Header read_header(const std::string& path, std::string* id, std::vector<int32_t>* tokens) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Header::Foreign;
  char magic[8];
  uint32_t version = 0, id_len = 0;
  uint64_t n = 0;
  Header h = Header::Foreign;
  if (pread_full(fd, magic, 8, 0) && std::memcmp(magic, kMagic, 8) == 0 && pread_full(fd, &version, 4, 8) &&
      version == kVersion) {
    h = Header::Damaged;
    if (pread_full(fd, &id_len, 4, 12) && id_len <= 4096) {
      id->resize(id_len);
      if (pread_full(fd, id->data(), id_len, 16) && pread_full(fd, &n, 8, 16 + id_len) && n > 0 && n <= kMaxTokens) {
        tokens->resize(size_t(n));
        if (pread_full(fd, tokens->data(), size_t(n) * sizeof(int32_t), 24 + id_len)) h = Header::Ok;
      }
    }
  }
  ::close(fd);
  return h;
}

std::string entry_name(const std::string& model_id, const std::vector<int32_t>& tokens) {
  const uint64_t h = XXH3_64bits_withSeed(tokens.data(), tokens.size() * sizeof(int32_t),
                                          XXH3_64bits(model_id.data(), model_id.size()));
  return fmt::format("{:016x}{}", h, kSuffix);
}

}  // namespace

Result<std::unique_ptr<PromptDiskCache>> PromptDiskCache::open(const std::string& dir, const std::string& model_id,
                                                               uint64_t budget_bytes) {
  DF_TRY(make_dirs(dir));
  if (::access(dir.c_str(), W_OK) != 0)
    return make_error("the prompt cache directory '{}' is not writable: {}", dir, std::strerror(errno));
  std::unique_ptr<PromptDiskCache> c(new PromptDiskCache());
  c->dir_ = dir;
  c->model_id_ = model_id;
  c->budget_ = budget_bytes;
  remove_stale_temps(dir);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return make_error("cannot read the prompt cache directory '{}': {}", dir, std::strerror(errno));
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= std::strlen(kSuffix) || !name.ends_with(kSuffix)) continue;
    Entry en;
    en.path = dir + "/" + name;
    std::string id;
    struct stat st {};
    if (::stat(en.path.c_str(), &st) != 0) continue;
    const Header h = read_header(en.path, &id, &en.tokens);
    if (h == Header::Damaged) {
      DF_LOG_WARN("prompt cache: '{}' is a damaged entry; removing it", en.path);
      ::unlink(en.path.c_str());
      continue;
    }
    if (h == Header::Foreign) continue;  // another format version's: not ours to remove
    if (id != model_id) continue;  // another model's
    en.bytes = uint64_t(st.st_size);
    en.used_ns = platform::mtime_ns(st);
    c->entries_.push_back(std::move(en));
  }
  ::closedir(d);
  c->trim(0);
  return c;
}

void PromptDiskCache::remove(size_t i) {
  ::unlink(entries_[i].path.c_str());
  entries_.erase(entries_.begin() + std::ptrdiff_t(i));
}

void PromptDiskCache::trim(uint64_t room) {
  for (;;) {
    uint64_t total = 0;
    for (const Entry& e : entries_) total += e.bytes;
    if (entries_.empty() || total + room <= budget_) return;
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); ++i)
      if (entries_[i].used_ns < entries_[oldest].used_ns) oldest = i;
    remove(oldest);
    ++stats_.evictions;
  }
}

Status PromptDiskCache::put(const std::vector<int32_t>& tokens, const SeqState& state) {
  if (tokens.empty() || int(tokens.size()) != state.n_past) return {};
  const std::string path = dir_ + "/" + entry_name(model_id_, tokens);
  for (Entry& e : entries_)
    if (e.tokens == tokens) {
      ::utimensat(AT_FDCWD, e.path.c_str(), nullptr, 0);  // now
      struct stat st {};
      if (::stat(e.path.c_str(), &st) == 0) e.used_ns = platform::mtime_ns(st);
      return {};
    }
  std::string head(kMagic, 8);
  put_pod(head, kVersion);
  put_pod(head, uint32_t(model_id_.size()));
  head += model_id_;
  put_pod(head, uint64_t(tokens.size()));
  head.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(int32_t));
  const std::string body = state.save();
  put_pod(head, uint64_t(body.size()));
  XXH3_state_t* h = XXH3_createState();
  XXH3_64bits_reset(h);
  XXH3_64bits_update(h, head.data(), head.size());
  XXH3_64bits_update(h, body.data(), body.size());
  const uint64_t sum = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  std::string tail;
  put_pod(tail, sum);
  const uint64_t bytes = head.size() + body.size() + tail.size();
  if (bytes > budget_) return {};  // larger than the whole tier
  trim(bytes);
  if (Status s = write_file_atomic(path, dir_, {head, body, tail}); !s.ok()) {
    ++stats_.failures;
    return s;
  }
  Entry e;
  e.path = path;
  e.tokens = tokens;
  e.bytes = bytes;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) e.used_ns = platform::mtime_ns(st);
  entries_.push_back(std::move(e));
  ++stats_.writes;
  return {};
}

int PromptDiskCache::best(const std::vector<int32_t>& prompt, size_t most, size_t* len) const {
  int best = -1;
  *len = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const std::vector<int32_t>& t = entries_[i].tokens;
    const size_t n = std::min({t.size(), prompt.size(), most});
    size_t k = 0;
    while (k < n && t[k] == prompt[k]) ++k;
    if (k > *len) best = int(i), *len = k;
  }
  return best;
}

Status PromptDiskCache::load(int i, SeqState& state, std::vector<int32_t>* tokens) {
  Entry& e = entries_[size_t(i)];
  auto bad = [&](const std::string& why) {
    const std::string path = e.path;
    remove(size_t(i));
    ++stats_.failures;
    return make_error("prompt cache entry '{}' {}; removed it", path, why);
  };
  auto r = read_small_file(e.path);
  if (!r.ok()) return bad(fmt::format("cannot be read ({})", r.error().message));
  const std::string& f = *r;
  const size_t head = 16 + model_id_.size() + 8 + e.tokens.size() * sizeof(int32_t);
  uint64_t body = 0, sum = 0;
  if (f.size() < head + 16) return bad("is cut short");
  std::memcpy(&body, f.data() + head, 8);
  if (body != f.size() - head - 16) return bad("is cut short or padded");
  std::memcpy(&sum, f.data() + f.size() - 8, 8);
  if (XXH3_64bits(f.data(), f.size() - 8) != sum) return bad("fails its checksum (damaged)");
  if (Status s = state.load(std::string_view(f).substr(head + 8, size_t(body))); !s.ok()) return bad(s.error().message);
  *tokens = e.tokens;
  ::utimensat(AT_FDCWD, e.path.c_str(), nullptr, 0);
  struct stat st {};
  if (::stat(e.path.c_str(), &st) == 0) e.used_ns = platform::mtime_ns(st);
  ++stats_.hits;
  return {};
}

PromptDiskStats PromptDiskCache::stats() const {
  PromptDiskStats s = stats_;
  s.entries = int(entries_.size());
  for (const Entry& e : entries_) s.bytes += e.bytes;
  return s;
}

}  // namespace deltafin
