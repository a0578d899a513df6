// The tensor hook (Model::set_tensor_hook, `deltafin eval --dump`): on every
// architecture it fires for every layer and every row with the widths the names
// promise, setting it changes no logit, and (qwen3moe) the last layer's l_out is the
// stream the output head reads: output(rms(l_out)) gives the logits.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "arch_names.h"
#include "tiny_engine.h"

namespace deltafin {
namespace {

struct Seen {
  int64_t n = 0;
  std::set<int> pos;
  int calls = 0;
};

class TensorHookTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TensorHookTest, FiresForEveryLayerAndChangesNoLogit) {
  std::unique_ptr<Engine> e;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(2, &e, &tok, GetParam()));
  Model& m = e->model();
  const ModelInfo& info = m.info();
  const std::vector<int32_t> ids = {1, 17, 33, 250, 9};
  const int n = int(ids.size());
  const size_t V = size_t(info.n_vocab);

  std::vector<float> plain(size_t(n) * V), hooked(plain.size());
  ASSERT_TRUE(m.forward(*m.new_state(16), ids.data(), n, plain.data(), true).ok());

  std::map<std::pair<std::string, int>, Seen> seen;
  std::vector<float> last_l_out;
  m.set_tensor_hook([&](std::string_view name, int layer, int pos, const float* v, int64_t nv) {
    Seen& s = seen[{std::string(name), layer}];
    s.n = nv;
    s.pos.insert(pos);
    ++s.calls;
    for (int64_t i = 0; i < nv; ++i) ASSERT_TRUE(std::isfinite(v[i])) << name << "@" << layer;
    if (name == "l_out" && layer == info.n_layer - 1 && pos == n - 1) last_l_out.assign(v, v + nv);
  });
  ASSERT_TRUE(m.forward(*m.new_state(16), ids.data(), n, hooked.data(), true).ok());
  m.set_tensor_hook({});
  EXPECT_EQ(plain, hooked);  // bit for bit

  const std::set<int> all_pos = {0, 1, 2, 3, 4};
  for (int il = 0; il < info.n_layer; ++il) {
    for (const char* name : {"attn_norm", "attn_out", "ffn_inp", "ffn_norm", "l_out"}) {
      SCOPED_TRACE(std::string(name) + "@" + std::to_string(il));
      auto it = seen.find({name, il});
      ASSERT_NE(it, seen.end());
      EXPECT_EQ(it->second.n, info.n_embd);
      EXPECT_EQ(it->second.calls, n);
      EXPECT_EQ(it->second.pos, all_pos);
    }
  }
  // Every MoE layer shows its router logits, one per expert.
  int moe_layers = 0;
  for (int il = 0; il < info.n_layer; ++il) {
    auto it = seen.find({"ffn_moe_logits", il});
    if (it == seen.end()) continue;
    ++moe_layers;
    EXPECT_EQ(it->second.n, info.n_expert) << il;
    EXPECT_EQ(it->second.calls, n) << il;
    EXPECT_NE(seen.find({"ffn_moe_out", il}), seen.end()) << il;
  }
  EXPECT_GE(moe_layers, 1);
  for (const auto& [key, s] : seen) EXPECT_LT(key.second, info.n_layer) << key.first;

  if (std::string(GetParam()) == "qwen3moe") {
    // logits = output(rms(l_out) * output_norm): the dumped values are the pass's own.
    ModelFile& f = e->file();
    auto read = [&](const char* name) {
      const TensorRef* r = f.tensor(name);
      EXPECT_TRUE(r != nullptr && r->info->type == DType::F32) << name;
      std::vector<float> v(r ? r->info->bytes / 4 : 0);
      if (r) {
        EXPECT_TRUE(f.read_tensor(*r, v.data()).ok());
      }
      return v;
    };
    const std::vector<float> norm = read("output_norm.weight");
    std::vector<float> out = read("output.weight");
    ASSERT_EQ(last_l_out.size(), size_t(info.n_embd));
    const int64_t E = info.n_embd;
    double ss = 0;
    for (float v : last_l_out) ss += double(v) * v;
    const double scale = 1.0 / std::sqrt(ss / double(E) + 1e-6);
    double max_err = 0, max_ref = 0;
    for (size_t tkn = 0; tkn < V; ++tkn) {
      double l = 0;
      for (int64_t c = 0; c < E; ++c) l += double(out[tkn * size_t(E) + size_t(c)]) * last_l_out[size_t(c)] * scale * norm[size_t(c)];
      max_err = std::max(max_err, std::abs(l - double(plain[size_t(n - 1) * V + tkn])));
      max_ref = std::max(max_ref, std::abs(l));
    }
    EXPECT_LT(max_err, 1e-3 * max_ref + 1e-5) << "max |head(l_out) - logits| " << max_err;
  }
}

INSTANTIATE_TEST_SUITE_P(Arch, TensorHookTest, ::testing::ValuesIn(arch_names()), [](const auto& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
});

}  // namespace
}  // namespace deltafin
