#include "format/gguf.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <set>

namespace deltafin {

const char* gguf_type_name(GGUFType t) {
  switch (t) {
    case GGUFType::U8: return "u8";
    case GGUFType::I8: return "i8";
    case GGUFType::U16: return "u16";
    case GGUFType::I16: return "i16";
    case GGUFType::U32: return "u32";
    case GGUFType::I32: return "i32";
    case GGUFType::F32: return "f32";
    case GGUFType::BOOL: return "bool";
    case GGUFType::STRING: return "string";
    case GGUFType::ARRAY: return "array";
    case GGUFType::U64: return "u64";
    case GGUFType::I64: return "i64";
    case GGUFType::F64: return "f64";
  }
  return "unknown";
}

uint64_t GGUFValue::array_size() const {
  if (!is_array()) return 0;
  switch (elem_type) {
    case GGUFType::STRING: return strings.size();
    case GGUFType::F32:
    case GGUFType::F64: return floats.size();
    case GGUFType::ARRAY: return arrays.size();
    default: return ints.size();
  }
}

GGUFValue GGUFValue::u32(uint32_t v) { GGUFValue x; x.type = GGUFType::U32; x.i = v; return x; }
GGUFValue GGUFValue::i32(int32_t v) { GGUFValue x; x.type = GGUFType::I32; x.i = v; return x; }
GGUFValue GGUFValue::u64(uint64_t v) { GGUFValue x; x.type = GGUFType::U64; x.i = int64_t(v); return x; }
GGUFValue GGUFValue::f32(float v) { GGUFValue x; x.type = GGUFType::F32; x.f = v; return x; }
GGUFValue GGUFValue::boolean(bool v) { GGUFValue x; x.type = GGUFType::BOOL; x.i = v; return x; }
GGUFValue GGUFValue::str(std::string v) { GGUFValue x; x.type = GGUFType::STRING; x.s = std::move(v); return x; }
GGUFValue GGUFValue::int_array(GGUFType elem, std::vector<int64_t> v) {
  GGUFValue x; x.type = GGUFType::ARRAY; x.elem_type = elem; x.ints = std::move(v); return x;
}
GGUFValue GGUFValue::float_array(std::vector<double> v) {
  GGUFValue x; x.type = GGUFType::ARRAY; x.elem_type = GGUFType::F32; x.floats = std::move(v); return x;
}
GGUFValue GGUFValue::string_array(std::vector<std::string> v) {
  GGUFValue x; x.type = GGUFType::ARRAY; x.elem_type = GGUFType::STRING; x.strings = std::move(v); return x;
}

static bool same_float(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool gguf_values_equal(const GGUFValue& a, const GGUFValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GGUFType::STRING: return a.s == b.s;
    case GGUFType::F32: case GGUFType::F64: return same_float(a.f, b.f);
    case GGUFType::ARRAY: break;
    default: return a.i == b.i;
  }
  if (a.elem_type != b.elem_type || a.array_size() != b.array_size()) return false;
  switch (a.elem_type) {
    case GGUFType::STRING: return a.strings == b.strings;
    case GGUFType::F32: case GGUFType::F64:
      for (size_t k = 0; k < a.floats.size(); ++k)
        if (!same_float(a.floats[k], b.floats[k])) return false;
      return true;
    case GGUFType::ARRAY:
      for (size_t k = 0; k < a.arrays.size(); ++k)
        if (!gguf_values_equal(a.arrays[k], b.arrays[k])) return false;
      return true;
    default: return a.ints == b.ints;
  }
}

const GGUFValue* GGUFFile::find(const std::string& key) const {
  auto it = kv.find(key);
  return it == kv.end() ? nullptr : &it->second;
}

void GGUFFile::set(const std::string& key, GGUFValue v) {
  if (!kv.count(key)) keys.push_back(key);
  kv[key] = std::move(v);
}

static bool is_int_type(GGUFType t) {
  switch (t) {
    case GGUFType::U8: case GGUFType::I8: case GGUFType::U16: case GGUFType::I16:
    case GGUFType::U32: case GGUFType::I32: case GGUFType::U64: case GGUFType::I64:
    case GGUFType::BOOL:
      return true;
    default:
      return false;
  }
}

Result<int64_t> GGUFFile::get_int(const std::string& key) const {
  const GGUFValue* v = find(key);
  if (!v) return make_error("missing metadata key '{}'", key);
  if (!is_int_type(v->type))
    return make_error("metadata key '{}' is a {}, expected an integer", key, gguf_type_name(v->type));
  return v->i;
}
Result<double> GGUFFile::get_float(const std::string& key) const {
  const GGUFValue* v = find(key);
  if (!v) return make_error("missing metadata key '{}'", key);
  if (v->type == GGUFType::F32 || v->type == GGUFType::F64) return v->f;
  if (is_int_type(v->type)) return double(v->i);
  return make_error("metadata key '{}' is a {}, expected a number", key, gguf_type_name(v->type));
}
Result<std::string> GGUFFile::get_string(const std::string& key) const {
  const GGUFValue* v = find(key);
  if (!v) return make_error("missing metadata key '{}'", key);
  if (v->type != GGUFType::STRING)
    return make_error("metadata key '{}' is a {}, expected a string", key, gguf_type_name(v->type));
  return v->s;
}
Result<bool> GGUFFile::get_bool(const std::string& key) const {
  const GGUFValue* v = find(key);
  if (!v) return make_error("missing metadata key '{}'", key);
  if (!is_int_type(v->type))
    return make_error("metadata key '{}' is a {}, expected a bool", key, gguf_type_name(v->type));
  return v->i != 0;
}
int64_t GGUFFile::int_or(const std::string& key, int64_t def) const {
  auto r = get_int(key);
  return r.ok() ? r.value() : def;
}
double GGUFFile::float_or(const std::string& key, double def) const {
  auto r = get_float(key);
  return r.ok() ? r.value() : def;
}
bool GGUFFile::bool_or(const std::string& key, bool def) const {
  auto r = get_bool(key);
  return r.ok() ? r.value() : def;
}
std::string GGUFFile::string_or(const std::string& key, const std::string& def) const {
  auto r = get_string(key);
  return r.ok() ? r.value() : def;
}

namespace {

// Sequential reader over a ByteSource with a bounded buffer (1 MiB): the file is
// never mapped nor read whole. Tracks the absolute offset and the item being read
// (a key or tensor name) so that every error names the field, the item and the offset.
class Cursor {
 public:
  explicit Cursor(ByteSource& src) : src_(src), size_(src.size()) {}
  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  const std::string& name() const { return src_.name(); }
  // " of metadata key 'x'" / " of tensor 'y'" / "": appended to field names in errors.
  void set_item(std::string item) { item_ = std::move(item); }
  const std::string& item() const { return item_; }

