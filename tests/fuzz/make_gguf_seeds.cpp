// Writes the seed corpus for fuzz_gguf: small valid GGUF files covering every
// value type, nested arrays, v2 and v3, custom alignment, split-model keys and
// several tensor types. Usage: make_gguf_seeds DIR (the committed seeds live in
// tests/fuzz/corpus/gguf; rerun this only to regenerate them).
#include <cstdio>
#include <fstream>
#include <string>

#include "format/gguf.h"

using namespace deltafin;

namespace {

void add_tensor(GGUFFile& f, const char* name, DType t, std::initializer_list<int64_t> shape) {
  GGUFTensorInfo ti;
  ti.name = name;
  ti.type = t;
  for (int64_t n : shape) ti.ne[ti.n_dims++] = n;
  f.tensors.push_back(ti);
}

// Header, then each tensor's bytes (a counting pattern) padded to the alignment.
bool write(const std::string& dir, const std::string& name, GGUFFile f) {
  std::string out = serialize_gguf_header(f);
  for (size_t k = 0; k < f.tensors.size(); ++k) {
    for (uint64_t b = 0; b < f.tensors[k].bytes; ++b) out.push_back(char(b));
    if (k + 1 < f.tensors.size()) out.resize((out.size() + f.alignment - 1) / f.alignment * f.alignment, '\0');
  }
  std::ofstream o(dir + "/" + name, std::ios::binary);
  o.write(out.data(), std::streamsize(out.size()));
  return bool(o);
}

GGUFValue typed(GGUFType t, int64_t i) {
  GGUFValue v;
  v.type = t;
  v.i = i;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_gguf_seeds DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  bool ok = true;

  GGUFFile empty;
  ok &= write(dir, "seed-empty-v3", empty);

  GGUFFile scalars;
  scalars.version = 2;
  for (uint32_t t : {0u, 1u, 2u, 3u, 4u, 5u, 7u, 10u, 11u})
    scalars.set("s." + std::string(gguf_type_name(GGUFType(t))), typed(GGUFType(t), 1));
  scalars.set("s.f32", GGUFValue::f32(0.5f));
  GGUFValue f64;
  f64.type = GGUFType::F64;
  f64.f = -2.25;
  scalars.set("s.f64", f64);
  scalars.set("s.string", GGUFValue::str("hello"));
  add_tensor(scalars, "t", DType::F32, {2});
  ok &= write(dir, "seed-scalars-v2", scalars);

  GGUFFile arrays;
  arrays.set("general.architecture", GGUFValue::str("qwen3moe"));
  arrays.set("tokenizer.ggml.tokens", GGUFValue::string_array({"a", "b", "<s>"}));
  arrays.set("tokenizer.ggml.scores", GGUFValue::float_array({0.0, -1.0, 2.0}));
  arrays.set("tokenizer.ggml.token_type", GGUFValue::int_array(GGUFType::I32, {1, 1, 3}));
  GGUFValue nested;
  nested.type = GGUFType::ARRAY;
  nested.elem_type = GGUFType::ARRAY;
  nested.arrays = {GGUFValue::int_array(GGUFType::U8, {1, 2}), GGUFValue::string_array({"x"})};
  arrays.set("nested", nested);
  add_tensor(arrays, "token_embd.weight", DType::F16, {4, 3});
  add_tensor(arrays, "blk.0.ffn_gate_exps.weight", DType::Q4_0, {32, 1, 2});
  ok &= write(dir, "seed-arrays-v3", arrays);

  GGUFFile aligned;
  aligned.alignment = 64;
  aligned.set("general.name", GGUFValue::str("aligned"));
  add_tensor(aligned, "a", DType::Q8_0, {32, 2});
  add_tensor(aligned, "b", DType::BF16, {3});
  add_tensor(aligned, "c", DType::Q4_K, {256});
  ok &= write(dir, "seed-align64", aligned);

  GGUFFile split;
  split.set("general.architecture", GGUFValue::str("llama"));
  split.set("split.no", typed(GGUFType::U16, 0));
  split.set("split.count", typed(GGUFType::U16, 2));
  split.set("split.tensors.count", typed(GGUFType::I32, 2));
  add_tensor(split, "x", DType::F32, {1, 1, 1, 1});
  ok &= write(dir, "seed-split-part1", split);
  split.kv.clear();
  split.keys.clear();
  split.set("split.no", typed(GGUFType::U16, 1));
  split.set("split.count", typed(GGUFType::U16, 2));
  split.set("split.tensors.count", typed(GGUFType::I32, 2));
  split.tensors[0].name = "y";
  ok &= write(dir, "seed-split-part2", split);

  // Hostile inputs (each must be refused): they keep the error paths in the replay test.
  auto patch = [&](const std::string& name, GGUFFile f, auto&& mutate) {
    std::string out = serialize_gguf_header(f);
    for (auto& t : f.tensors) out.resize(f.data_offset + t.offset + t.bytes, '\x11');
    mutate(out);
    std::ofstream o(dir + "/" + name, std::ios::binary);
    o.write(out.data(), std::streamsize(out.size()));
    ok &= bool(o);
  };
  auto find_after = [](const std::string& b, const std::string& what) { return b.find(what) + what.size(); };
  patch("hostile-array-2e40", arrays, [&](std::string& b) {
    uint64_t n = uint64_t(1) << 40;
    b.replace(find_after(b, "tokenizer.ggml.tokens") + 8, 8, reinterpret_cast<const char*>(&n), 8);
  });
  patch("hostile-overlap", aligned, [&](std::string& b) {
    uint64_t zero = 0;  // tensor "b" at data offset 0, inside "a"
    std::string name_b = std::string("\x01\0\0\0\0\0\0\0", 8) + "b";  // u64 length, then "b"
    b.replace(find_after(b, name_b) + 4 + 8 + 4, 8,
              reinterpret_cast<const char*>(&zero), 8);
  });
  patch("hostile-truncated", arrays, [&](std::string& b) { b.resize(b.size() / 2); });
  patch("hostile-split-count", split, [&](std::string& b) {
    uint16_t big = 0xffff;
    b.replace(find_after(b, "split.count") + 4, 2, reinterpret_cast<const char*>(&big), 2);
  });

  if (!ok) {
    std::fprintf(stderr, "make_gguf_seeds: cannot write to %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
