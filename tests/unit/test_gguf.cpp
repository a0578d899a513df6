// GGUF reader/writer: round trips of every value type (v2 and v3), alignment and
// tensor offsets; a table of hostile headers made by mutating a valid one, each of
// which must fail with a message naming the field and offset; truncation at every
// byte; limits that must fail fast; split models.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/platform.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "format/model_file.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

GGUFValue typed(GGUFType t, int64_t i) {
  GGUFValue v;
  v.type = t;
  v.i = i;
  return v;
}
GGUFValue typed_f(GGUFType t, double f) {
  GGUFValue v;
  v.type = t;
  v.f = f;
  return v;
}
GGUFValue array_of(std::vector<GGUFValue> inner) {
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  v.elem_type = GGUFType::ARRAY;
  v.arrays = std::move(inner);
  return v;
}

// Every scalar type at its extremes, every array element type, nested arrays.
void add_all_value_types(GGUFFile& f) {
  f.set("general.architecture", GGUFValue::str("llama"));
  f.set("t.u8", typed(GGUFType::U8, 255));
  f.set("t.i8", typed(GGUFType::I8, -128));
  f.set("t.u16", typed(GGUFType::U16, 65535));
  f.set("t.i16", typed(GGUFType::I16, -32768));
  f.set("t.u32", typed(GGUFType::U32, 4294967295LL));
  f.set("t.i32", typed(GGUFType::I32, std::numeric_limits<int32_t>::min()));
  f.set("t.u64", GGUFValue::u64(std::numeric_limits<uint64_t>::max()));
  f.set("t.i64", typed(GGUFType::I64, std::numeric_limits<int64_t>::min()));
  f.set("t.f32", GGUFValue::f32(-1.5e-7f));
  f.set("t.f32.inf", GGUFValue::f32(std::numeric_limits<float>::infinity()));
  f.set("t.f32.nan", GGUFValue::f32(std::numeric_limits<float>::quiet_NaN()));
  f.set("t.f64", typed_f(GGUFType::F64, 3.141592653589793238));
  f.set("t.bool.true", GGUFValue::boolean(true));
  f.set("t.bool.false", GGUFValue::boolean(false));
  f.set("t.str", GGUFValue::str("h\xc3\xa9llo\n\t\"{{ x }}\""));
  f.set("t.str.empty", GGUFValue::str(""));
  f.set("t.str.nul", GGUFValue::str(std::string("a\0b", 3)));
  for (GGUFType t : {GGUFType::U8, GGUFType::I8, GGUFType::U16, GGUFType::I16, GGUFType::U32, GGUFType::I32,
                     GGUFType::U64, GGUFType::I64, GGUFType::BOOL}) {
    std::vector<int64_t> v;
    switch (t) {
      case GGUFType::U8: v = {0, 1, 255}; break;
      case GGUFType::I8: v = {-128, 0, 127}; break;
      case GGUFType::U16: v = {0, 65535}; break;
      case GGUFType::I16: v = {-32768, 32767}; break;
      case GGUFType::U32: v = {0, 4294967295LL}; break;
      case GGUFType::I32: v = {INT32_MIN, INT32_MAX}; break;
      case GGUFType::U64: v = {0, -1}; break;  // u64 max as its bits
      case GGUFType::I64: v = {INT64_MIN, INT64_MAX}; break;
      default: v = {1, 0, 1}; break;
    }
    f.set(std::string("a.") + gguf_type_name(t), GGUFValue::int_array(t, v));
  }
  f.set("a.f32", GGUFValue::float_array({0.5, -2.0, std::numeric_limits<float>::infinity()}));
  GGUFValue f64 = GGUFValue::float_array({1e300, -0.0, 1.0 / 3});
  f64.elem_type = GGUFType::F64;
  f.set("a.f64", f64);
  f.set("a.string", GGUFValue::string_array({"a", "", "\xe2\x96\x81the", std::string(300, 'x')}));
  f.set("a.empty", GGUFValue::int_array(GGUFType::I32, {}));
  f.set("a.empty.string", GGUFValue::string_array({}));
  // Arrays of arrays: [[u8...], [strings], []], and three levels deep.
  f.set("a.nested", array_of({GGUFValue::int_array(GGUFType::U8, {1, 2, 3}), GGUFValue::string_array({"x", "yz"}),
                              GGUFValue::float_array({}), array_of({})}));
  f.set("a.deep", array_of({array_of({GGUFValue::int_array(GGUFType::I16, {-1}),
                                      array_of({GGUFValue::string_array({"leaf"})})})}));
}

void add_tensors(GGUFFile& f) {
  auto add = [&](const char* name, DType t, std::vector<int64_t> shape) {
    GGUFTensorInfo ti;
    ti.name = name;
    ti.type = t;
    ti.n_dims = uint32_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) ti.ne[d] = shape[d];
    f.tensors.push_back(ti);
  };
  add("tok_embd.weight", DType::F32, {8, 3});
  add("blk.0.attn_q.weight", DType::Q8_0, {64, 2});
  add("blk.0.ffn_down_exps.weight", DType::Q4_K, {256, 1, 2});
  add("output_norm.weight", DType::F16, {2, 2, 2, 3});
  add("odd", DType::BF16, {5});
}

