// safetensors: the header of one shard, parsed from a ByteSource. A shard is an
// 8-byte little-endian length N, N bytes of JSON ({"name": {"dtype", "shape",
// "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}), then the
// data; offsets are relative to the data, which starts at 8 + N.
//
// Hostile input: N is bounded before it is read; every tensor's range must lie in
// the file, match dtype size * shape, and not overlap another. Errors name the file
// and the tensor. Only the header is read; tensor bytes stay where they are.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/byte_source.h"

namespace deltafin {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // "BF16", "F32", "F8_E4M3", "U8", "I32", ...
  std::vector<int64_t> shape;  // outermost first (row-major; the last is contiguous)
  uint64_t offset = 0;         // absolute offset in the file (8 + N + begin)
  uint64_t bytes = 0;
  uint64_t n_elements() const;
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;  // 8 + N: what parsing read
  std::vector<SafetensorsTensor> tensors;  // in header order
  std::map<std::string, std::string> metadata;  // __metadata__
};

struct SafetensorsLimits {
  uint64_t max_header = uint64_t(100) << 20;  // the reference implementation's bound
  int max_dims = 8;
};

// Bytes per element of a safetensors dtype; 0 for a name it does not know.
int safetensors_dtype_bytes(const std::string& dtype);

// Reads and checks the header of `src`.
Result<SafetensorsHeader> parse_safetensors(ByteSource& src, const SafetensorsLimits& limits = {});

// Checks and parses header JSON given the file's size (`name` for messages).
Result<SafetensorsHeader> parse_safetensors_json(const std::string& json, uint64_t file_size,
                                                 const std::string& name, const SafetensorsLimits& limits = {});

}  // namespace deltafin
