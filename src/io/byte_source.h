// Byte sources: where model bytes come from. The GGUF parser and the expert store
// read through this interface only, so a local file and an HTTP origin look alike.
// Implementations are thread-safe for concurrent read_at calls.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"

namespace deltafin {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Total size in bytes.
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at offset into dst, or returns an error naming the source
  // and range. Reading past the end is an error.
  virtual Status read_at(uint64_t offset, void* dst, size_t n) = 0;
  // Path or URL, for messages.
  virtual const std::string& name() const = 0;
};

struct FileSourceOptions {
  // Bypass the page cache (O_DIRECT) for large aligned reads; unaligned reads fall
  // back to a buffered descriptor. Used for expert streaming.
  bool direct = false;
};

Result<std::unique_ptr<ByteSource>> open_file_source(const std::string& path,
                                                     FileSourceOptions opts = {});

// A source over bytes held in memory (tests, fuzzing).
std::unique_ptr<ByteSource> memory_source(std::string bytes, std::string name = "<memory>");

}  // namespace deltafin