// A whole file: header, then each tensor's data (byte pattern from its index)
// padded to the alignment; the last tensor is not padded, so the file ends where
// its data does.
std::string build_file(GGUFFile& f) {
  std::string out = serialize_gguf_header(f);
  for (size_t k = 0; k < f.tensors.size(); ++k) {
    const GGUFTensorInfo& t = f.tensors[k];
    EXPECT_EQ(out.size(), f.data_offset + t.offset);
    for (uint64_t b = 0; b < t.bytes; ++b) out.push_back(char((k * 37 + b * 11) & 0xff));
    if (k + 1 < f.tensors.size()) out.resize((out.size() + f.alignment - 1) / f.alignment * f.alignment, '\0');
  }
  return out;
}

GGUFFile sample(uint32_t version = 3) {
  GGUFFile f;
  f.version = version;
  add_all_value_types(f);
  add_tensors(f);
  return f;
}

Result<GGUFFile> parse_bytes(const std::string& bytes, const GGUFParseLimits& lim = {}) {
  auto src = memory_source(bytes, "test.gguf");
  return parse_gguf(*src, lim);
}

void expect_same(const GGUFFile& a, const GGUFFile& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.alignment, b.alignment);
  EXPECT_EQ(a.data_offset, b.data_offset);
  ASSERT_EQ(a.keys, b.keys);
  for (const auto& k : a.keys) EXPECT_TRUE(gguf_values_equal(a.kv.at(k), b.kv.at(k))) << k;
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t k = 0; k < a.tensors.size(); ++k) {
    const auto &x = a.tensors[k], &y = b.tensors[k];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.n_dims, y.n_dims);
    for (int d = 0; d < kMaxDims; ++d) EXPECT_EQ(x.ne[d], y.ne[d]) << x.name;
    EXPECT_EQ(x.offset, y.offset) << x.name;
    EXPECT_EQ(x.bytes, y.bytes) << x.name;
  }
}

// Position of a unique marker in the bytes (a key or tensor name).
size_t find_once(const std::string& bytes, std::string_view what) {
  size_t at = bytes.find(what);
  EXPECT_NE(at, std::string::npos) << what;
  EXPECT_EQ(bytes.find(what, at + 1), std::string::npos) << what << " is not unique";
  return at;
}
template <typename T>
void poke(std::string& bytes, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}
template <typename T>
T peek(const std::string& bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("deltafin_gguf_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// --- Round trips ---------------------------------------------------------------

TEST(Gguf, RoundTripEveryValueTypeV3AndV2) {
  for (uint32_t version : {3u, 2u}) {
    GGUFFile f = sample(version);
    std::string bytes = build_file(f);
    auto r = parse_bytes(bytes);
    ASSERT_TRUE(r.ok()) << r.error().message;
    expect_same(f, *r);
    // Values read back as written.
    EXPECT_EQ(r->get_int("t.u32").value(), 4294967295LL);
    EXPECT_EQ(uint64_t(r->get_int("t.u64").value()), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(r->get_int("t.i8").value(), -128);
    EXPECT_FLOAT_EQ(float(r->get_float("t.f32").value()), -1.5e-7f);
    EXPECT_TRUE(std::isnan(r->get_float("t.f32.nan").value()));
    EXPECT_EQ(r->get_float("t.f64").value(), 3.141592653589793238);
    EXPECT_TRUE(r->get_bool("t.bool.true").value());
    EXPECT_EQ(r->get_string("t.str.nul").value(), std::string("a\0b", 3));
    EXPECT_EQ(r->find("a.string")->strings[3], std::string(300, 'x'));
    EXPECT_EQ(r->find("a.nested")->arrays[1].strings[1], "yz");
    EXPECT_EQ(r->find("a.deep")->arrays[0].arrays[1].arrays[0].strings[0], "leaf");
    EXPECT_EQ(r->find("a.i64")->ints[0], INT64_MIN);
    EXPECT_FALSE(r->get_string("t.u8").ok());
    EXPECT_NE(r->get_int("missing").error().message.find("missing"), std::string::npos);
    // Serialising what was parsed gives the same bytes.
    GGUFFile again = *r;
    EXPECT_EQ(serialize_gguf_header(again), bytes.substr(0, f.data_offset));
  }
}

TEST(Gguf, TensorOffsetsAndSizes) {
  GGUFFile f = sample();
  std::string bytes = build_file(f);
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->data_offset % 32, 0u);
  const auto& t = r->tensors;
  EXPECT_EQ(t[0].bytes, 8u * 3 * 4);
  EXPECT_EQ(t[1].bytes, 2u * 2 * 34);   // two rows of two Q8_0 blocks
  EXPECT_EQ(t[2].bytes, 2u * 144);      // two Q4_K blocks
  EXPECT_EQ(t[3].bytes, 24u * 2);
  EXPECT_EQ(t[4].bytes, 10u);
  uint64_t off = 0;
  for (size_t k = 0; k < t.size(); ++k) {
    EXPECT_EQ(t[k].offset, off) << t[k].name;
    EXPECT_EQ(t[k].offset % 32, 0u);
    off = (off + t[k].bytes + 31) / 32 * 32;
    // The data is where the offsets say.
    EXPECT_EQ(uint8_t(bytes[r->data_offset + t[k].offset + 1]), uint8_t((k * 37 + 11) & 0xff));
  }
  EXPECT_EQ(r->data_offset + t.back().offset + t.back().bytes, bytes.size());
}

TEST(Gguf, CustomAlignment) {
  for (uint32_t align : {1u, 8u, 64u, 4096u}) {
    GGUFFile f = sample();
    f.alignment = align;
    std::string bytes = build_file(f);
    ASSERT_NE(f.find("general.alignment"), nullptr) << "a non-default alignment must be written as a key";
    auto r = parse_bytes(bytes);
    ASSERT_TRUE(r.ok()) << align << ": " << r.error().message;
    EXPECT_EQ(r->alignment, align);
    EXPECT_EQ(r->data_offset % align, 0u);
    expect_same(f, *r);
  }
  // The key, when present, decides.
  GGUFFile f = sample();
  f.set("general.alignment", GGUFValue::u32(128));
  std::string bytes = build_file(f);
  EXPECT_EQ(f.alignment, 128u);
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->alignment, 128u);
  for (auto& t : r->tensors) EXPECT_EQ(t.offset % 128, 0u);
}

TEST(Gguf, NoTensorsNoMetadata) {
  GGUFFile f;
  std::string bytes = serialize_gguf_header(f);
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->keys.empty());
  EXPECT_TRUE(r->tensors.empty());
}

