// Kimi K3's Hugging Face form (format/hf_arch_kimi_k3.cpp, hf_mxfp4.h, hf_derive.h):
// compressed-tensors MXFP4 read back as GGUF blocks over any sub-range equals the
// whole-tensor codec; a missing or mistyped weight_scale is an error naming it; the
// config's layer lists become GGUF layer kinds (and a layer in neither or both
// lists is an error naming it); the derived tensors (res_norm * res_proj,
// -exp(A_log)) computed over arbitrary ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "format/hf_arch.h"
#include "format/hf_derive.h"
#include "format/hf_mxfp4.h"
#include "kernels/blocks.h"
#include "quant/hf_codecs.h"

using namespace deltafin;

namespace {

std::string bytes_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// A folder of one in-memory shard holding `tensors` (name -> dtype, shape, bytes).
struct MemFolder {
  HfFolder f;
  std::string data;
  void add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, const std::string& b) {
    HfTensor t{name, 0, dtype, std::move(shape), data.size(), b.size()};
    data += b;
    f.tensors[name] = t;
  }
  void open() {
    f.location = "mem";
    f.shards = {std::shared_ptr<ByteSource>(memory_source(data, "mem.safetensors"))};
  }
};

std::string bf16_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = kern::f32_to_bf16(v[i]);
    std::memcpy(&s[2 * i], &h, 2);
  }
  return s;
}

std::vector<float> read_all(HfDerivedReader& r, size_t n, size_t step) {
  std::vector<float> out(n);
  char* p = reinterpret_cast<char*>(out.data());
  for (size_t off = 0; off < n * 4; off += step) EXPECT_TRUE(r.read(off, p + off, std::min(step, n * 4 - off)).ok());
  return out;
}

}  // namespace

TEST(HfKimiK3, Mxfp4SubRangesEqualTheCodec) {
  const int64_t rows = 6, cols = 96;
  std::mt19937 rng(3);
  std::vector<uint8_t> packed(size_t(rows * cols / 2)), scales(size_t(rows * cols / 32)), want(size_t(rows * cols / 32 * 17));
  for (auto& b : packed) b = uint8_t(rng());
  for (auto& b : scales) b = uint8_t(100 + rng() % 50);
  mxfp4_ct_to_gguf(packed.data(), scales.data(), rows, cols, want.data());
  auto codes = memory_source("xx" + bytes_of(packed), "codes");
  auto sc = memory_source("yyy" + bytes_of(scales), "scales");
  for (size_t lo = 0; lo < want.size(); lo += 7)
    for (size_t n : {size_t(1), size_t(16), size_t(17), size_t(40), want.size() - lo}) {
      if (lo + n > want.size()) continue;
      std::vector<uint8_t> got(n);
      ASSERT_TRUE(read_mxfp4_ct(*codes, *sc, 2, 3, lo, reinterpret_cast<char*>(got.data()), n).ok());
      ASSERT_EQ(0, std::memcmp(got.data(), want.data() + lo, n)) << lo << " " << n;
    }
}