  Status read(void* dst, uint64_t n, const char* what) {
    if (n > remaining())
      return make_error("{}: truncated file: {}{} needs {} bytes at offset {}, only {} remain",
                        name(), what, item_, n, pos_, remaining());
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      if (buf_pos_ >= buf_.size()) DF_TRY(fill());
      uint64_t take = std::min<uint64_t>(n, buf_.size() - buf_pos_);
      std::memcpy(out, buf_.data() + buf_pos_, take);
      out += take;
      buf_pos_ += take;
      pos_ += take;
      n -= take;
    }
    return {};
  }
  template <typename T>
  Status get(T* v, const char* what) { return read(v, sizeof(T), what); }

  // A GGUF string: u64 length, then the bytes (not NUL-terminated). The length is
  // checked against `max_len` and the bytes left before anything is allocated.
  Result<std::string> string(uint64_t max_len, const char* what) {
    uint64_t start = pos_;
    uint64_t len = 0;
    DF_TRY(get(&len, what));
    if (len > remaining())
      return make_error("{}: {}{} at offset {} has length {}, past the end of the file ({} bytes remain)",
                        name(), what, item_, start, len, remaining());
    if (len > max_len)
      return make_error("{}: {}{} at offset {} has length {}, more than the limit of {}", name(), what,
                        item_, start, len, max_len);
    std::string s(len, '\0');
    DF_TRY(read(s.data(), len, what));
    return s;
  }

