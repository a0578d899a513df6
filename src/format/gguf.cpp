#include "format/gguf.h"

#include <algorithm>
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

// Sequential reader over a ByteSource with a bounded buffer. Tracks the absolute
// offset so errors can name it.
class Cursor {
 public:
  explicit Cursor(ByteSource& src) : src_(src), size_(src.size()) {}
  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  const std::string& name() const { return src_.name(); }

  Status read(void* dst, uint64_t n, const char* what) {
    if (n > remaining())
      return make_error("{}: truncated file: {} needs {} bytes at offset {}, only {} remain",
                        name(), what, n, pos_, remaining());
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

  Result<std::string> string(uint64_t max_len, const std::string& what) {
    uint64_t start = pos_;
    uint64_t len = 0;
    DF_TRY(get(&len, "string length"));
    if (len > max_len || len > remaining())
      return make_error("{}: {} at offset {} has length {}, which is {}", name(), what, start, len,
                        len > remaining() ? "past the end of the file" : "larger than allowed");
    std::string s(len, '\0');
    DF_TRY(read(s.data(), len, "string bytes"));
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
};

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

Status read_scalar(Cursor& c, GGUFType t, GGUFValue* v, const std::string& key) {
  switch (t) {
    case GGUFType::U8: { uint8_t x; DF_TRY(c.get(&x, "u8")); v->i = x; break; }
    case GGUFType::I8: { int8_t x; DF_TRY(c.get(&x, "i8")); v->i = x; break; }
    case GGUFType::U16: { uint16_t x; DF_TRY(c.get(&x, "u16")); v->i = x; break; }
    case GGUFType::I16: { int16_t x; DF_TRY(c.get(&x, "i16")); v->i = x; break; }
    case GGUFType::U32: { uint32_t x; DF_TRY(c.get(&x, "u32")); v->i = x; break; }
    case GGUFType::I32: { int32_t x; DF_TRY(c.get(&x, "i32")); v->i = x; break; }
    case GGUFType::U64: { uint64_t x; DF_TRY(c.get(&x, "u64")); v->i = int64_t(x); break; }
    case GGUFType::I64: { int64_t x; DF_TRY(c.get(&x, "i64")); v->i = x; break; }
    case GGUFType::F32: { float x; DF_TRY(c.get(&x, "f32")); v->f = x; break; }
    case GGUFType::F64: { double x; DF_TRY(c.get(&x, "f64")); v->f = x; break; }
    case GGUFType::BOOL: {
      uint8_t x;
      uint64_t at = c.offset();
      DF_TRY(c.get(&x, "bool"));
      if (x > 1) return make_error("{}: key '{}': bool at offset {} has value {}", c.name(), key, at, x);
      v->i = x;
      break;
    }
    case GGUFType::STRING: {
      DF_ASSIGN(v->s, c.string(GGUFParseLimits{}.max_string, "value of key '" + key + "'"));
      break;
    }
    case GGUFType::ARRAY: break;  // handled by the caller
  }
  return {};
}

Status read_value(Cursor& c, GGUFType t, GGUFValue* v, const std::string& key,
                  const GGUFParseLimits& lim, int depth) {
  v->type = t;
  if (t != GGUFType::ARRAY) return read_scalar(c, t, v, key);
  if (depth >= lim.max_array_depth)
    return make_error("{}: key '{}': arrays nested deeper than {} at offset {}", c.name(), key,
                      lim.max_array_depth, c.offset());
  uint64_t at = c.offset();
  uint32_t et = 0;
  uint64_t n = 0;
  DF_TRY(c.get(&et, "array type"));
  if (!valid_type(et))
    return make_error("{}: key '{}': unknown array element type {} at offset {}", c.name(), key, et, at);
  DF_TRY(c.get(&n, "array length"));
  v->elem_type = static_cast<GGUFType>(et);
  if (n > lim.max_array || n * min_elem_bytes(v->elem_type) > c.remaining())
    return make_error("{}: key '{}': array of {} {} elements at offset {} does not fit in the file",
                      c.name(), key, n, gguf_type_name(v->elem_type), at);
  GGUFValue tmp;
  switch (v->elem_type) {
    case GGUFType::STRING:
      v->strings.reserve(n);
      for (uint64_t k = 0; k < n; ++k) {
        DF_ASSIGN(std::string s, c.string(lim.max_string, "element of key '" + key + "'"));
        v->strings.push_back(std::move(s));
      }
      break;
    case GGUFType::F32:
    case GGUFType::F64:
      v->floats.resize(n);
      for (uint64_t k = 0; k < n; ++k) {
        DF_TRY(read_scalar(c, v->elem_type, &tmp, key));
        v->floats[k] = tmp.f;
      }
      break;
    case GGUFType::ARRAY:
      v->arrays.resize(n);
      for (uint64_t k = 0; k < n; ++k) DF_TRY(read_value(c, GGUFType::ARRAY, &v->arrays[k], key, lim, depth + 1));
      break;
    default:
      v->ints.resize(n);
      for (uint64_t k = 0; k < n; ++k) {
        DF_TRY(read_scalar(c, v->elem_type, &tmp, key));
        v->ints[k] = tmp.i;
      }
      break;
  }
  return {};
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
  if (f.version != 2 && f.version != 3)
    return make_error("{}: unsupported GGUF version {} at offset 4 (supported: 2, 3)", src.name(), f.version);
  uint64_t n_tensors = 0, n_kv = 0;
  DF_TRY(c.get(&n_tensors, "tensor count"));
  DF_TRY(c.get(&n_kv, "metadata count"));
  // Each kv takes at least 12 bytes, each tensor info at least 28.
  if (n_kv > lim.max_kv || n_kv * 12 > c.remaining())
    return make_error("{}: metadata count {} at offset 16 is impossible for a file of {} bytes",
                      src.name(), n_kv, src.size());
  if (n_tensors > lim.max_tensors || n_tensors * 28 > c.remaining())
    return make_error("{}: tensor count {} at offset 8 is impossible for a file of {} bytes",
                      src.name(), n_tensors, src.size());

  for (uint64_t k = 0; k < n_kv; ++k) {
    uint64_t at = c.offset();
    DF_ASSIGN(std::string key, c.string(65535, "metadata key"));
    uint32_t t = 0;
    DF_TRY(c.get(&t, "value type"));
    if (!valid_type(t))
      return make_error("{}: key '{}' at offset {} has unknown value type {}", src.name(), key, at, t);
    GGUFValue v;
    DF_TRY(read_value(c, static_cast<GGUFType>(t), &v, key, lim, 0));
    if (f.kv.count(key)) return make_error("{}: duplicate metadata key '{}' at offset {}", src.name(), key, at);
    f.keys.push_back(key);
    f.kv.emplace(std::move(key), std::move(v));
  }

  if (const GGUFValue* a = f.find("general.alignment")) {
    if (!is_int_type(a->type) || a->i <= 0 || a->i > (1 << 20) || (a->i & (a->i - 1)) != 0)
      return make_error("{}: general.alignment must be a power of two, got {}", src.name(), a->i);
    f.alignment = static_cast<uint32_t>(a->i);
  }

  std::set<std::string> names;
  f.tensors.resize(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GGUFTensorInfo& ti = f.tensors[k];
    uint64_t at = c.offset();
    DF_ASSIGN(ti.name, c.string(65535, "tensor name"));
    if (!names.insert(ti.name).second)
      return make_error("{}: duplicate tensor name '{}' at offset {}", src.name(), ti.name, at);
    DF_TRY(c.get(&ti.n_dims, "tensor dims"));
    if (ti.n_dims == 0 || ti.n_dims > kMaxDims)
      return make_error("{}: tensor '{}' at offset {} has {} dimensions (1..4 allowed)", src.name(),
                        ti.name, at, ti.n_dims);
    uint64_t total = 1;
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      uint64_t n = 0;
      DF_TRY(c.get(&n, "tensor dim"));
      if (n == 0 || n > (uint64_t(1) << 40) || total > (uint64_t(1) << 50) / n)
        return make_error("{}: tensor '{}' at offset {} has an impossible shape (dim {} = {})",
                          src.name(), ti.name, at, d, n);
      ti.ne[d] = static_cast<int64_t>(n);
      total *= n;
    }
    uint32_t type = 0;
    DF_TRY(c.get(&type, "tensor type"));
    if (!dtype_known(type))
      return make_error("{}: tensor '{}' at offset {} has unknown type id {}", src.name(), ti.name, at, type);
    ti.type = static_cast<DType>(type);
    BlockGeometry g = block_geometry(ti.type);
    if (ti.ne[0] % g.block_elems != 0)
      return make_error("{}: tensor '{}' row length {} is not a multiple of the {} block size {}",
                        src.name(), ti.name, ti.ne[0], dtype_name(ti.type), g.block_elems);
    ti.bytes = total / g.block_elems * g.block_bytes;
    DF_TRY(c.get(&ti.offset, "tensor offset"));
    if (ti.offset % f.alignment != 0)
      return make_error("{}: tensor '{}' data offset {} is not aligned to {}", src.name(), ti.name,
                        ti.offset, f.alignment);
  }
  f.data_offset = (c.offset() + f.alignment - 1) / f.alignment * f.alignment;
  if (f.data_offset > src.size() && n_tensors > 0)
    return make_error("{}: truncated file: data section would start at {} but the file has {} bytes",
                      src.name(), f.data_offset, src.size());

  // Every tensor inside the file, none overlapping another.
  std::vector<const GGUFTensorInfo*> order;
  for (auto& t : f.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  uint64_t data_size = src.size() >= f.data_offset ? src.size() - f.data_offset : 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const GGUFTensorInfo* t = order[k];
    if (t->offset > data_size || t->bytes > data_size - t->offset)
      return make_error("{}: tensor '{}' ({} bytes at data offset {}) extends past the end of the file "
                        "(truncated download?)", src.name(), t->name, t->bytes, t->offset);
    if (k + 1 < order.size() && t->offset + t->bytes > order[k + 1]->offset)
      return make_error("{}: tensors '{}' and '{}' overlap", src.name(), t->name, order[k + 1]->name);
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
