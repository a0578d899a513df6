// A deepseek_v3 folder (BF16, FP8, INT4) seen as a GGUF (format/hf_gguf_source.h):
// every byte range reads the same bytes as the whole file does (the expert store reads
// single expert slices, the weight loader whole tensors, the header parser a prefix),
// the tensor directory is deepseek2's (attn_k_b/attn_v_b split from kv_b_proj, dense
// then MoE layers), and the FP8/INT4 weights become BF16.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "format/hf_export.h"
#include "format/hf_folder.h"
#include "format/hf_gguf_source.h"
#include "synth/synth.h"
#include "synth_once.h"

using namespace deltafin;

namespace {

std::string tiny_deepseek() {
  SynthSpec s;
  EXPECT_TRUE(synth_preset("tiny", "deepseek2", &s));
  s.type = s.expert_type = DType::BF16;
  s.seed = 4;
  std::string why;
  std::string p = synth_once("hf_deepseek", "tiny", s, &why);
  EXPECT_FALSE(p.empty()) << why;
  return p;
}

std::unique_ptr<HfGgufSource> open_view(HfEncoding enc, const std::string& name) {
  const std::string dir = test_dir("hf_deepseek") + "/" + name;
  std::filesystem::remove_all(dir);
  HfExportOptions o;
  o.encoding = enc;
  o.shards = 4;
  Status st = export_gguf_as_hf(tiny_deepseek(), dir, o);
  EXPECT_TRUE(st.ok()) << st.error().message;
  auto folder = open_hf_folder(dir, hf_local_opener(dir));
  EXPECT_TRUE(folder.ok()) << folder.error().message;
  auto v = HfGgufSource::build(*folder);
  EXPECT_TRUE(v.ok()) << v.error().message;
  return v.ok() ? std::move(*v) : nullptr;
}

const GGUFTensorInfo* find(const GGUFFile& m, const std::string& n) {
  for (const auto& t : m.tensors)
    if (t.name == n) return &t;
  return nullptr;
}

void check_ranges(HfGgufSource& v) {
  std::vector<char> all(size_t(v.size()));
  ASSERT_TRUE(v.read_at(0, all.data(), all.size()).ok());
  std::mt19937_64 rng(11);
  std::vector<char> part;
  for (int i = 0; i < 400; ++i) {
    const uint64_t off = rng() % v.size();
    const uint64_t n = std::min<uint64_t>(v.size() - off, 1 + rng() % (i % 4 == 0 ? 200000 : 300));
    part.resize(size_t(n));
    ASSERT_TRUE(v.read_at(off, part.data(), part.size()).ok());
    ASSERT_EQ(0, std::memcmp(part.data(), all.data() + off, part.size())) << "range " << off << "+" << n;
  }
  // Every tensor, and every expert's slice of a stacked one, on its own.
  const GGUFFile& m = v.meta();
  for (const auto& t : m.tensors) {
    const uint64_t per = t.n_dims == 3 && t.name.find("_exps") != std::string::npos ? t.bytes / uint64_t(t.ne[2]) : t.bytes;
    for (uint64_t at = 0; at < t.bytes; at += per) {
      part.resize(size_t(per));
      ASSERT_TRUE(v.read_at(m.data_offset + t.offset + at, part.data(), part.size()).ok());
      ASSERT_EQ(0, std::memcmp(part.data(), all.data() + m.data_offset + t.offset + at, part.size())) << t.name;
    }
  }
}

}  // namespace

TEST(HfDeepseek, PlainFolderIsTheSplitMlaLayout) {
  auto v = open_view(HfEncoding::Plain, "plain");
  ASSERT_TRUE(v);
  const GGUFFile& m = v->meta();
  EXPECT_EQ(m.string_or("general.architecture", ""), "deepseek2");
  EXPECT_EQ(m.int_or("deepseek2.attention.head_count_kv", 0), 1);
  EXPECT_EQ(m.int_or("deepseek2.leading_dense_block_count", -1), 1);
  EXPECT_EQ(m.int_or("deepseek2.expert_gating_func", 0), 2);
  const GGUFTensorInfo* kb = find(m, "blk.0.attn_k_b.weight");
  const GGUFTensorInfo* vb = find(m, "blk.0.attn_v_b.weight");
  ASSERT_TRUE(kb && vb);
  EXPECT_EQ(kb->n_dims, 3u);
  EXPECT_EQ(kb->ne[2], 4);
  EXPECT_EQ(vb->ne[0], kb->ne[1]);  // r_kv
  EXPECT_TRUE(find(m, "blk.0.ffn_gate.weight") && !find(m, "blk.0.ffn_gate_exps.weight"));
  EXPECT_TRUE(find(m, "blk.1.ffn_gate_exps.weight") && find(m, "blk.1.exp_probs_b.bias") && !find(m, "blk.1.ffn_gate.weight"));
  check_ranges(*v);
}

TEST(HfDeepseek, Fp8FolderReadsAnyRangeAsBf16) {
  auto v = open_view(HfEncoding::Fp8, "fp8");
  ASSERT_TRUE(v);
  const GGUFTensorInfo* t = find(v->meta(), "blk.1.ffn_up_exps.weight");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->type, DType::BF16);
  EXPECT_EQ(find(v->meta(), "blk.0.attn_k_b.weight")->type, DType::BF16);
  check_ranges(*v);
}

TEST(HfDeepseek, Int4FolderReadsAnyRangeAsBf16) {
  auto v = open_view(HfEncoding::Int4, "int4");
  ASSERT_TRUE(v);
  EXPECT_EQ(find(v->meta(), "blk.2.ffn_down_exps.weight")->type, DType::BF16);
  check_ranges(*v);
}
