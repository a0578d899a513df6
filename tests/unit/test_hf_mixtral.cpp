// A mixtral folder (format/hf_arch_mixtral.cpp) seen as a GGUF: the llama layout
// llama.cpp's converter writes, q_proj/k_proj rows permuted from Hugging Face's
// rotate-half RoPE layout to adjacent pairs (checked here against the converter's
// reshape(heads, 2, d/2, n) / swapaxes(1, 2) written out as loops, for Q with the
// query heads and K with the key-value heads), the export undoing it (synth's GGUF
// comes back), any byte range reading what the whole file reads, and the config
// settings the GGUF cannot say refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "format/hf_export.h"
#include "format/hf_folder.h"
#include "format/hf_gguf_source.h"
#include "format/model_file.h"
#include "synth/synth.h"
#include "synth_once.h"
#include "tokenizer/tokenizer.h"

using namespace deltafin;

namespace {

std::string tiny_mixtral() {
  SynthSpec s;
  EXPECT_TRUE(synth_preset("tiny", "llama", &s));
  s.type = s.expert_type = DType::BF16;
  s.rope_freqs = false;
  s.seed = 4;
  std::string why;
  std::string p = synth_once("hf_mixtral", "tiny", s, &why);
  EXPECT_FALSE(p.empty()) << why;
  return p;
}

struct Opened {
  std::shared_ptr<HfFolder> folder;
  std::unique_ptr<HfGgufSource> view;
};

Opened open_view() {
  const std::string dir = test_dir("hf_mixtral") + "/folder";
  std::filesystem::remove_all(dir);
  HfExportOptions o;
  o.shards = 4;
  Status st = export_gguf_as_hf(tiny_mixtral(), dir, o);
  EXPECT_TRUE(st.ok()) << st.error().message;
  auto folder = open_hf_folder(dir, hf_local_opener(dir));
  EXPECT_TRUE(folder.ok()) << folder.error().message;
  if (!folder.ok()) return {};
  auto v = HfGgufSource::build(*folder);
  EXPECT_TRUE(v.ok()) << v.error().message;
  return {*folder, v.ok() ? std::move(*v) : nullptr};
}

const GGUFTensorInfo* find(const GGUFFile& m, const std::string& n) {
  for (const auto& t : m.tensors)
    if (t.name == n) return &t;
  return nullptr;
}

std::string view_tensor(HfGgufSource& v, const std::string& name) {
  const GGUFTensorInfo* t = find(v.meta(), name);
  EXPECT_TRUE(t) << name;
  if (!t) return {};
  std::string b(size_t(t->bytes), '\0');
  EXPECT_TRUE(v.read_at(v.meta().data_offset + t->offset, b.data(), b.size()).ok());
  return b;
}

std::string folder_tensor(const HfFolder& f, const std::string& name) {
  auto it = f.tensors.find(name);
  EXPECT_TRUE(it != f.tensors.end()) << name;
  if (it == f.tensors.end()) return {};
  std::string b(size_t(it->second.bytes), '\0');
  EXPECT_TRUE(f.shards[size_t(it->second.shard)]->read_at(it->second.offset, b.data(), b.size()).ok());
  return b;
}

std::string gguf_tensor(const std::string& path, const std::string& name) {
  auto mf = ModelFile::open(path, local_file_opener());
  EXPECT_TRUE(mf.ok());
  const TensorRef* t = mf.ok() ? (*mf)->tensor(name) : nullptr;
  EXPECT_TRUE(t) << name;
  if (!t) return {};
  std::string b(size_t(t->info->bytes), '\0');
  EXPECT_TRUE((*mf)->read_tensor(*t, b.data()).ok());
  return b;
}

// The converter's permute(w, heads): w.reshape(heads, 2, d/2, n).swapaxes(1, 2), as
// loops over the source: HF row (h, half, i) lands on GGUF row (h, i, half).
std::string converter_permute(const std::string& hf, int64_t heads, int64_t rows) {
  const size_t row = hf.size() / size_t(rows);
  const int64_t d = rows / heads;
  std::string out(hf.size(), '\0');
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t i = 0; i < d / 2; ++i) {
        const int64_t src = h * d + half * (d / 2) + i, dst = h * d + i * 2 + half;
        std::memcpy(&out[size_t(dst) * row], &hf[size_t(src) * row], row);
      }
  return out;
}

}  // namespace