TEST(Gguf, WriterFileRoundTrip) {
  fs::path dir = temp_dir("writer");
  std::string path = (dir / "w.gguf").string();
  GGUFWriter w(path);
  add_all_value_types(w.file());
  w.file().alignment = 64;
  w.add_tensor("a", DType::F32, {3, 2});
  w.add_tensor("b", DType::Q8_0, {32});
  ASSERT_TRUE(w.begin().ok());
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(w.write_data(a.data(), 10).ok());  // in pieces
  ASSERT_TRUE(w.write_data(reinterpret_cast<char*>(a.data()) + 10, 14).ok());
  std::string b(34, '\x7f');
  ASSERT_TRUE(w.write_data(b.data(), b.size()).ok());
  EXPECT_FALSE(w.write_data(b.data(), 1).ok()) << "more data than tensors";
  ASSERT_TRUE(w.finish().ok());
  EXPECT_FALSE(fs::exists(path + ".partial"));

  auto src = open_file_source(path);
  ASSERT_TRUE(src.ok()) << src.error().message;
  auto r = parse_gguf(**src);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->alignment, 64u);
  EXPECT_EQ(r->tensors[1].offset, 64u);
  std::vector<float> back(6);
  ASSERT_TRUE((*src)->read_at(r->data_offset, back.data(), 24).ok());
  EXPECT_EQ(back, a);
  EXPECT_EQ((*src)->size(), r->data_offset + 64 + 34);

  // A writer that is not finished leaves nothing behind.
  {
    GGUFWriter w2((dir / "unfinished.gguf").string());
    w2.add_tensor("a", DType::F32, {4});
    ASSERT_TRUE(w2.begin().ok());
    EXPECT_FALSE(w2.finish().ok());
  }
  EXPECT_FALSE(fs::exists(dir / "unfinished.gguf"));
  EXPECT_FALSE(fs::exists(dir / "unfinished.gguf.partial"));
  fs::remove_all(dir);
}

// --- Hostile input ---------------------------------------------------------------

namespace {

// A small valid file with markers that the mutations below can find.
GGUFFile hostile_base() {
  GGUFFile f;
  f.set("general.architecture", GGUFValue::str("llama"));
  f.set("k.str", GGUFValue::str("value"));
  f.set("k.arr", GGUFValue::int_array(GGUFType::U32, {1, 2, 3}));
  f.set("k.bool", GGUFValue::boolean(true));
  f.set("k.sarr", GGUFValue::string_array({"s0", "s1"}));
  f.set("k.twin", GGUFValue::u32(7));
  GGUFTensorInfo a;
  a.name = "tensor.a";
  a.type = DType::F32;
  a.n_dims = 2;
  a.ne[0] = 4;
  a.ne[1] = 2;
  GGUFTensorInfo b = a;
  b.name = "tensor.b";
  b.n_dims = 1;
  b.ne[1] = 1;
  f.tensors = {a, b};
  return f;
}

struct Layout {
  std::string bytes;
  size_t value_at(std::string_view key) const {  // offset of the value after key + type
    return find_once(bytes, key) + key.size() + 4;
  }
  size_t type_at(std::string_view key) const { return find_once(bytes, key) + key.size(); }
  size_t tensor_at(std::string_view name) const { return find_once(bytes, name) + name.size(); }  // n_dims
};

Layout base_layout() {
  GGUFFile f = hostile_base();
  return Layout{build_file(f)};
}

struct HostileCase {
  const char* what;
  std::function<void(Layout&)> mutate;
  std::vector<std::string> expect;  // substrings of the error message
};

std::string off(size_t at) { return "offset " + std::to_string(at); }

}  // namespace

