// The core pager (model/core_pager.h) on a real file: every streamed layer's views
// hold that layer's bytes whenever the layer loop has entered it (or peeked it),
// token after token, through the few layer buffers they share; a layer alone in
// its buffer is read once; a failed read is an error naming the layer and is read
// again when next entered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "format/model_file.h"
#include "model/core_pager.h"
#include "synth_once.h"

namespace deltafin {
namespace {

struct Mapped {
  const TensorRef* ref = nullptr;
  const void* view = nullptr;
};

// The non-expert tensors of each layer, mapped through the pager.
std::map<int, std::map<std::string, Mapped>> map_layers(ModelFile& file, CorePager& pager) {
  std::map<int, std::map<std::string, Mapped>> out;
  for (const auto& [name, ref] : file.tensors()) {
    if (name.rfind("blk.", 0) != 0 || name.find("_exps.") != std::string::npos) continue;
    auto v = pager.map(name, ref);
    EXPECT_TRUE(v.ok()) << name << ": " << v.error().message;
    if (!v.ok() || *v == nullptr) continue;
    out[std::stoi(name.substr(4))][name] = {&ref, *v};
  }
  return out;
}

// Whether every view of `layer` holds the file's bytes.
bool layer_holds(ModelFile& file, const std::map<std::string, Mapped>& tensors) {
  for (const auto& [name, m] : tensors) {
    std::vector<char> want(m.ref->info->bytes);
    if (!file.read_tensor(*m.ref, want.data()).ok()) return false;
    if (std::memcmp(want.data(), m.view, want.size()) != 0) return false;
  }
  return true;
}

std::string model(std::string* why) {
  SynthSpec spec;
  if (!synth_preset("tiny", "qwen3moe", &spec)) return "";
  spec.n_layer = 7;
  return synth_once("core_pager", "tiny-7l", spec, why);
}

TEST(CorePager, EveryEnteredLayerHoldsItsBytesTokenAfterToken) {
  std::string why;
  const std::string path = model(&why);
  ASSERT_FALSE(path.empty()) << why;
  auto file = ModelFile::open(path, local_file_opener());
  ASSERT_TRUE(file.ok()) << file.error().message;
  // The least budget: every layer streams, through window + 1 = 3 buffers.
  auto pager = CorePager::plan(**file, CorePager::least_bytes(**file));
  ASSERT_TRUE(pager.ok()) << pager.error().message;
  CorePager& p = **pager;
  ASSERT_EQ(p.stats().streamed_layers, 7);
  ASSERT_TRUE(p.start().ok());
  auto layers = map_layers(**file, p);
  ASSERT_EQ(layers.size(), 7u);
  // Seven layers in three buffers: 0,3,6 share one, 1,4 and 2,5 the others, so the
  // buffers cannot all hold the right layer at once.
  ASSERT_TRUE(p.enter(0).ok());
  EXPECT_FALSE(layer_holds(**file, layers[3]));
  for (int token = 0; token < 3; ++token) {
    for (int l = 0; l < 7; ++l) {
      ASSERT_TRUE(p.enter(l).ok());
      EXPECT_TRUE(layer_holds(**file, layers[l])) << "token " << token << " layer " << l;
      if (l + 1 < 7) {
        ASSERT_TRUE(p.peek(l + 1).ok());  // the next router, while l runs
        EXPECT_TRUE(layer_holds(**file, layers[l + 1])) << "peeked layer " << l + 1;
        EXPECT_TRUE(layer_holds(**file, layers[l])) << "layer " << l << " kept while it runs";
      }
    }
  }
  EXPECT_GE(p.stats().pages_in, 3u * 7u - 1) << "every layer shares its buffer: read each token";
  // A layer's buffer-mate cannot be peeked while it runs.
  ASSERT_TRUE(p.enter(0).ok());
  EXPECT_FALSE(p.peek(3).ok());
}

TEST(CorePager, ALayerAloneInItsBufferIsReadOnce) {
  std::string why;
  const std::string path = model(&why);
  ASSERT_FALSE(path.empty()) << why;
  auto file = ModelFile::open(path, local_file_opener());
  ASSERT_TRUE(file.ok()) << file.error().message;
  // Room for three layers beyond the least: layers 0-2 resident, 3-6 stream (3 and
  // 6 share a buffer; 4 and 5 are alone in theirs).
  auto all = CorePager::plan(**file, UINT64_MAX);
  auto none = CorePager::plan(**file, CorePager::least_bytes(**file));
  ASSERT_TRUE(all.ok() && none.ok());
  const uint64_t layer = ((*all)->stats().resident_bytes - (*none)->stats().resident_bytes) / 7;
  auto pager = CorePager::plan(**file, CorePager::least_bytes(**file) + 3 * layer);
  ASSERT_TRUE(pager.ok()) << pager.error().message;
  CorePager& p = **pager;
  const int first = 7 - p.stats().streamed_layers;
  ASSERT_GE(first, 1);
  ASSERT_LE(p.stats().streamed_layers, 5);
  ASSERT_TRUE(p.start().ok());
  auto layers = map_layers(**file, p);
  EXPECT_EQ(layers.count(first - 1), 0u) << "resident layers are not mapped";
  const int streamed = p.stats().streamed_layers;
  for (int token = 0; token < 4; ++token)
    for (int l = 0; l < 7; ++l) {
      ASSERT_TRUE(p.enter(l).ok());
      if (l >= first) {
        EXPECT_TRUE(layer_holds(**file, layers[l])) << "token " << token << " layer " << l;
      }
    }
  // Layers that share a buffer are read every token; a layer alone once.
  const int shared = streamed > 3 ? 2 * (streamed - 3) : 0;
  const int alone = streamed - shared;
  EXPECT_EQ(p.stats().pages_in, uint64_t(alone + 4 * shared)) << streamed << " streamed layers";
  EXPECT_EQ(p.stats().reread_bytes > 0, shared > 0);
}

// Core bytes of each layer (its non-expert tensors) and outside the layers.
std::vector<uint64_t> layer_bytes(ModelFile& file, uint64_t* other) {
  std::vector<uint64_t> out;
  *other = 0;
  for (const auto& [name, ref] : file.tensors()) {
    if (name.find("_exps.") != std::string::npos) continue;
    if (name.rfind("blk.", 0) != 0) {
      *other += ref.info->bytes;
      continue;
    }
    const size_t l = size_t(std::stoi(name.substr(4)));
    if (l >= out.size()) out.resize(l + 1, 0);
    out[l] += ref.info->bytes;
  }
  return out;
}

TEST(CorePager, ALargeFirstLayerStaysResidentInsteadOfSizingTheBuffers) {
  // A dense first layer several times the others' size (DeepSeek's and Kimi's).
  SynthSpec spec;
  ASSERT_TRUE(synth_preset("tiny", "deepseek2", &spec));
  spec.n_layer = 6;
  spec.n_ff *= 16;
  std::string why;
  const std::string path = synth_once("core_pager", "dense-first-6l", spec, &why);
  ASSERT_FALSE(path.empty()) << why;
  auto file = ModelFile::open(path, local_file_opener());
  ASSERT_TRUE(file.ok()) << file.error().message;
  uint64_t other = 0;
  const std::vector<uint64_t> L = layer_bytes(**file, &other);
  ASSERT_EQ(L.size(), 6u);
  const uint64_t rest = *std::max_element(L.begin() + 1, L.end());
  ASSERT_GT(L[0], 3 * rest) << "the dense layer is the large one";
  // Room for layer 0 and three buffers of the others (with their alignment), not
  // for layer 1 as well: layer 0 resident, 1-5 stream. Buffers sized by layer 0
  // would leave no room for it.
  const uint64_t slack = 64 * 4096;
  auto pager = CorePager::plan(**file, other + L[0] + 3 * rest + slack);
  ASSERT_TRUE(pager.ok()) << pager.error().message;
  CorePager& p = **pager;
  EXPECT_EQ(p.stats().streamed_layers, 5);
  EXPECT_LT(p.stats().window_bytes, L[0]) << "buffers for the streamed layers only";
  ASSERT_TRUE(p.start().ok());
  auto layers = map_layers(**file, p);
  EXPECT_EQ(layers.count(0), 0u) << "layer 0 resident";
  for (int token = 0; token < 2; ++token)
    for (int l = 0; l < 6; ++l) {
      ASSERT_TRUE(p.enter(l).ok());
      if (l > 0) EXPECT_TRUE(layer_holds(**file, layers[l])) << "token " << token << " layer " << l;
    }
}

TEST(CorePager, AFailedReadNamesTheLayerAndIsReadAgain) {
  std::string why;
  const std::string src = model(&why);
  ASSERT_FALSE(src.empty()) << why;
  const std::string path = test_dir("core_pager") + "/cut.gguf";
  std::filesystem::copy_file(src, path, std::filesystem::copy_options::overwrite_existing);
  auto file = ModelFile::open(path, local_file_opener());
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto pager = CorePager::plan(**file, CorePager::least_bytes(**file));
  ASSERT_TRUE(pager.ok()) << pager.error().message;
  CorePager& p = **pager;
  ASSERT_TRUE(p.start().ok());
  auto layers = map_layers(**file, p);
  // Cut the file inside layer 6's first tensor: its read fails, the others work.
  uint64_t at = UINT64_MAX;
  for (const auto& [name, m] : layers[6]) at = std::min(at, m.ref->file_offset);
  const uintmax_t size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, at + 16);
  for (int l = 0; l < 6; ++l) ASSERT_TRUE(p.enter(l).ok()) << l;
  Status s = p.enter(6);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("core layer 6"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("cut.gguf"), std::string::npos) << s.error().message;
  // The file whole again (the same file: the pager keeps it open): the next entry
  // reads it.
  std::filesystem::resize_file(path, size);
  {
    std::ifstream in(src, std::ios::binary);
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    std::vector<char> tail(size - at);
    in.seekg(std::streamoff(at));
    in.read(tail.data(), std::streamsize(tail.size()));
    out.seekp(std::streamoff(at));
    out.write(tail.data(), std::streamsize(tail.size()));
    ASSERT_TRUE(in && out);
  }
  ASSERT_TRUE(p.enter(6).ok());
  EXPECT_TRUE(layer_holds(**file, layers[6]));
}

}  // namespace
}  // namespace deltafin
