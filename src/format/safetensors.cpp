// safetensors header parsing (see safetensors.h).
#include "format/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace deltafin {

uint64_t SafetensorsTensor::n_elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

int safetensors_dtype_bytes(const std::string& t) {
  static const std::map<std::string, int> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8}};
  auto it = sizes.find(t);
  return it == sizes.end() ? 0 : it->second;
}

Result<SafetensorsHeader> parse_safetensors_json(const std::string& text, uint64_t file_size,
                                                 const std::string& name, const SafetensorsLimits& lim) {
  SafetensorsHeader h;
  h.header_bytes = 8 + text.size();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("{}: the safetensors header is not valid JSON", name);
  if (!j.is_object()) return make_error("{}: the safetensors header is not a JSON object", name);
  const uint64_t data_bytes = file_size - h.header_bytes;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) return make_error("{}: __metadata__ is not an object", name);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return make_error("{}: __metadata__ '{}' is not a string", name, m.key());
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    SafetensorsTensor t;
    t.name = key;
    if (!v.is_object()) return make_error("{}: tensor '{}': entry is not an object", name, key);
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) return make_error("{}: tensor '{}': no dtype string", name, key);
    t.dtype = dt->get<std::string>();
    const int esize = safetensors_dtype_bytes(t.dtype);
    if (esize == 0) return make_error("{}: tensor '{}': unknown dtype '{}'", name, key, t.dtype);
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) return make_error("{}: tensor '{}': no shape array", name, key);
    if (int(sh->size()) > lim.max_dims)
      return make_error("{}: tensor '{}': {} dimensions (at most {})", name, key, sh->size(), lim.max_dims);
    uint64_t n = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return make_error("{}: tensor '{}': shape holds a value that is not a size", name, key);
      const uint64_t x = d.get<uint64_t>();
      if (x != 0 && n > (uint64_t(1) << 62) / x) return make_error("{}: tensor '{}': shape too large", name, key);
      n *= x;
      t.shape.push_back(int64_t(x));
    }
    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      return make_error("{}: tensor '{}': data_offsets must be [begin, end]", name, key);
    const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (e < b) return make_error("{}: tensor '{}': data_offsets [{}, {}] end before they begin", name, key, b, e);
    if (e > data_bytes)
      return make_error("{}: tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes; the file "
                        "is truncated or the header is wrong)", name, key, b, e, data_bytes);
    if (e - b != n * uint64_t(esize))
      return make_error("{}: tensor '{}': {} bytes for {} elements of {} ({} expected)", name, key, e - b, n,
                        t.dtype, n * uint64_t(esize));
    t.offset = h.header_bytes + b;
    t.bytes = e - b;
    h.tensors.push_back(std::move(t));
  }
  std::vector<const SafetensorsTensor*> by_off;
  for (const auto& t : h.tensors) by_off.push_back(&t);
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_off.size(); ++i)
    if (by_off[i]->offset < by_off[i - 1]->offset + by_off[i - 1]->bytes)
      return make_error("{}: tensors '{}' and '{}' overlap", name, by_off[i - 1]->name, by_off[i]->name);
  return h;
}

Result<SafetensorsHeader> parse_safetensors(ByteSource& src, const SafetensorsLimits& lim) {
  const std::string& name = src.name();
  if (src.size() < 8) return make_error("{}: {} bytes; too short for a safetensors file", name, src.size());
  unsigned char len8[8];
  DF_TRY(src.read_at(0, len8, 8));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len8[i];
  if (n > lim.max_header)
    return make_error("{}: safetensors header length {} is over the limit of {} bytes; not a safetensors file?",
                      name, n, lim.max_header);
  if (n > src.size() - 8)
    return make_error("{}: safetensors header length {} runs past the end of the file ({} bytes; truncated?)", name,
                      n, src.size());
  std::string text(size_t(n), '\0');
  DF_TRY(src.read_at(8, text.data(), size_t(n)));
  return parse_safetensors_json(text, src.size(), name, lim);
}

}  // namespace deltafin