TEST(Gguf, BaseOfHostileCasesIsValid) {
  Layout l = base_layout();
  auto r = parse_bytes(l.bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->tensors.size(), 2u);
}

TEST(Gguf, HostileHeadersGiveClearErrors) {
  const Layout base = base_layout();
  std::vector<HostileCase> cases = {
      {"bad magic", [](Layout& l) { l.bytes[3] = 'X'; }, {"not a GGUF file", "offset 0"}},
      {"empty file", [](Layout& l) { l.bytes.clear(); }, {"truncated", "magic", "offset 0"}},
      {"version 1", [](Layout& l) { poke<uint32_t>(l.bytes, 4, 1); }, {"unsupported GGUF version 1", "offset 4"}},
      {"version 4", [](Layout& l) { poke<uint32_t>(l.bytes, 4, 4); }, {"unsupported GGUF version 4", "offset 4"}},
      {"big-endian", [](Layout& l) { poke<uint32_t>(l.bytes, 4, 0x03000000u); }, {"big-endian", "offset 4"}},
      {"absurd tensor count", [](Layout& l) { poke<uint64_t>(l.bytes, 8, uint64_t(1) << 62); },
       {"tensor count 4611686018427387904", "offset 8"}},
      {"tensor count too large for the file", [](Layout& l) { poke<uint64_t>(l.bytes, 8, 1000); },
       {"tensor count 1000", "offset 8"}},
      {"absurd metadata count", [](Layout& l) { poke<uint64_t>(l.bytes, 16, ~uint64_t(0)); },
       {"metadata count 18446744073709551615", "offset 16"}},
      {"metadata count one too many", [](Layout& l) { poke<uint64_t>(l.bytes, 16, 7); },
       {"tensor info 0", "past the end"}},  // the first tensor info is read as a key
      {"huge key length", [](Layout& l) { poke<uint64_t>(l.bytes, 24, uint64_t(1) << 40); },
       {"metadata key", "metadata entry 0", "offset 24", "length 1099511627776"}},
      {"huge string length",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.value_at("k.str"), uint64_t(1) << 50); },
       {"string value of metadata key 'k.str'", off(base.value_at("k.str")), "past the end"}},
      {"string length one byte too long",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.value_at("k.str"), 6); },
       {"metadata entry 2", "past the end"}},  // the next key's length is now misread
      {"2^40-element array",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.value_at("k.arr") + 4, uint64_t(1) << 40); },
       {"array length of metadata key 'k.arr'", off(base.value_at("k.arr") + 4), "1099511627776", "limit"}},
      {"array longer than the file",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.value_at("k.arr") + 4, 100000); },
       {"array length of metadata key 'k.arr'", off(base.value_at("k.arr") + 4), "do not fit"}},
      {"string array longer than the file",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.value_at("k.sarr") + 4, 1u << 20); },
       {"array length of metadata key 'k.sarr'", "do not fit"}},
      {"unknown value type", [](Layout& l) { poke<uint32_t>(l.bytes, l.type_at("k.str"), 13); },
       {"metadata key 'k.str'", "unknown value type 13", off(base.type_at("k.str"))}},
      {"unknown array element type",
       [](Layout& l) { poke<uint32_t>(l.bytes, l.value_at("k.arr"), 0xdead); },
       {"array of metadata key 'k.arr'", "unknown element type 57005", off(base.value_at("k.arr"))}},
      {"bool out of range", [](Layout& l) { l.bytes[l.value_at("k.bool")] = 2; },
       {"bool value of metadata key 'k.bool'", off(base.value_at("k.bool"))}},
      {"duplicate key",
       [](Layout& l) { l.bytes.replace(find_once(l.bytes, "k.twin"), 6, "k.bool"); },
       {"duplicate metadata key 'k.bool'"}},
      {"unknown tensor type",
       [](Layout& l) { poke<uint32_t>(l.bytes, l.tensor_at("tensor.b") + 4 + 8, 99); },
       {"tensor 'tensor.b'", "unknown type id 99", off(base.tensor_at("tensor.b") + 12)}},
      {"removed tensor type (Q4_2)",
       [](Layout& l) { poke<uint32_t>(l.bytes, l.tensor_at("tensor.b") + 4 + 8, 4); },
       {"tensor 'tensor.b'", "unknown type id 4"}},
      {"zero dimensions", [](Layout& l) { poke<uint32_t>(l.bytes, l.tensor_at("tensor.a"), 0); },
       {"tensor 'tensor.a'", "dimension count 0", off(base.tensor_at("tensor.a"))}},
      {"five dimensions", [](Layout& l) { poke<uint32_t>(l.bytes, l.tensor_at("tensor.a"), 5); },
       {"tensor 'tensor.a'", "dimension count 5"}},
      {"dimension of zero", [](Layout& l) { poke<uint64_t>(l.bytes, l.tensor_at("tensor.a") + 4, 0); },
       {"tensor 'tensor.a'", "impossible shape", "dimension 0 = 0", off(base.tensor_at("tensor.a") + 4)}},
      {"huge dimension",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.tensor_at("tensor.a") + 12, uint64_t(1) << 63); },
       {"tensor 'tensor.a'", "impossible shape", "dimension 1"}},
      {"element count overflows",
       [](Layout& l) {
         poke<uint64_t>(l.bytes, l.tensor_at("tensor.a") + 4, uint64_t(1) << 32);
         poke<uint64_t>(l.bytes, l.tensor_at("tensor.a") + 12, uint64_t(1) << 32);
       },
       {"tensor 'tensor.a'", "impossible shape"}},
      {"row not a multiple of the block",
       [](Layout& l) { poke<uint32_t>(l.bytes, l.tensor_at("tensor.a") + 20, uint32_t(DType::Q8_0)); },
       {"tensor 'tensor.a'", "row length 4", "Q8_0"}},
      {"misaligned data offset",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.tensor_at("tensor.b") + 16, 33); },
       {"tensor 'tensor.b'", "data offset 33", "alignment 32", off(base.tensor_at("tensor.b") + 16)}},
      {"overlapping tensors",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.tensor_at("tensor.b") + 16, 0); },
       {"'tensor.a'", "'tensor.b'", "overlap", "data offset 0"}},
      {"tensor past the end of the file",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.tensor_at("tensor.b") + 16, uint64_t(1) << 40); },
       {"tensor 'tensor.b'", "past the end", "data offset 1099511627776"}},
      {"tensor offset near 2^64",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.tensor_at("tensor.b") + 16, ~uint64_t(31)); },
       {"tensor 'tensor.b'", "past the end"}},
      {"tensor data truncated", [](Layout& l) { l.bytes.resize(l.bytes.size() - 1); },
       {"tensor 'tensor.b'", "past the end", "truncated"}},
      {"duplicate tensor",
       [](Layout& l) { l.bytes.replace(find_once(l.bytes, "tensor.b"), 8, "tensor.a"); },
       {"duplicate tensor name 'tensor.a'"}},
      {"huge tensor name length",
       [](Layout& l) { poke<uint64_t>(l.bytes, l.tensor_at("tensor.a") - 8 - 8, ~uint64_t(0)); },
       {"tensor name", "tensor info 0", "past the end"}},
      {"alignment zero",
       [](Layout& l) {
         GGUFFile f = hostile_base();
         f.set("general.alignment", GGUFValue::u32(64));
         l.bytes = build_file(f);
         poke<uint32_t>(l.bytes, l.value_at("general.alignment"), 0);
       },
       {"general.alignment", "power of two", "0"}},
      {"alignment not a power of two",
       [](Layout& l) {
         GGUFFile f = hostile_base();
         f.set("general.alignment", GGUFValue::u32(64));
         l.bytes = build_file(f);
         poke<uint32_t>(l.bytes, l.value_at("general.alignment"), 48);
       },
       {"general.alignment", "48"}},
      {"alignment huge",
       [](Layout& l) {
         GGUFFile f = hostile_base();
         f.set("general.alignment", GGUFValue::u32(64));
         l.bytes = build_file(f);
         poke<uint32_t>(l.bytes, l.value_at("general.alignment"), 1u << 31);
       },
       {"general.alignment", "2147483648"}},
      {"alignment of the wrong type",
       [](Layout& l) {
         GGUFFile f = hostile_base();
         f.set("general.alignment", GGUFValue::str("64"));
         l.bytes = build_file(f);
       },
       {"general.alignment", "string"}},
  };
  for (const auto& c : cases) {
    Layout l = base;
    c.mutate(l);
    auto r = parse_bytes(l.bytes);
    ASSERT_FALSE(r.ok()) << c.what << ": parsed";
    const std::string& msg = r.error().message;
    EXPECT_EQ(msg.rfind("test.gguf", 0), 0u) << c.what << ": names the file: " << msg;
    for (const auto& e : c.expect)
      EXPECT_NE(msg.find(e), std::string::npos) << c.what << ": expected '" << e << "' in: " << msg;
  }
}

