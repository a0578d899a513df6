// GGUF (versions 2 and 3): metadata and tensor directory, parsed from a ByteSource.
// The parser reads the header in bounded chunks and never maps the file; tensor
// data stays where it is (callers read byte ranges through the source).
//
// Hostile input: every count, length and offset is checked against the bytes that
// remain before anything is allocated; errors name the field and file offset.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "io/byte_source.h"

namespace deltafin {

enum class GGUFType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GGUFType t);

// One metadata value. Integers of any width are kept as int64 (u64 as its bits),
// floats as double; `type` remembers the on-disk type so a writer can reproduce it.
struct GGUFValue {
  GGUFType type = GGUFType::U32;
  GGUFType elem_type = GGUFType::U32;  // arrays only
  int64_t i = 0;
  double f = 0;
  std::string s;
  // Arrays: exactly one of these is used, by elem_type.
  std::vector<int64_t> ints;            // integer and bool arrays
  std::vector<double> floats;           // F32/F64 arrays
  std::vector<std::string> strings;     // string arrays
  std::vector<GGUFValue> arrays;        // arrays of arrays

  bool is_array() const { return type == GGUFType::ARRAY; }
  uint64_t array_size() const;

  static GGUFValue u32(uint32_t v);
  static GGUFValue i32(int32_t v);
  static GGUFValue u64(uint64_t v);
  static GGUFValue f32(float v);
  static GGUFValue boolean(bool v);
  static GGUFValue str(std::string v);
  static GGUFValue int_array(GGUFType elem, std::vector<int64_t> v);
  static GGUFValue float_array(std::vector<double> v);
  static GGUFValue string_array(std::vector<std::string> v);
};

// Same type and same value, floats compared bit for bit (NaN equals itself).
bool gguf_values_equal(const GGUFValue& a, const GGUFValue& b);

constexpr int kMaxDims = 4;

struct GGUFTensorInfo {
  std::string name;
  DType type = DType::F32;
  uint32_t n_dims = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // ne[0] is the contiguous dimension
  uint64_t offset = 0;   // relative to the file's data section
  uint64_t bytes = 0;    // size of the data
  uint64_t n_elements() const { return uint64_t(ne[0]) * ne[1] * ne[2] * ne[3]; }
};

struct GGUFFile {
  uint32_t version = 3;
  uint32_t alignment = 32;
  uint64_t data_offset = 0;  // absolute file offset of the data section
  std::vector<std::string> keys;               // in file order
  std::map<std::string, GGUFValue> kv;
  std::vector<GGUFTensorInfo> tensors;         // in file order

  const GGUFValue* find(const std::string& key) const;
  // Sets a key, appending it to `keys` if new (writer side).
  void set(const std::string& key, GGUFValue v);
  // Typed getters: an error names the key if it is missing or of the wrong kind.
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;
  Result<std::string> get_string(const std::string& key) const;
  Result<bool> get_bool(const std::string& key) const;
  int64_t int_or(const std::string& key, int64_t def) const;
  double float_or(const std::string& key, double def) const;
  bool bool_or(const std::string& key, bool def) const;
  std::string string_or(const std::string& key, const std::string& def) const;
};

struct GGUFParseLimits {
  uint64_t max_kv = 1 << 20;
  uint64_t max_tensors = 1 << 22;
  uint64_t max_string = 1 << 26;   // 64 MiB (chat templates are large, not that large)
  uint64_t max_array = 1 << 26;
  int max_array_depth = 4;
};

// Parses the header of one GGUF file. Checks that every tensor lies inside the
// file, is aligned, does not overlap another, and has a known type whose block size
// divides its rows.
Result<GGUFFile> parse_gguf(ByteSource& src, const GGUFParseLimits& limits = {});

// Serialises metadata and tensor infos (offsets assigned in order, aligned) to the
// bytes that precede the data section, padding included; sets each tensor's bytes
// and offset, and file.data_offset. The alignment readers use is general.alignment:
// a valid key sets file.alignment, else a non-default file.alignment is added as
// that key (an invalid key is written as given). Writers then append each tensor's
// data padded to the alignment (see gguf_writer.h).
std::string serialize_gguf_header(GGUFFile& file);

}  // namespace deltafin
