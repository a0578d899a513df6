// Writes a GGUF file: metadata and tensor directory first, then each tensor's data
// in directory order, streamed (a 20 GB model never sits in memory). The file is
// written under a temporary name and renamed into place by finish(), so a reader
// never sees a half-written model.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace deltafin {

class GGUFWriter {
 public:
  explicit GGUFWriter(std::string path) : path_(std::move(path)) {}
  ~GGUFWriter();
  GGUFFile& file() { return file_; }
  // Adds a tensor to the directory (before begin()).
  // `shape` lists ne[0] (contiguous) first; at most kMaxDims entries.
  void add_tensor(const std::string& name, DType type, std::initializer_list<int64_t> shape);
  // Writes the header; tensor data follows with write_data() in directory order.
  Status begin();
  // Appends bytes of the current tensor; a tensor may be written in several calls.
  // data == nullptr leaves a hole of n bytes (read back as zeros; a sparse file).
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

// Split models in the layout of llama.cpp's gguf-split: part k (0-based) of N is
// PREFIX-{k+1:05d}-of-{N:05d}.gguf. Every part carries split.no (u16, k),
// split.count (u16, N) and split.tensors.count (i32, tensors in all parts); the
// first part also carries all the model's metadata, the others only those keys
// (and general.alignment when it is not the default). Tensors keep their order and
// are spread over the parts in contiguous runs of about equal bytes, at least one
// per part.
struct GGUFSplitOptions {
  // Default: the input path less ".gguf" (and less its -0000k-of-0000N suffix).
  std::string out_prefix;
  // Delete the input file (every part of a split input) once all parts are written.
  bool remove_input = false;
};

// Splits the model at `path` (one GGUF, or the first part of a split model) into
// n_parts files, streaming tensor data through a bounded buffer. `parts`, when
// given, receives the paths written. n_parts == 1 writes one file without split
// keys (a merge). Refuses to overwrite the input's files. On error no part is left
// behind.
Status split_gguf(const std::string& path, int n_parts, const GGUFSplitOptions& opts = {},
                  std::vector<std::string>* parts = nullptr);

}  // namespace deltafin
