// Writes a GGUF file: metadata and tensor directory first, then each tensor's data
// in directory order, streamed (a 20 GB model never sits in memory). The file is
// written under a temporary name and renamed into place by finish(), so a reader
// never sees a half-written model.
#pragma once
#include <cstdio>
#include <string>

#include "format/gguf.h"

namespace deltafin {

class GGUFWriter {
 public:
  explicit GGUFWriter(std::string path) : path_(std::move(path)) {}
  ~GGUFWriter();
  GGUFFile& file() { return file_; }
  // Adds a tensor to the directory (before begin()).
  void add_tensor(const std::string& name, DType type, std::initializer_list<int64_t> shape);
  // Writes the header; tensor data follows with write_data() in directory order.
  Status begin();
  // Appends bytes of the current tensor; a tensor may be written in several calls.
  Status write_data(const void* data, size_t n);
  // Checks every tensor got exactly its bytes, syncs and renames into place.
  Status finish();
  uint64_t bytes_written() const { return written_; }

 private:
  Status raw_write(const void* p, size_t n);
  std::string path_, tmp_path_;
  GGUFFile file_;
  FILE* f_ = nullptr;
  size_t cur_ = 0;            // tensor being written
  uint64_t cur_done_ = 0;     // its bytes written so far
  uint64_t written_ = 0;
};

}  // namespace deltafin