 private:
  Status fill() {
    uint64_t want = std::min<uint64_t>(kChunk, size_ - pos_);
    buf_.resize(want);
    buf_pos_ = 0;
    return src_.read_at(pos_, buf_.data(), want);
  }
  static constexpr uint64_t kChunk = 1 << 20;
  ByteSource& src_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::vector<char> buf_;
  size_t buf_pos_ = 0;
  std::string item_;
};

// Fewest bytes one element of type t takes on disk: a string is at least its
// length, an array at least its element type and count.
uint64_t min_elem_bytes(GGUFType t) {
  switch (t) {
    case GGUFType::U8: case GGUFType::I8: case GGUFType::BOOL: return 1;
    case GGUFType::U16: case GGUFType::I16: return 2;
    case GGUFType::U32: case GGUFType::I32: case GGUFType::F32: return 4;
    case GGUFType::U64: case GGUFType::I64: case GGUFType::F64: case GGUFType::STRING: return 8;
    case GGUFType::ARRAY: return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= 12; }

// Vectors grow as elements are read, never to a count taken from the file, so memory
// stays proportional to the bytes actually consumed.
constexpr uint64_t kMaxReserve = 1 << 16;

Status read_scalar(Cursor& c, GGUFType t, GGUFValue* v, const GGUFParseLimits& lim) {
  switch (t) {
    case GGUFType::U8: { uint8_t x; DF_TRY(c.get(&x, "u8 value")); v->i = x; break; }
    case GGUFType::I8: { int8_t x; DF_TRY(c.get(&x, "i8 value")); v->i = x; break; }
    case GGUFType::U16: { uint16_t x; DF_TRY(c.get(&x, "u16 value")); v->i = x; break; }
    case GGUFType::I16: { int16_t x; DF_TRY(c.get(&x, "i16 value")); v->i = x; break; }
    case GGUFType::U32: { uint32_t x; DF_TRY(c.get(&x, "u32 value")); v->i = x; break; }
    case GGUFType::I32: { int32_t x; DF_TRY(c.get(&x, "i32 value")); v->i = x; break; }
    case GGUFType::U64: { uint64_t x; DF_TRY(c.get(&x, "u64 value")); v->i = int64_t(x); break; }
    case GGUFType::I64: { int64_t x; DF_TRY(c.get(&x, "i64 value")); v->i = x; break; }
    case GGUFType::F32: { float x; DF_TRY(c.get(&x, "f32 value")); v->f = x; break; }
    case GGUFType::F64: { double x; DF_TRY(c.get(&x, "f64 value")); v->f = x; break; }
    case GGUFType::BOOL: {
      uint8_t x;
      uint64_t at = c.offset();
      DF_TRY(c.get(&x, "bool value"));
      if (x > 1)
        return make_error("{}: bool value{} at offset {} is {} (must be 0 or 1)", c.name(), c.item(), at, x);
      v->i = x;
      break;
    }
    case GGUFType::STRING: {
      DF_ASSIGN(v->s, c.string(lim.max_string, "string value"));
      break;
    }
    case GGUFType::ARRAY: break;  // handled by read_value
  }
  return {};
}

Status read_value(Cursor& c, GGUFType t, GGUFValue* v, const GGUFParseLimits& lim, int depth) {
  v->type = t;
  if (t != GGUFType::ARRAY) return read_scalar(c, t, v, lim);
  uint64_t at = c.offset();
  if (depth >= lim.max_array_depth)
    return make_error("{}: array{} at offset {} is nested deeper than {} levels", c.name(), c.item(), at,
                      lim.max_array_depth);
  uint32_t et = 0;
  uint64_t n = 0;
  DF_TRY(c.get(&et, "array element type"));
  if (!valid_type(et))
    return make_error("{}: array{} at offset {} has unknown element type {}", c.name(), c.item(), at, et);
  DF_TRY(c.get(&n, "array length"));
  v->elem_type = static_cast<GGUFType>(et);
  if (n > lim.max_array)
    return make_error("{}: array length{} at offset {} is {}, more than the limit of {}", c.name(),
                      c.item(), at + 4, n, lim.max_array);
  if (n > c.remaining() / min_elem_bytes(v->elem_type))
    return make_error("{}: array length{} at offset {} is {}: {} {} elements do not fit in the {} bytes "
                      "left in the file", c.name(), c.item(), at + 4, n, n, gguf_type_name(v->elem_type),
                      c.remaining());
  uint64_t reserve = std::min(n, kMaxReserve);
  GGUFValue tmp;
  switch (v->elem_type) {
    case GGUFType::STRING:
      v->strings.reserve(reserve);
      for (uint64_t k = 0; k < n; ++k) {
        DF_ASSIGN(std::string s, c.string(lim.max_string, "array string"));
        v->strings.push_back(std::move(s));
      }
      break;
    case GGUFType::F32:
    case GGUFType::F64:
      v->floats.reserve(reserve);
      for (uint64_t k = 0; k < n; ++k) {
        DF_TRY(read_scalar(c, v->elem_type, &tmp, lim));
        v->floats.push_back(tmp.f);
      }
      break;
    case GGUFType::ARRAY:
      v->arrays.reserve(std::min<uint64_t>(n, 64));
      for (uint64_t k = 0; k < n; ++k) {
        v->arrays.emplace_back();
        DF_TRY(read_value(c, GGUFType::ARRAY, &v->arrays.back(), lim, depth + 1));
      }
      break;
    default:
      v->ints.reserve(reserve);
      for (uint64_t k = 0; k < n; ++k) {
        DF_TRY(read_scalar(c, v->elem_type, &tmp, lim));
        v->ints.push_back(tmp.i);
      }
      break;
  }
  return {};
}

constexpr uint64_t kMaxNameLen = 65535;
constexpr uint64_t kMaxAlignment = 1 << 20;

bool alignment_ok(const GGUFValue& a) {
  return is_int_type(a.type) && a.type != GGUFType::BOOL && a.i > 0 && uint64_t(a.i) <= kMaxAlignment &&
         (a.i & (a.i - 1)) == 0;
}

}  // namespace

Result<GGUFFile> parse_gguf(ByteSource& src, const GGUFParseLimits& lim) {
  Cursor c(src);
  GGUFFile f;
  char magic[4];
  DF_TRY(c.read(magic, 4, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0)
    return make_error("{}: not a GGUF file (magic at offset 0 is not 'GGUF')", src.name());
  DF_TRY(c.get(&f.version, "version"));
  if (f.version != 2 && f.version != 3) {
    // A big-endian file (GGUF v3 allows them) reads as a byte-swapped version.
    uint32_t swapped = __builtin_bswap32(f.version);
    if (swapped == 2 || swapped == 3)
      return make_error("{}: big-endian GGUF (version {} at offset 4, byte-swapped) is not supported",
                        src.name(), swapped);
    return make_error("{}: unsupported GGUF version {} at offset 4 (supported: 2, 3)", src.name(), f.version);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  DF_TRY(c.get(&n_tensors, "tensor count"));
  DF_TRY(c.get(&n_kv, "metadata count"));
  // Each kv takes at least 13 bytes (key length, type, one byte of value), each
  // tensor info at least 32 (name length, dims, one dim, type, offset).
  if (n_kv > lim.max_kv || n_kv > c.remaining() / 13)
    return make_error("{}: metadata count {} at offset 16 is impossible for a file of {} bytes (limit {})",
                      src.name(), n_kv, src.size(), lim.max_kv);
  if (n_tensors > lim.max_tensors || n_tensors > c.remaining() / 32)
    return make_error("{}: tensor count {} at offset 8 is impossible for a file of {} bytes (limit {})",
                      src.name(), n_tensors, src.size(), lim.max_tensors);

  for (uint64_t k = 0; k < n_kv; ++k) {
    uint64_t at = c.offset();
    c.set_item(fmt::format(" of metadata entry {}", k));
    DF_ASSIGN(std::string key, c.string(kMaxNameLen, "metadata key"));
    c.set_item(fmt::format(" of metadata key '{}'", key));
    uint32_t t = 0;
    uint64_t type_at = c.offset();
    DF_TRY(c.get(&t, "value type"));
    if (!valid_type(t))
      return make_error("{}: metadata key '{}' (entry at offset {}) has unknown value type {} at offset {}",
                        src.name(), key, at, t, type_at);
    GGUFValue v;
    DF_TRY(read_value(c, static_cast<GGUFType>(t), &v, lim, 0));
    if (f.kv.count(key)) return make_error("{}: duplicate metadata key '{}' at offset {}", src.name(), key, at);
    f.keys.push_back(key);
    f.kv.emplace(std::move(key), std::move(v));
  }
  c.set_item("");

  if (const GGUFValue* a = f.find("general.alignment")) {
    if (!alignment_ok(*a))
      return make_error("{}: general.alignment must be a power of two up to {}, got {} {}", src.name(),
                        kMaxAlignment, gguf_type_name(a->type),
                        is_int_type(a->type) ? std::to_string(a->i) : std::string("value"));
    f.alignment = static_cast<uint32_t>(a->i);
  }

  std::set<std::string> names;
  std::vector<uint64_t> info_at(n_tensors);
  f.tensors.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GGUFTensorInfo& ti = f.tensors.emplace_back();
    uint64_t at = info_at[k] = c.offset();
    c.set_item(fmt::format(" of tensor info {}", k));
    DF_ASSIGN(ti.name, c.string(kMaxNameLen, "tensor name"));
    c.set_item(fmt::format(" of tensor '{}'", ti.name));
    if (!names.insert(ti.name).second)
      return make_error("{}: duplicate tensor name '{}' at offset {}", src.name(), ti.name, at);
    DF_TRY(c.get(&ti.n_dims, "dimension count"));
    if (ti.n_dims == 0 || ti.n_dims > kMaxDims)
      return make_error("{}: tensor '{}' (info at offset {}) has dimension count {} at offset {} (1..{} allowed)",
                        src.name(), ti.name, at, ti.n_dims, c.offset() - 4, kMaxDims);
    uint64_t total = 1;
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      uint64_t n = 0;
      DF_TRY(c.get(&n, "dimension"));
      if (n == 0 || n > (uint64_t(1) << 40) || total > (uint64_t(1) << 50) / n)
        return make_error("{}: tensor '{}' (info at offset {}) has an impossible shape: dimension {} = {} "
                          "at offset {}", src.name(), ti.name, at, d, n, c.offset() - 8);
      ti.ne[d] = static_cast<int64_t>(n);
      total *= n;
    }
    uint32_t type = 0;
    DF_TRY(c.get(&type, "type"));
    if (!dtype_known(type))
      return make_error("{}: tensor '{}' (info at offset {}) has unknown type id {} at offset {}", src.name(),
                        ti.name, at, type, c.offset() - 4);
    ti.type = static_cast<DType>(type);
    BlockGeometry g = block_geometry(ti.type);
    if (ti.ne[0] % g.block_elems != 0)
      return make_error("{}: tensor '{}' (info at offset {}) has row length {}, not a multiple of the {} "
                        "block size {}", src.name(), ti.name, at, ti.ne[0], dtype_name(ti.type), g.block_elems);
    ti.bytes = total / g.block_elems * g.block_bytes;
    DF_TRY(c.get(&ti.offset, "data offset"));
    if (ti.offset % f.alignment != 0)
      return make_error("{}: tensor '{}' data offset {} (at offset {}) is not a multiple of the alignment {}",
                        src.name(), ti.name, ti.offset, c.offset() - 8, f.alignment);
  }
  c.set_item("");
  f.data_offset = (c.offset() + f.alignment - 1) / f.alignment * f.alignment;
  if (f.data_offset > src.size() && n_tensors > 0)
    return make_error("{}: truncated file: the data section would start at offset {} but the file has {} bytes",
                      src.name(), f.data_offset, src.size());

  // Every tensor inside the file, none overlapping another. Sorted by offset, a
  // tensor that overlaps any later one overlaps the next.
  std::vector<size_t> order(f.tensors.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return f.tensors[a].offset < f.tensors[b].offset; });
  uint64_t data_size = src.size() >= f.data_offset ? src.size() - f.data_offset : 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const GGUFTensorInfo& t = f.tensors[order[k]];
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      return make_error("{}: tensor '{}' (info at offset {}): {} bytes at data offset {} (file offset {}) "
                        "extend past the end of the file ({} bytes; truncated download?)", src.name(), t.name,
                        info_at[order[k]], t.bytes, t.offset, f.data_offset + t.offset, src.size());
    if (k + 1 < order.size()) {
      const GGUFTensorInfo& u = f.tensors[order[k + 1]];
      if (t.offset + t.bytes > u.offset)
        return make_error("{}: tensors '{}' (data offset {}, {} bytes) and '{}' (data offset {}) overlap",
                          src.name(), t.name, t.offset, t.bytes, u.name, u.offset);
    }
  }
  return f;
}

