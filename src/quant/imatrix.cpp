#include "quant/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/gguf.h"

namespace deltafin {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A value an importance may hold: finite and >= 0. The first bad one's index, or -1.
int64_t first_bad(const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!(std::isfinite(v[i]) && v[i] >= 0)) return int64_t(i);
  return -1;
}

Status check_values(const Imatrix& m, const std::string& name, const std::vector<float>& v, const char* what) {
  const int64_t bad = first_bad(v);
  if (bad < 0) return {};
  return make_error("imatrix {}: entry '{}': {} {} is {} (importances are means of squares: finite and >= 0); "
                    "the file is corrupt",
                    m.path, name, what, bad, v[size_t(bad)]);
}

// Sequential little-endian reads over a byte source, with the file's name and the
// offset in every error.
class Cursor {
 public:
  explicit Cursor(ByteSource& src) : src_(src) {}
  uint64_t offset() const { return off_; }
  uint64_t left() const { return src_.size() - off_; }
  Status bytes(void* dst, uint64_t n, const std::string& what) {
    if (n > left())
      return make_error("imatrix {}: truncated at offset {} of {} bytes, reading {} ({} bytes)", src_.name(), off_,
                        src_.size(), what, n);
    if (n) DF_TRY(src_.read_at(off_, dst, size_t(n)));
    off_ += n;
    return {};
  }
  Result<int32_t> i32(const std::string& what) {
    uint8_t b[4];
    DF_TRY(bytes(b, 4, what));
    return int32_t(uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24);
  }

 private:
  ByteSource& src_;
  uint64_t off_ = 0;
};

Result<Imatrix> parse_legacy(ByteSource& src) {
  Imatrix m;
  m.path = src.name();
  m.legacy = true;
  Cursor c(src);
  DF_ASSIGN(const int32_t n, c.i32("the entry count"));
  // A plausible count (a model has some thousands of matrices) tells a .dat from
  // other bytes; an entry takes at least 17 bytes (three int32, a 1-byte name, one value).
  if (n < 1 || n > (1 << 20))
    return make_error("imatrix {}: not an importance matrix: neither GGUF (no 'GGUF' magic) nor llama.cpp's "
                      "legacy .dat (its entry count would be {})",
                      m.path, n);
  if (uint64_t(n) > c.left() / 17)
    return make_error("imatrix {}: truncated: {} entries need at least {} bytes, the file has {}", m.path, n,
                      4 + 17 * uint64_t(n), src.size());
  for (int32_t e = 0; e < n; ++e) {
    const std::string where = fmt::format("entry {} of {}", e, n);
    DF_ASSIGN(const int32_t len, c.i32("the name length of " + where));
    if (len < 1 || len > (1 << 16))  // tensor names are short; past the end: truncated, below
      return make_error("imatrix {}: {}: name length {} at offset {}: the file is corrupt or not an imatrix",
                        m.path, where, len, c.offset() - 4);
    std::string name(size_t(len), '\0');
    DF_TRY(c.bytes(name.data(), uint64_t(len), "the name of " + where));
    const std::string label = fmt::format("{} ('{}')", where, name);
    DF_ASSIGN(const int32_t ncall, c.i32("the ncall of " + label));
    DF_ASSIGN(const int32_t nval, c.i32("the value count of " + label));
    if (nval < 1 || ncall < 0)
      return make_error("imatrix {}: entry '{}': {} values, ncall {}: the file is corrupt", m.path, name, nval, ncall);
    std::vector<float> v(static_cast<size_t>(nval));
    static_assert(sizeof(float) == 4);
    DF_TRY(c.bytes(v.data(), uint64_t(nval) * 4, fmt::format("the {} values of {}", nval, label)));
    DF_TRY(check_values(m, name, v, "value"));
    if (ncall > 0)
      for (float& x : v) x /= float(ncall);
    ImatrixEntry& en = m.entries[name];
    if (!en.values.empty()) return make_error("imatrix {}: entry '{}' appears twice", m.path, name);
    en.values = std::move(v);
  }
  // The optional trailer: chunk count, then the dataset's name.
  if (c.left() >= 4) {
    DF_ASSIGN(const int32_t chunks, c.i32("the chunk count"));
    m.chunk_count = chunks;
    if (c.left() >= 4) {
      DF_ASSIGN(const int32_t len, c.i32("the dataset name's length"));
      if (len < 0 || uint64_t(len) > c.left())
        return make_error("imatrix {}: truncated: the dataset name's length {} at offset {} exceeds the {} bytes "
                          "left",
                          m.path, len, c.offset() - 4, c.left());
      std::string ds(size_t(len), '\0');
      DF_TRY(c.bytes(ds.data(), uint64_t(len), "the dataset name"));
      if (!ds.empty()) m.datasets.push_back(ds);
    }
  }
  return m;
}