TEST(HfMixtral, FolderIsTheLlamaLayout) {
  Opened o = open_view();
  ASSERT_TRUE(o.view);
  const GGUFFile& m = o.view->meta();
  EXPECT_EQ(m.string_or("general.architecture", ""), "llama");
  EXPECT_EQ(o.folder->model_type, "mixtral");
  EXPECT_EQ(m.int_or("llama.expert_count", 0), 8);
  EXPECT_EQ(m.int_or("llama.expert_used_count", 0), 2);
  EXPECT_EQ(m.int_or("llama.attention.head_count", 0), 4);
  EXPECT_EQ(m.int_or("llama.attention.head_count_kv", 0), 2);
  EXPECT_EQ(m.int_or("llama.rope.dimension_count", 0), 64);
  EXPECT_EQ(m.float_or("llama.rope.freq_base", 0), 1000000.0);
  EXPECT_EQ(find(m, "blk.0.attn_q.weight")->type, DType::BF16);
  EXPECT_EQ(find(m, "blk.1.ffn_gate_inp.weight")->type, DType::F32);  // the router, as the converter stores it
  EXPECT_EQ(find(m, "blk.1.ffn_down_exps.weight")->ne[2], 8);
  EXPECT_FALSE(find(m, "rope_freqs.weight"));
  EXPECT_TRUE(o.folder->tensors.count("model.layers.1.block_sparse_moe.experts.7.w3.weight"));

  // Any range reads what the whole file reads (the permuted heads included).
  HfGgufSource& v = *o.view;
  std::vector<char> all(size_t(v.size()));
  ASSERT_TRUE(v.read_at(0, all.data(), all.size()).ok());
  std::mt19937_64 rng(7);
  std::vector<char> part;
  for (int i = 0; i < 400; ++i) {
    const uint64_t off = rng() % v.size();
    const uint64_t n = std::min<uint64_t>(v.size() - off, 1 + rng() % (i % 4 == 0 ? 100000 : 700));
    part.resize(size_t(n));
    ASSERT_TRUE(v.read_at(off, part.data(), part.size()).ok());
    ASSERT_EQ(0, std::memcmp(part.data(), all.data() + off, part.size())) << "range " << off << "+" << n;
  }
}

TEST(HfMixtral, QueryAndKeyRowsArePermutedAsTheConverterDoes) {
  Opened o = open_view();
  ASSERT_TRUE(o.view);
  for (int L = 0; L < 2; ++L) {
    const std::string l = std::to_string(L);
    for (const auto& [gguf, hf, heads] : {std::tuple{"attn_q", "q_proj", 4}, std::tuple{"attn_k", "k_proj", 2}}) {
      const std::string gname = "blk." + l + "." + gguf + ".weight";
      const std::string hname = "model.layers." + l + ".self_attn." + hf + ".weight";
      const std::string folder = folder_tensor(*o.folder, hname), view = view_tensor(*o.view, gname);
      const int64_t rows = o.folder->tensors.at(hname).shape[0];
      ASSERT_EQ(rows, int64_t(heads) * 64) << hname;
      EXPECT_TRUE(view == converter_permute(folder, heads, rows)) << gname;
      EXPECT_FALSE(view == folder) << gname << ": the permutation is not the identity";
      // The export undid it: the view gives synth's tensor back.
      EXPECT_TRUE(view == gguf_tensor(tiny_mixtral(), gname)) << gname;
    }
  }
  // The row map the import and export share.
  for (int64_t r = 0; r < 16; ++r)
    EXPECT_EQ(hf_rope_source_row(r, 8), (r / 8) * 8 + (r % 2) * 4 + (r % 8) / 2) << r;
}