TEST(Gguf, ArraysNestedTooDeep) {
  GGUFFile f;
  GGUFValue v = GGUFValue::int_array(GGUFType::U8, {1});
  for (int k = 0; k < 5; ++k) v = array_of({v});
  f.set("deep", v);
  std::string bytes = serialize_gguf_header(f);
  auto r = parse_bytes(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nested deeper than 4"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("'deep'"), std::string::npos) << r.error().message;
  GGUFParseLimits lim;
  lim.max_array_depth = 8;
  EXPECT_TRUE(parse_bytes(bytes, lim).ok());
}

TEST(Gguf, LimitsAreConfigurable) {
  GGUFFile f = sample();
  std::string bytes = build_file(f);
  GGUFParseLimits lim;
  lim.max_string = 100;  // "a.string" has a 300-byte element
  auto r = parse_bytes(bytes, lim);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'a.string'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("limit of 100"), std::string::npos) << r.error().message;
  lim = {};
  lim.max_array = 2;
  EXPECT_FALSE(parse_bytes(bytes, lim).ok());
  lim = {};
  lim.max_kv = 3;
  EXPECT_NE(parse_bytes(bytes, lim).error().message.find("metadata count"), std::string::npos);
  lim = {};
  lim.max_tensors = 4;
  EXPECT_NE(parse_bytes(bytes, lim).error().message.find("tensor count 5"), std::string::npos);
}

