// libFuzzer target for the GGUF reader. Contract under test: parse_gguf on any
// bytes returns a GGUFFile or an error message; it never crashes, hangs or
// allocates without bound. On success the result must satisfy the invariants the
// rest of deltafin relies on (tensors inside the file, aligned, not overlapping),
// and writing it back with serialize_gguf_header must give a file that parses to
// the same metadata and tensor directory. ModelFile::open (split-model logic) runs
// on the same bytes.
//
// Built with clang as a libFuzzer binary (ASan + UBSan) when clang is available,
// and always as a replay program over the committed corpus (replay_main.cpp).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "format/gguf.h"
#include "format/model_file.h"

using namespace deltafin;

#define FUZZ_CHECK(cond, ...)                                          \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "fuzz_gguf: check failed: %s\n", #cond);    \
      std::fprintf(stderr, __VA_ARGS__);                               \
      std::fprintf(stderr, "\n");                                      \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

namespace {

// `head` followed by zeros up to `size`: the data section of a re-serialised file
// without allocating it.
class ZeroTailSource final : public ByteSource {
 public:
  ZeroTailSource(std::string head, uint64_t size) : head_(std::move(head)), size_(size) {}
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Status read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset > size_ || n > size_ - offset) return make_error("zero-tail: read past the end");
    std::memset(dst, 0, n);
    if (offset < head_.size()) std::memcpy(dst, head_.data() + offset, std::min<uint64_t>(n, head_.size() - offset));
    return {};
  }

 private:
  std::string head_;
  uint64_t size_;
  std::string name_ = "reserialised.gguf";
};

void check_invariants(const GGUFFile& f, uint64_t file_size) {
  FUZZ_CHECK(f.version == 2 || f.version == 3, "version %u", f.version);
  FUZZ_CHECK(f.alignment > 0 && (f.alignment & (f.alignment - 1)) == 0, "alignment %u", f.alignment);
  FUZZ_CHECK(f.keys.size() == f.kv.size(), "keys %zu kv %zu", f.keys.size(), f.kv.size());
  FUZZ_CHECK(f.data_offset % f.alignment == 0, "data offset %llu", (unsigned long long)f.data_offset);
  for (const auto& t : f.tensors) {
    FUZZ_CHECK(t.n_dims >= 1 && t.n_dims <= uint32_t(kMaxDims), "n_dims %u", t.n_dims);
    FUZZ_CHECK(t.bytes > 0 && t.offset % f.alignment == 0, "tensor %s", t.name.c_str());
    FUZZ_CHECK(f.data_offset <= file_size && t.offset <= file_size - f.data_offset &&
                   t.bytes <= file_size - f.data_offset - t.offset,
               "tensor %s outside the file", t.name.c_str());
    FUZZ_CHECK(dtype_known(uint32_t(t.type)), "tensor type %u", unsigned(t.type));
  }
}

void check_round_trip(const GGUFFile& parsed) {
  GGUFFile f = parsed;
  std::string header = serialize_gguf_header(f);
  uint64_t end = f.data_offset;
  for (const auto& t : f.tensors) end = std::max(end, f.data_offset + t.offset + t.bytes);
  ZeroTailSource src(std::move(header), end);
  auto r = parse_gguf(src);
  FUZZ_CHECK(r.ok(), "re-serialised file does not parse: %s", r.error().message.c_str());
  const GGUFFile& g = *r;
  FUZZ_CHECK(g.version == parsed.version && g.alignment == parsed.alignment, "version/alignment changed");
  FUZZ_CHECK(g.keys == parsed.keys, "keys changed");
  for (const auto& k : g.keys)
    FUZZ_CHECK(gguf_values_equal(g.kv.at(k), parsed.kv.at(k)), "value of '%s' changed", k.c_str());
  FUZZ_CHECK(g.tensors.size() == parsed.tensors.size(), "tensor count changed");
  for (size_t k = 0; k < g.tensors.size(); ++k) {
    const auto &a = g.tensors[k], &b = parsed.tensors[k];
    FUZZ_CHECK(a.name == b.name && a.type == b.type && a.n_dims == b.n_dims && a.bytes == b.bytes &&
                   std::memcmp(a.ne, b.ne, sizeof a.ne) == 0,
               "tensor %zu changed", k);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  {
    auto src = memory_source(bytes, "fuzz.gguf");
    auto r = parse_gguf(*src);
    if (!r.ok()) {
      FUZZ_CHECK(r.error().message.rfind("fuzz.gguf", 0) == 0, "error does not name the file: %s",
                 r.error().message.c_str());
      return 0;
    }
    check_invariants(*r, size);
    check_round_trip(*r);
  }
  // Split-model logic: every part name opens these same bytes.
  SourceOpener opener = [&](const std::string& path) -> Result<std::unique_ptr<ByteSource>> {
    return memory_source(bytes, path);
  };
  auto m = ModelFile::open("fuzz-00001-of-00002.gguf", opener);
  if (m.ok()) {
    for (const auto& [name, ref] : (*m)->tensors()) {
      FUZZ_CHECK(ref.shard >= 0 && ref.shard < (*m)->shard_count(), "shard %d", ref.shard);
      FUZZ_CHECK(ref.file_offset + ref.info->bytes <= size, "tensor %s outside the file", name.c_str());
    }
  }
  return 0;
}