TEST(HfKimiK3, Mxfp4ScaleMissingOrMistyped) {
  MemFolder m;
  m.add("e.w1.weight_packed", "U8", {4, 16}, std::string(64, '\1'));
  m.open();
  auto r = find_mxfp4_scale(m.f, "e.w1.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'e.w1.weight_scale' is missing"), std::string::npos) << r.error().message;
  m.add("e.w1.weight_scale", "BF16", {4, 1}, std::string(8, '\1'));
  r = find_mxfp4_scale(m.f, "e.w1.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("BF16"), std::string::npos) << r.error().message;
  auto none = find_mxfp4_scale(m.f, "other.weight");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST(HfKimiK3, ConfigLayerKinds) {
  const HfArch* a = find_hf_arch("kimi_linear", "kimi_k3");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(find_hf_arch("kimi_linear", ""), nullptr);  // Kimi Linear itself is another model
  EXPECT_EQ(a, find_hf_arch_by_gguf("kimi-k3"));
  nlohmann::json c = {{"num_hidden_layers", 4}, {"max_position_embeddings", 4096}, {"hidden_size", 64},
                      {"num_attention_heads", 2}, {"rms_norm_eps", 1e-5}, {"kv_lora_rank", 32},
                      {"q_lora_rank", nullptr}, {"qk_rope_head_dim", 8}, {"qk_nope_head_dim", 16},
                      {"v_head_dim", 16}, {"first_k_dense_replace", 1}, {"intermediate_size", 128},
                      {"moe_intermediate_size", 32}, {"num_experts", 4}, {"num_experts_per_token", 2},
                      {"num_shared_experts", 1}, {"routed_expert_hidden_size", 32}, {"attn_res_block_size", 2},
                      {"activation_situ_beta", 4.0}, {"activation_situ_linear_beta", 25.0},
                      {"linear_attn_config",
                       {{"num_heads", 2}, {"head_dim", 16}, {"short_conv_kernel_size", 4},
                        {"gate_lower_bound", -5.0}, {"kda_layers", {1, 2, 4}}, {"full_attn_layers", {3}}}}};
  GGUFFile m;
  ASSERT_TRUE(a->config_to_gguf(c, &m).ok());
  const GGUFValue* kinds = m.find("kimi-k3.attention.head_count_kv");
  ASSERT_NE(kinds, nullptr);
  EXPECT_EQ(kinds->ints, (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(m.int_or("kimi-k3.expert_latent_length", 0), 32);
  EXPECT_EQ(m.int_or("kimi-k3.attention.key_length", 0), 40);
  // Bits: 1 KDA, 2 MLA, 4 dense FFN, 8 MoE.
  EXPECT_EQ(a->layer_kind(c, 0), 1u | 4u);
  EXPECT_EQ(a->layer_kind(c, 1), 1u | 8u);
  EXPECT_EQ(a->layer_kind(c, 2), 2u | 8u);
  // Back to a config and again: the same keys.
  nlohmann::json back;
  ASSERT_TRUE(a->gguf_to_config(m, &back).ok());
  GGUFFile m2;
  ASSERT_TRUE(a->config_to_gguf(back, &m2).ok());
  for (const auto& [k, v] : m.kv) {
    const GGUFValue* w = m2.find(k);
    ASSERT_NE(w, nullptr) << k;
  }
  c["linear_attn_config"]["full_attn_layers"] = {2, 3};
  Status s = a->config_to_gguf(c, &m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("layer 2 is in both"), std::string::npos) << s.error().message;
  c["linear_attn_config"]["full_attn_layers"] = nlohmann::json::array();
  s = a->config_to_gguf(c, &m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("layer 3 is in neither"), std::string::npos) << s.error().message;
}

TEST(HfKimiK3, DerivedTensors) {
  const int64_t H = 3, dn = 4, dv = 2, r = 5, E = 6;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  auto draw = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = kern::bf16_to_f32(kern::f32_to_bf16(nd(rng)));
    return v;
  };
  const std::vector<float> kv = draw(size_t(H * (dn + dv) * r)), a = draw(size_t(E)), b = draw(size_t(E)),
                           alog = draw(size_t(H));
  MemFolder m;
  m.add("kv", "BF16", {H * (dn + dv), r}, bf16_bytes(kv));
  m.add("n", "BF16", {E}, bf16_bytes(a));
  m.add("p", "BF16", {1, E}, bf16_bytes(b));
  m.add("A", "BF16", {H}, bf16_bytes(alog));
  m.f.config = {{"num_attention_heads", H}, {"qk_nope_head_dim", dn}, {"v_head_dim", dv}, {"kv_lora_rank", r}};
  m.open();

  HfNameRule mr{"s", "n", true, true, HfDerive::Mul, "p"};
  auto mp = hf_plan_derived(m.f, mr, -1);
  ASSERT_TRUE(mp.ok());
  const std::vector<float> s = read_all(*mp->reader, size_t(E), 8);
  for (int64_t i = 0; i < E; ++i) EXPECT_EQ(s[size_t(i)], a[size_t(i)] * b[size_t(i)]);
  HfNameRule er{"a", "A", false, true, HfDerive::NegExp};
  auto ep = hf_plan_derived(m.f, er, -1);
  ASSERT_TRUE(ep.ok());
  const std::vector<float> x = read_all(*ep->reader, size_t(H), 4);
  for (int64_t i = 0; i < H; ++i) EXPECT_EQ(x[size_t(i)], float(-std::exp(double(alog[size_t(i)]))));

  // An optional product with neither factor is absent; with one factor, an error.
  HfNameRule absent{"s", "nn", true, true, HfDerive::Mul, "pp"};
  auto ap = hf_plan_derived(m.f, absent, -1);
  ASSERT_TRUE(ap.ok());
  EXPECT_TRUE(ap->info.name.empty());
  HfNameRule half{"s", "n", true, true, HfDerive::Mul, "pp"};
  auto hp = hf_plan_derived(m.f, half, -1);
  ASSERT_FALSE(hp.ok());
  EXPECT_NE(hp.error().message.find("'pp' is missing"), std::string::npos) << hp.error().message;
}