TEST(Gguf, TruncationAtEveryOffsetIsAnError) {
  GGUFFile f = sample();
  std::string bytes = build_file(f);
  ASSERT_TRUE(parse_bytes(bytes).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = parse_bytes(bytes.substr(0, n));
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    const std::string& msg = r.error().message;
    EXPECT_NE(msg.find("offset"), std::string::npos) << n << ": " << msg;
    EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("past the end") != std::string::npos ||
                msg.find("impossible") != std::string::npos || msg.find("do not fit") != std::string::npos)
        << n << ": " << msg;
  }
}

TEST(Gguf, SingleByteCorruptionNeverCrashes) {
  // Every byte of the header set to a few nasty values: parse must return (ok or
  // error), never crash. Run under ASan (DELTAFIN_SANITIZE) this also checks memory.
  GGUFFile f = hostile_base();
  std::string bytes = build_file(f);
  int errors = 0;
  for (size_t at = 0; at < f.data_offset; ++at) {
    for (uint8_t v : {uint8_t(0), uint8_t(1), uint8_t(0x7f), uint8_t(0x80), uint8_t(0xff)}) {
      std::string m = bytes;
      m[at] = char(v);
      auto r = parse_bytes(m);
      if (!r.ok()) {
        ++errors;
        EXPECT_FALSE(r.error().message.empty());
      }
    }
  }
  EXPECT_GT(errors, 0);
}

namespace {

// A source that claims to be `size` bytes long: `head` first, zeros after. It
// counts the bytes read, so a test can tell that the parser did not read (or
// allocate) what a lying header asked for.
class SparseSource final : public ByteSource {
 public:
  SparseSource(std::string head, uint64_t size) : head_(std::move(head)), size_(size) {}
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Status read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset > size_ || n > size_ - offset) return make_error("sparse: read past the end");
    bytes_read += n;
    std::memset(dst, 0, n);
    if (offset < head_.size())
      std::memcpy(dst, head_.data() + offset, std::min<uint64_t>(n, head_.size() - offset));
    return {};
  }
  uint64_t bytes_read = 0;

 private:
  std::string head_;
  uint64_t size_;
  std::string name_ = "sparse.gguf";
};

long max_rss_kb() { return long(platform::peak_rss_bytes() / 1024); }

}  // namespace

TEST(Gguf, AbsurdLengthsFailFastWithoutAllocating) {
  // A 1 TiB "file" whose header claims 2^40-element arrays, 2^40-byte strings and
  // 2^40 tensors: each must be refused by the limits before anything is allocated
  // or read, so the whole table runs in milliseconds and memory does not grow.
  const uint64_t kTiB = uint64_t(1) << 40;
  Layout base = base_layout();
  std::vector<std::function<void(std::string&)>> lies = {
      [&](std::string& b) { poke<uint64_t>(b, base.value_at("k.arr") + 4, kTiB); },
      [&](std::string& b) { poke<uint64_t>(b, base.value_at("k.sarr") + 4, kTiB); },
      [&](std::string& b) { poke<uint64_t>(b, base.value_at("k.str"), kTiB); },
      [&](std::string& b) { poke<uint64_t>(b, 24, kTiB); },
      [&](std::string& b) { poke<uint64_t>(b, 8, kTiB); },
      [&](std::string& b) { poke<uint64_t>(b, 16, kTiB); },
      [&](std::string& b) {  // a u8 array just over the limit: 64 MiB of zeros would follow
        poke<uint32_t>(b, base.value_at("k.arr"), uint32_t(GGUFType::U8));
        poke<uint64_t>(b, base.value_at("k.arr") + 4, (uint64_t(1) << 26) + 1);
      },
  };
  long rss_before = max_rss_kb();
  auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < lies.size(); ++k) {
    std::string head = base.bytes;
    lies[k](head);
    SparseSource src(head, kTiB);
    auto r = parse_gguf(src);
    ASSERT_FALSE(r.ok()) << "lie " << k;
    EXPECT_NE(r.error().message.find("sparse.gguf"), std::string::npos) << r.error().message;
    EXPECT_LE(src.bytes_read, uint64_t(1) << 20) << "lie " << k << ": " << r.error().message;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 1.0);
  EXPECT_LT(max_rss_kb() - rss_before, 64 * 1024) << "memory grew while refusing absurd lengths";
}