// One F32 tensor's data.
Result<std::vector<float>> read_f32(ByteSource& src, const GGUFFile& f, const GGUFTensorInfo& t) {
  if (t.type != DType::F32)
    return make_error("imatrix {}: tensor '{}' has type {}; an imatrix's tensors are F32", src.name(), t.name,
                      dtype_name(t.type));
  std::vector<float> v(size_t(t.n_elements()));
  DF_TRY(src.read_at(f.data_offset + t.offset, v.data(), v.size() * 4));
  return v;
}

Result<Imatrix> parse_gguf_imatrix(ByteSource& src) {
  Imatrix m;
  m.path = src.name();
  auto parsed = parse_gguf(src);
  if (!parsed.ok()) return make_error("imatrix {}: {}", m.path, parsed.error().message);
  const GGUFFile& f = *parsed;
  const std::string type = f.string_or("general.type", "");
  if (type != "imatrix")
    return make_error("imatrix {}: a GGUF file but not an importance matrix (general.type is '{}', not 'imatrix'); "
                      "give the file llama-imatrix wrote",
                      m.path, type.empty() ? "missing" : type);
  m.chunk_count = f.int_or("imatrix.chunk_count", -1);
  if (const GGUFValue* ds = f.find("imatrix.datasets"); ds && ds->is_array()) m.datasets = ds->strings;
  std::map<std::string, const GGUFTensorInfo*> by_name;
  for (const GGUFTensorInfo& t : f.tensors) by_name[t.name] = &t;
  const std::string kSum2 = ".in_sum2", kCounts = ".counts";
  for (const GGUFTensorInfo& t : f.tensors) {
    if (!ends_with(t.name, kSum2)) continue;
    const std::string name = t.name.substr(0, t.name.size() - kSum2.size());
    auto it = by_name.find(name + kCounts);
    if (it == by_name.end())
      return make_error("imatrix {}: entry '{}' has {} but no {}{}; the file is corrupt", m.path, name, t.name, name,
                        kCounts);
    const GGUFTensorInfo& ct = *it->second;
    const int64_t n_per_row = t.ne[0], n_mat = int64_t(t.n_elements() / uint64_t(std::max<int64_t>(n_per_row, 1)));
    if (n_per_row < 1 || int64_t(ct.n_elements()) != n_mat || ct.ne[0] != 1)
      return make_error("imatrix {}: entry '{}': {} is {} x {} but {} holds {} counts (one per row expected)", m.path,
                        name, t.name, n_per_row, n_mat, ct.name, ct.n_elements());
    DF_ASSIGN(std::vector<float> sums, read_f32(src, f, t));
    DF_ASSIGN(std::vector<float> counts, read_f32(src, f, ct));
    DF_TRY(check_values(m, name, sums, "in_sum2 value"));
    DF_TRY(check_values(m, name, counts, "count"));
    ImatrixEntry& en = m.entries[name];
    en.n_mat = n_mat;
    en.values.resize(sums.size());
    for (int64_t k = 0; k < n_mat; ++k) {
      const float cnt = counts[size_t(k)];
      for (int64_t j = 0; j < n_per_row; ++j) {
        const size_t i = size_t(k * n_per_row + j);
        en.values[i] = cnt > 0 ? sums[i] / cnt : 1.0f;
      }
    }
    DF_TRY(check_values(m, name, en.values, "importance"));  // a sum over a tiny count can overflow
  }
  if (m.entries.empty())
    return make_error("imatrix {}: a GGUF imatrix without entries (no *.in_sum2 tensors)", m.path);
  return m;
}

}  // namespace

Result<const ImatrixEntry*> Imatrix::for_tensor(const std::string& name, int64_t n_per_row, int64_t n_mat) const {
  auto it = entries.find(name);
  if (it == entries.end()) return static_cast<const ImatrixEntry*>(nullptr);
  const ImatrixEntry& e = it->second;
  const bool fits = int64_t(e.values.size()) == n_per_row * n_mat && (e.n_mat == 0 || e.n_mat == n_mat);
  if (!fits) {
    std::string has = fmt::format("{} values", e.values.size());
    if (e.n_mat) has += fmt::format(" ({} x {})", e.values.size() / size_t(e.n_mat), e.n_mat);
    return make_error("imatrix {}: entry '{}' has {}, but the model's tensor has rows of {}{} ({} values); the "
                      "imatrix was computed for another model",
                      path, name, has, n_per_row, n_mat > 1 ? fmt::format(" x {} experts", n_mat) : "",
                      n_per_row * n_mat);
  }
  return &e;
}

Result<Imatrix> parse_imatrix(ByteSource& src) {
  char magic[4] = {};
  if (src.size() >= 4) DF_TRY(src.read_at(0, magic, 4));
  if (src.size() >= 4 && std::memcmp(magic, "GGUF", 4) == 0) return parse_gguf_imatrix(src);
  if (src.size() < 4)
    return make_error("imatrix {}: not an importance matrix: {} bytes, too short for either format", src.name(),
                      src.size());
  return parse_legacy(src);
}

Result<Imatrix> load_imatrix(const std::string& path) {
  auto src = open_file_source(path);
  if (!src.ok()) return make_error("imatrix: {}", src.error().message);
  return parse_imatrix(**src);
}

}  // namespace deltafin
