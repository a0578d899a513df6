#include "cache/expert_entry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "cache/fs.h"
#include "core/platform.h"

namespace deltafin {

namespace {

constexpr char kMagic[8] = {'D', 'F', 'X', 'E', 'N', 'T', '1', 0};

// Layout of the 128-byte header (little-endian, as the host).
struct RawHeader {
  char magic[8];
  uint32_t layer, expert;
  uint64_t offset[kExpertParts];
  uint64_t bytes[kExpertParts];
  uint64_t payload_hash;
  uint64_t header_hash;  // XXH3-64 of everything above
  char pad[kEntryHeaderBytes - 8 - 8 - 48 - 16];
};
static_assert(sizeof(RawHeader) == kEntryHeaderBytes);
constexpr size_t kHashedHeader = offsetof(RawHeader, header_hash);

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

EntryRead corrupt(std::string why) { return {EntryState::Corrupt, std::move(why)}; }

// Opens and checks the header; fills h.
EntryRead open_checked(const std::string& path, RawHeader* h, int* fd_out) {
  // O_NONBLOCK: a FIFO (or device) put in an entry's place must not block open();
  // it is then rejected as not a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return {EntryState::Missing, ""};
    return corrupt(fmt::format("cannot open: {}", std::strerror(errno)));
  }
  *fd_out = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0) return corrupt("cannot stat");
  if (!S_ISREG(st.st_mode)) return corrupt("not a regular file");
  if (!pread_full(fd, reinterpret_cast<char*>(h), sizeof *h, 0)) return corrupt("shorter than its header");
  if (std::memcmp(h->magic, kMagic, sizeof kMagic) != 0) return corrupt("bad magic");
  if (XXH3_64bits(h, kHashedHeader) != h->header_hash) return corrupt("header checksum mismatch");
  uint64_t total = kEntryHeaderBytes;
  for (int p = 0; p < kExpertParts; ++p) total += h->bytes[p];
  if (uint64_t(st.st_size) != total)
    return corrupt(fmt::format("size {} bytes, the header says {}", uint64_t(st.st_size), total));
  return {EntryState::Ok, ""};
}

// Reads the payload into dst (or scratch) and checks its hash.
EntryRead read_payload(int fd, const RawHeader& h, char* const dst[kExpertParts]) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  std::vector<char> scratch;
  uint64_t pos = kEntryHeaderBytes;
  bool ok = true;
  for (int p = 0; p < kExpertParts && ok; ++p) {
    if (h.bytes[p] == 0) continue;
    char* d = dst ? dst[p] : nullptr;
    if (!d) {
      scratch.resize(h.bytes[p]);
      d = scratch.data();
    }
    ok = pread_full(fd, d, h.bytes[p], pos);
    if (ok) XXH3_64bits_update(s, d, h.bytes[p]);
    pos += h.bytes[p];
  }
  const uint64_t got = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  platform::drop_cached_pages(fd, 0, 0);  // the bytes live in the RAM cache now
  if (!ok) return corrupt("short read");
  if (got != h.payload_hash) return corrupt("payload checksum mismatch");
  return {EntryState::Ok, ""};
}

}  // namespace

uint64_t hash_parts(const char* const parts[kExpertParts], const uint64_t bytes[kExpertParts]) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  for (int p = 0; p < kExpertParts; ++p)
    if (bytes[p]) XXH3_64bits_update(s, parts[p], bytes[p]);
  const uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

std::string encode_entry_header(int layer, int expert, const ExpertSlices& slices, uint64_t payload_hash) {
  RawHeader h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.layer = uint32_t(layer);
  h.expert = uint32_t(expert);
  for (int p = 0; p < kExpertParts; ++p) {
    h.offset[p] = slices.part[p].offset;
    h.bytes[p] = slices.part[p].bytes;
  }
  h.payload_hash = payload_hash;
  h.header_hash = XXH3_64bits(&h, kHashedHeader);
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

EntryRead read_entry(const std::string& path, int layer, int expert, const ExpertSlices& slices,
                     char* const dst[kExpertParts]) {
  RawHeader h;
  int fd = -1;
  EntryRead r = open_checked(path, &h, &fd);
  Fd guard(fd);
  if (r.state != EntryState::Ok) return r;
  if (h.layer != uint32_t(layer) || h.expert != uint32_t(expert))
    return corrupt(fmt::format("holds expert {} of layer {}", h.expert, h.layer));
  for (int p = 0; p < kExpertParts; ++p)
    if (h.offset[p] != slices.part[p].offset || h.bytes[p] != slices.part[p].bytes)
      return corrupt(fmt::format("part {} is {} bytes at offset {}, the model has {} bytes at {}", p, h.bytes[p],
                                 h.offset[p], slices.part[p].bytes, slices.part[p].offset));
  return read_payload(fd, h, dst);
}

EntryRead check_entry_file(const std::string& path, int* layer, int* expert, uint64_t* payload_bytes) {
  RawHeader h;
  int fd = -1;
  EntryRead r = open_checked(path, &h, &fd);
  Fd guard(fd);
  if (r.state != EntryState::Ok) return r;
  *layer = int(h.layer);
  *expert = int(h.expert);
  *payload_bytes = h.bytes[0] + h.bytes[1] + h.bytes[2];
  return read_payload(fd, h, nullptr);
}

}  // namespace deltafin