TEST(Gguf, ReadsThroughBoundedChunks) {
  // A header larger than the parser's read buffer (1 MiB) parses the same as a
  // small one: the reader refills across chunk boundaries.
  GGUFFile f;
  std::vector<std::string> toks;
  for (int k = 0; k < 150000; ++k) toks.push_back("tok" + std::to_string(k));
  f.set("tokenizer.ggml.tokens", GGUFValue::string_array(toks));
  std::vector<double> scores(100000);
  for (size_t k = 0; k < scores.size(); ++k) scores[k] = float(k) * 0.5f;
  f.set("tokenizer.ggml.scores", GGUFValue::float_array(scores));
  GGUFTensorInfo t;
  t.name = "x";
  t.n_dims = 1;
  t.ne[0] = 4;
  f.tensors = {t};
  std::string bytes = build_file(f);
  ASSERT_GT(bytes.size(), size_t(2) << 20);
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  expect_same(f, *r);
}

// --- Split models ----------------------------------------------------------------

namespace {

// Writes a model of 7 tensors with distinct data; returns its path.
std::string write_model(const fs::path& dir, const std::string& name, uint32_t alignment = 32) {
  std::string path = (dir / name).string();
  GGUFWriter w(path);
  w.file().set("general.architecture", GGUFValue::str("llama"));
  w.file().set("general.name", GGUFValue::str("split-test"));
  w.file().set("llama.block_count", GGUFValue::u32(3));
  if (alignment != 32) w.file().alignment = alignment;
  w.add_tensor("token_embd.weight", DType::F32, {16, 8});
  for (int l = 0; l < 3; ++l) {
    w.add_tensor("blk." + std::to_string(l) + ".attn_q.weight", DType::Q8_0, {64, 4});
    w.add_tensor("blk." + std::to_string(l) + ".ffn_norm.weight", DType::F32, {16});
  }
  EXPECT_TRUE(w.begin().ok());
  for (size_t k = 0; k < w.file().tensors.size(); ++k) {
    std::string data(w.file().tensors[k].bytes, '\0');
    for (size_t b = 0; b < data.size(); ++b) data[b] = char(k * 31 + b * 7);
    EXPECT_TRUE(w.write_data(data.data(), data.size()).ok());
  }
  EXPECT_TRUE(w.finish().ok());
  return path;
}

std::map<std::string, std::string> tensor_bytes(ModelFile& m) {
  std::map<std::string, std::string> out;
  for (const auto& [name, ref] : m.tensors()) {
    std::string b(ref.info->bytes, '\0');
    EXPECT_TRUE(m.read_tensor(ref, b.data()).ok()) << name;
    out[name] = b;
  }
  return out;
}

}  // namespace

TEST(GgufSplit, SplitModelOpensLikeTheWhole) {
  fs::path dir = temp_dir("split");
  for (uint32_t align : {32u, 64u}) {
    std::string whole = write_model(dir, "m.gguf", align);
    std::vector<std::string> parts;
    Status st = split_gguf(whole, 3, {.out_prefix = (dir / "s").string()}, &parts);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0], (dir / "s-00001-of-00003.gguf").string());
    EXPECT_EQ(parts[2], (dir / "s-00003-of-00003.gguf").string());

    auto a = ModelFile::open(whole, local_file_opener());
    auto b = ModelFile::open(parts[0], local_file_opener());
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ((*b)->shard_count(), 3);
    EXPECT_EQ(tensor_bytes(**a), tensor_bytes(**b));
    for (const auto& [name, ref] : (*a)->tensors()) {
      const TensorRef* r = (*b)->tensor(name);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->info->type, ref.info->type);
      for (int d = 0; d < kMaxDims; ++d) EXPECT_EQ(r->info->ne[d], ref.info->ne[d]);
    }
    // The first part has all the metadata plus the split keys, typed as gguf-split writes them.
    const GGUFFile& m = (*b)->meta();
    for (const auto& k : (*a)->meta().keys) {
      ASSERT_NE(m.find(k), nullptr) << k;
      EXPECT_TRUE(gguf_values_equal(*m.find(k), (*a)->meta().kv.at(k))) << k;
    }
    EXPECT_EQ(m.find("split.no")->type, GGUFType::U16);
    EXPECT_EQ(m.find("split.count")->type, GGUFType::U16);
    EXPECT_EQ(m.find("split.tensors.count")->type, GGUFType::I32);
    EXPECT_EQ(m.int_or("split.count", 0), 3);
    EXPECT_EQ(m.int_or("split.tensors.count", 0), 7);
    // Later parts carry only the split keys (and a non-default alignment); every part holds tensors.
    for (int s = 1; s < 3; ++s) {
      const GGUFFile& p = (*b)->shard(s);
      EXPECT_EQ(p.int_or("split.no", -1), s);
      EXPECT_EQ(p.find("general.name"), nullptr);
      EXPECT_FALSE(p.tensors.empty());
      EXPECT_EQ(p.alignment, align);
    }
    EXPECT_FALSE((*b)->shard(0).tensors.empty());
    // Tensors keep their order across the parts.
    std::vector<std::string> order_a, order_b;
    for (auto& t : (*a)->meta().tensors) order_a.push_back(t.name);
    for (int s = 0; s < 3; ++s)
      for (auto& t : (*b)->shard(s).tensors) order_b.push_back(t.name);
    EXPECT_EQ(order_a, order_b);

    // Re-splitting a split model, and merging it back to one file, keep the bytes.
    std::vector<std::string> parts2;
    st = split_gguf(parts[0], 2, {.out_prefix = (dir / "r").string()}, &parts2);
    ASSERT_TRUE(st.ok()) << st.error().message;
    auto c = ModelFile::open(parts2[0], local_file_opener());
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(tensor_bytes(**a), tensor_bytes(**c));
    std::vector<std::string> merged;
    st = split_gguf(parts2[0], 1, {.out_prefix = (dir / "merged").string()}, &merged);
    ASSERT_TRUE(st.ok()) << st.error().message;
    auto d = ModelFile::open(merged[0], local_file_opener());
    ASSERT_TRUE(d.ok()) << d.error().message;
    EXPECT_EQ((*d)->shard_count(), 1);
    EXPECT_EQ((*d)->meta().find("split.count"), nullptr);
    EXPECT_EQ(tensor_bytes(**a), tensor_bytes(**d));
    if (align == 32) {
      EXPECT_EQ(read_all(merged[0]), read_all(whole)) << "a merge gives back the original file";
    }
  }
  fs::remove_all(dir);
}