TEST(HfMixtral, SettingsTheGgufCannotSayAreRefused) {
  const nlohmann::json base = {{"num_hidden_layers", 2},       {"max_position_embeddings", 32768},
                               {"hidden_size", 256},           {"intermediate_size", 512},
                               {"num_attention_heads", 4},     {"num_key_value_heads", 2},
                               {"rope_theta", 1e6},            {"rms_norm_eps", 1e-5},
                               {"num_local_experts", 8},       {"num_experts_per_tok", 2},
                               {"vocab_size", 32000},          {"sliding_window", nullptr}};
  const HfArch& a = hf_arch_mixtral();
  GGUFFile m;
  ASSERT_TRUE(a.config_to_gguf(base, &m).ok());
  EXPECT_EQ(m.int_or("llama.rope.dimension_count", 0), 64);
  EXPECT_FALSE(m.find("llama.attention.key_length"));  // written only from a head_dim, as the converter does
  auto refused = [&](nlohmann::json c, const char* field) {
    GGUFFile g;
    Status st = a.config_to_gguf(c, &g);
    EXPECT_FALSE(st.ok()) << c.dump();
    if (!st.ok()) {
      EXPECT_NE(st.error().message.find(field), std::string::npos) << st.error().message;
    }
  };
  nlohmann::json c = base;
  c["sliding_window"] = 4096;
  refused(c, "sliding_window");
  c = base;
  c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  refused(c, "rope_scaling");
  c = base;
  c["hidden_act"] = "gelu";
  refused(c, "hidden_act");
  c = base;
  c.erase("num_local_experts");
  refused(c, "num_local_experts");
  c = base;
  c["head_dim"] = 48;
  GGUFFile g;
  ASSERT_TRUE(a.config_to_gguf(c, &g).ok());
  EXPECT_EQ(g.int_or("llama.attention.key_length", 0), 48);
  EXPECT_EQ(g.int_or("llama.rope.dimension_count", 0), 48);
  c["sliding_window"] = 32768;  // a window as wide as the context is no window
  EXPECT_TRUE(a.config_to_gguf(c, &g).ok());
}

// generation_config.json may list several end tokens; each ends generation, in the
// folder and in its GGUF view written out again (the export keeps the list).
TEST(HfMixtral, EveryEosIdOfGenerationConfigEndsGeneration) {
  const std::string dir = test_dir("hf_mixtral") + "/eos_folder";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(export_gguf_as_hf(tiny_mixtral(), dir, HfExportOptions{}).ok());
  auto plain = open_hf_folder(dir, hf_local_opener(dir));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  auto plain_view = HfGgufSource::build(*plain);
  ASSERT_TRUE(plain_view.ok()) << plain_view.error().message;
  auto plain_tok = Tokenizer::from_gguf((*plain_view)->meta());
  ASSERT_TRUE(plain_tok.ok()) << plain_tok.error().message;
  const int32_t eos = plain_tok->eos(), other = 7;  // an ordinary token of the synthetic vocabulary
  ASSERT_GE(eos, 0);
  ASSERT_FALSE(plain_tok->is_eog(other));

  nlohmann::json gen;
  {
    std::ifstream in(dir + "/generation_config.json");
    gen = nlohmann::json::parse(in);
  }
  gen["eos_token_id"] = {eos, other};
  std::ofstream(dir + "/generation_config.json") << gen.dump();
  auto folder = open_hf_folder(dir, hf_local_opener(dir));
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  auto view = HfGgufSource::build(*folder);
  ASSERT_TRUE(view.ok()) << view.error().message;
  auto tok = Tokenizer::from_gguf((*view)->meta());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->eos(), eos);
  EXPECT_TRUE(tok->is_eog(eos));
  EXPECT_TRUE(tok->is_eog(other));

  // Written out as a folder again, the list survives.
  const std::string again = test_dir("hf_mixtral") + "/eos_again.gguf", dir2 = test_dir("hf_mixtral") + "/eos_folder2";
  std::filesystem::remove_all(dir2);
  {
    std::string bytes(size_t((*view)->size()), '\0');
    ASSERT_TRUE((*view)->read_at(0, bytes.data(), bytes.size()).ok());
    std::ofstream(again, std::ios::binary) << bytes;
  }
  ASSERT_TRUE(export_gguf_as_hf(again, dir2, HfExportOptions{}).ok());
  std::ifstream in2(dir2 + "/generation_config.json");
  EXPECT_EQ(nlohmann::json::parse(in2)["eos_token_id"], nlohmann::json({eos, other}));
}