namespace {

class Out {
 public:
  std::string s;
  template <typename T>
  void put(T v) { s.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
  void str(const std::string& x) { put<uint64_t>(x.size()); s += x; }
};

void write_scalar(Out& o, GGUFType t, const GGUFValue& v) {
  switch (t) {
    case GGUFType::U8: o.put<uint8_t>(uint8_t(v.i)); break;
    case GGUFType::I8: o.put<int8_t>(int8_t(v.i)); break;
    case GGUFType::U16: o.put<uint16_t>(uint16_t(v.i)); break;
    case GGUFType::I16: o.put<int16_t>(int16_t(v.i)); break;
    case GGUFType::U32: o.put<uint32_t>(uint32_t(v.i)); break;
    case GGUFType::I32: o.put<int32_t>(int32_t(v.i)); break;
    case GGUFType::U64: o.put<uint64_t>(uint64_t(v.i)); break;
    case GGUFType::I64: o.put<int64_t>(v.i); break;
    case GGUFType::F32: o.put<float>(float(v.f)); break;
    case GGUFType::F64: o.put<double>(v.f); break;
    case GGUFType::BOOL: o.put<uint8_t>(v.i ? 1 : 0); break;
    case GGUFType::STRING: o.str(v.s); break;
    case GGUFType::ARRAY: break;
  }
}

void write_value(Out& o, const GGUFValue& v) {
  if (!v.is_array()) return write_scalar(o, v.type, v);
  o.put<uint32_t>(uint32_t(v.elem_type));
  o.put<uint64_t>(v.array_size());
  GGUFValue tmp;
  switch (v.elem_type) {
    case GGUFType::STRING:
      for (auto& s : v.strings) o.str(s);
      break;
    case GGUFType::F32:
    case GGUFType::F64:
      for (double x : v.floats) { tmp.f = x; write_scalar(o, v.elem_type, tmp); }
      break;
    case GGUFType::ARRAY:
      for (auto& a : v.arrays) write_value(o, a);
      break;
    default:
      for (int64_t x : v.ints) { tmp.i = x; write_scalar(o, v.elem_type, tmp); }
      break;
  }
}

}  // namespace

std::string serialize_gguf_header(GGUFFile& f) {
  // The alignment a reader will use is the general.alignment key (default 32): keep
  // the key and f.alignment in step so the data offsets written are the ones read.
  if (const GGUFValue* a = f.find("general.alignment"); a && alignment_ok(*a)) {
    f.alignment = uint32_t(a->i);
  } else if (!a && f.alignment != 32) {
    assert(f.alignment > 0 && (f.alignment & (f.alignment - 1)) == 0);
    f.set("general.alignment", GGUFValue::u32(f.alignment));
  }
  Out o;
  o.s.append("GGUF", 4);
  o.put<uint32_t>(f.version);
  o.put<uint64_t>(f.tensors.size());
  o.put<uint64_t>(f.keys.size());
  for (auto& k : f.keys) {
    const GGUFValue& v = f.kv.at(k);
    o.str(k);
    o.put<uint32_t>(uint32_t(v.type));
    write_value(o, v);
  }
  uint64_t off = 0;
  for (auto& t : f.tensors) {
    BlockGeometry g = block_geometry(t.type);
    t.bytes = t.n_elements() / g.block_elems * g.block_bytes;
    t.offset = off;
    off = (off + t.bytes + f.alignment - 1) / f.alignment * f.alignment;
    o.str(t.name);
    o.put<uint32_t>(t.n_dims);
    for (uint32_t d = 0; d < t.n_dims; ++d) o.put<uint64_t>(uint64_t(t.ne[d]));
    o.put<uint32_t>(uint32_t(t.type));
    o.put<uint64_t>(t.offset);
  }
  size_t pad = (f.alignment - o.s.size() % f.alignment) % f.alignment;
  o.s.append(pad, '\0');
  f.data_offset = o.s.size();
  return std::move(o.s);
}

}  // namespace deltafin