TEST(GgufSplit, MissingOrWrongPartsGiveClearErrors) {
  fs::path dir = temp_dir("split_err");
  std::string whole = write_model(dir, "m.gguf");
  std::vector<std::string> parts;
  ASSERT_TRUE(split_gguf(whole, 3, {}, &parts).ok());
  EXPECT_EQ(parts[0], (dir / "m-00001-of-00003.gguf").string());

  // Opening part 2 directly.
  auto r = ModelFile::open(parts[1], local_file_opener());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("part 2 of 3"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(parts[0]), std::string::npos) << r.error().message;

  // A missing part.
  fs::rename(parts[2], dir / "moved.gguf");
  r = ModelFile::open(parts[0], local_file_opener());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("part 3 of 3"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("missing"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("m-00003-of-00003.gguf"), std::string::npos) << r.error().message;

  // A part from another split (split.no does not match its name).
  fs::copy_file(parts[1], parts[2]);
  r = ModelFile::open(parts[0], local_file_opener());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("split.no = 2"), std::string::npos) << r.error().message;

  // A first part renamed so that the other parts cannot be found by name.
  fs::copy_file(parts[0], dir / "renamed.gguf");
  r = ModelFile::open((dir / "renamed.gguf").string(), local_file_opener());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("NAME-00001-of-00003.gguf"), std::string::npos) << r.error().message;

  // Never over the input: re-splitting a split model in place, merging onto itself.
  fs::copy_file(dir / "moved.gguf", parts[2], fs::copy_options::overwrite_existing);
  Status st = split_gguf(parts[0], 3);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("overwrite the input"), std::string::npos) << st.error().message;
  st = split_gguf(whole, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("overwrite the input"), std::string::npos) << st.error().message;
  EXPECT_TRUE(ModelFile::open(parts[0], local_file_opener()).ok()) << "the input is intact";

  // More parts than tensors, and nonsense counts.
  EXPECT_FALSE(split_gguf(whole, 8, {.out_prefix = (dir / "x").string()}).ok());
  EXPECT_FALSE(split_gguf(whole, 0, {.out_prefix = (dir / "x").string()}).ok());
  EXPECT_FALSE(fs::exists(dir / "x-00001-of-00008.gguf"));
  fs::remove_all(dir);
}

TEST(GgufSplit, RemoveInput) {
  fs::path dir = temp_dir("split_rm");
  std::string whole = write_model(dir, "m.gguf");
  std::vector<std::string> parts;
  ASSERT_TRUE(split_gguf(whole, 2, {.out_prefix = "", .remove_input = true}, &parts).ok());
  EXPECT_FALSE(fs::exists(whole));
  for (auto& p : parts) EXPECT_TRUE(fs::exists(p));
  auto m = ModelFile::open(parts[0], local_file_opener());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->tensors().size(), 7u);
  fs::remove_all(dir);
}

TEST(GgufSplit, SplitCountOutOfRange) {
  GGUFFile f = hostile_base();
  f.set("split.count", GGUFValue::u64((uint64_t(1) << 32) + 2));  // must not wrap to 2
  std::string bytes = build_file(f);
  auto r = ModelFile::open("m-00001-of-00002.gguf", [&](const std::string&) -> Result<std::unique_ptr<ByteSource>> {
    return memory_source(bytes, "m");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("split.count 4294967298"), std::string::npos) << r.error().message;
}
