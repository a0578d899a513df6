// safetensors headers: a valid shard parses to absolute offsets; each malformed
// header (bad JSON, bad length, offsets out of range, overlapping, size not dtype x
// shape, unknown dtype) and every truncation fails with a message naming the file
// and, where there is one, the tensor. The {L}/{E} name patterns of hf_arch.h.
#include <gtest/gtest.h>

#include <string>

#include "format/hf_arch.h"
#include "format/safetensors.h"

using namespace deltafin;

namespace {

std::string shard(const std::string& json, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s + json + std::string(data_bytes, '\x5a');
}

const char* kValid =
    R"({"__metadata__":{"format":"pt"},)"
    R"("b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},)"
    R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";

Result<SafetensorsHeader> parse(const std::string& bytes) {
  auto src = memory_source(bytes, "s.safetensors");
  return parse_safetensors(*src);
}

}  // namespace

TEST(Safetensors, ValidHeader) {
  const std::string j = kValid;
  auto h = parse(shard(j, 28));
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->header_bytes, 8 + j.size());
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->metadata.at("format"), "pt");
  for (const auto& t : h->tensors) {
    if (t.name == "a") {
      EXPECT_EQ(t.dtype, "F32");
      EXPECT_EQ(t.offset, 8 + j.size());
      EXPECT_EQ(t.bytes, 16u);
    } else {
      EXPECT_EQ(t.name, "b");
      EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
      EXPECT_EQ(t.offset, 8 + j.size() + 16);
      EXPECT_EQ(t.bytes, 12u);
    }
  }
}

TEST(Safetensors, MalformedHeadersNameFileAndTensor) {
  struct Case {
    std::string json;
    size_t data;
    std::string want;  // in the message
  };
  const std::vector<Case> cases = {
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})", 16, "not valid JSON"},
      {R"([1,2])", 0, "not a JSON object"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8, "'a': data_offsets [0, 16] run past"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16, "'a': 12 bytes for 4 elements"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", 16, "'a': data_offsets [16, 0] end before"},
      {R"({"a":{"dtype":"Q9","shape":[4],"data_offsets":[0,16]}})", 16, "'a': unknown dtype 'Q9'"},
      {R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16, "'a': shape holds"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", 16, "'a': data_offsets must be"},
      {R"({"a":{"shape":[4],"data_offsets":[0,16]}})", 16, "'a': no dtype"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       16, "'a' and 'b' overlap"},
      {R"({"__metadata__":{"x":1}})", 0, "__metadata__ 'x'"},
  };
  for (const Case& c : cases) {
    auto h = parse(shard(c.json, c.data));
    ASSERT_FALSE(h.ok()) << c.json;
    EXPECT_NE(h.error().message.find("s.safetensors"), std::string::npos) << h.error().message;
    EXPECT_NE(h.error().message.find(c.want), std::string::npos) << c.json << " -> " << h.error().message;
  }
}

TEST(Safetensors, LengthAndTruncation) {
  const std::string good = shard(kValid, 28);
  // Every truncation fails (the last tensor runs past the end, or the header does).
  for (size_t n = 0; n < good.size(); ++n) {
    auto h = parse(good.substr(0, n));
    EXPECT_FALSE(h.ok()) << "truncated to " << n;
    if (!h.ok()) {
      EXPECT_NE(h.error().message.find("s.safetensors"), std::string::npos);
    }
  }
  std::string huge = good;
  huge[7] = '\x7f';  // a length of ~2^62
  auto h = parse(huge);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().message.find("over the limit"), std::string::npos) << h.error().message;
}

TEST(HfArch, NamePatterns) {
  int L, E;
  const std::string p = "model.layers.{L}.mlp.experts.{E}.gate_proj.weight";
  EXPECT_TRUE(hf_name_match(p, "model.layers.12.mlp.experts.7.gate_proj.weight", &L, &E));
  EXPECT_EQ(L, 12);
  EXPECT_EQ(E, 7);
  EXPECT_FALSE(hf_name_match(p, "model.layers.01.mlp.experts.7.gate_proj.weight", &L, &E));
  EXPECT_FALSE(hf_name_match(p, "model.layers.1.mlp.experts.7.up_proj.weight", &L, &E));
  EXPECT_EQ(hf_name_expand(p, 3, 5), "model.layers.3.mlp.experts.5.gate_proj.weight");
  // Every qwen3moe rule expands and matches back to its own indices, both directions.
  const HfArch* a = find_hf_arch_by_gguf("qwen3moe");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(find_hf_arch_by_model_type("qwen3_moe"), a);
  for (const HfNameRule& r : a->rules) {
    EXPECT_TRUE(hf_name_match(r.hf, hf_name_expand(r.hf, 4, 9), &L, &E)) << r.hf;
    EXPECT_EQ(L, hf_rule_has_layer(r) ? 4 : -1) << r.hf;
    EXPECT_EQ(E, hf_rule_has_expert(r) ? 9 : -1) << r.hf;
    EXPECT_TRUE(hf_name_match(r.gguf, hf_name_expand(r.gguf, 4, -1), &L, &E)) << r.gguf;
  }
}
