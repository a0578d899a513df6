// deltafin quantize: which tensors change type, how close the values stay, and the
// refusals. The input is a tiny synthetic F32 qwen3moe whose experts are 128 wide,
// so their down matrices (rows of 128) cannot take Q4_K's 256-element blocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/model_file.h"
#include "kernels/types.h"
#include "quant/dynamic_mix.h"
#include "quant/quantize_model.h"
#include "synth/synth.h"

using namespace deltafin;

namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "deltafin_test_quantize_" + std::to_string(::getpid()) + "_" + name;
}

const std::string& f32_model() {
  static const std::string path = [] {
    SynthSpec s;
    EXPECT_TRUE(synth_preset("tiny", "qwen3moe", &s));
    s.n_ff_exp = 128;
    std::string p = tmp_path("f32.gguf");
    ThreadPool pool(1);
    SynthReport r;
    Status st = synth_model(s, p, pool, &r);
    EXPECT_TRUE(st.ok()) << st.error().message;
    return p;
  }();
  return path;
}

std::vector<float> floats(ModelFile& m, const std::string& name) {
  const TensorRef* r = m.tensor(name);
  EXPECT_NE(r, nullptr) << name;
  std::vector<uint8_t> raw(size_t(r->info->bytes));
  EXPECT_TRUE(m.read_tensor(*r, raw.data()).ok());
  std::vector<float> out(size_t(r->info->n_elements()));
  type_traits_ref(r->info->type)->to_float(raw.data(), out.data(), int64_t(out.size()));
  return out;
}

// RMS of (b - a) over RMS of a.
double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += double(b[i] - a[i]) * (b[i] - a[i]);
    den += double(a[i]) * a[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST(Quantize, TypesPerTensorAndValuesStayClose) {
  const std::string out = tmp_path("q4k.gguf");
  QuantizeOptions o;
  o.type = DType::Q4_K;
  o.fallback = DType::Q8_0;
  QuantizeReport rep;
  Status st = quantize_model(f32_model(), out, o, &rep);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_LT(rep.bytes_out, rep.bytes_in / 4);
  EXPECT_GT(rep.converted, 0);
  EXPECT_GT(rep.fell_back, 0);

  auto in = ModelFile::open(f32_model(), local_file_opener());
  auto q = ModelFile::open(out, local_file_opener());
  ASSERT_TRUE(in.ok() && q.ok());
  EXPECT_EQ((*q)->meta().int_or("general.file_type", -1), 14);
  EXPECT_EQ((*q)->meta().string_or("general.architecture", ""), "qwen3moe");
  ASSERT_NE((*q)->meta().find("tokenizer.ggml.tokens"), nullptr);
  for (const auto& [name, ref] : (*in)->tensors()) {
    const GGUFTensorInfo& a = *ref.info;
    const GGUFTensorInfo& b = *(*q)->tensor(name)->info;
    for (int d = 0; d < kMaxDims; ++d) EXPECT_EQ(a.ne[d], b.ne[d]) << name;
    DType want = a.n_dims < 2 || name.find("ffn_gate_inp") != std::string::npos ? DType::F32
                 : a.ne[0] % 256 == 0                                           ? DType::Q4_K
                                                                                : DType::Q8_0;
    EXPECT_EQ(b.type, want) << name;
    const double err = rel_rms(floats(**in, name), floats(**q, name));
    // Round to nearest: Q8_0 keeps ~8 bits (< 1%), Q4_K ~4.5 bits (< 12% on Gaussian rows).
    const double tol = want == DType::F32 ? 0.0 : want == DType::Q8_0 ? 0.01 : 0.12;
    EXPECT_LE(err, tol) << name << " as " << dtype_name(want);
  }
  std::remove(out.c_str());
}

TEST(Quantize, Refusals) {
  QuantizeOptions o;
  Status same = quantize_model(f32_model(), f32_model(), o);
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.error().message.find("is the input"), std::string::npos);

  o.type = DType::F64;  // known by name, no quantizer
  Status no_q = quantize_model(f32_model(), tmp_path("x.gguf"), o);
  ASSERT_FALSE(no_q.ok());
  EXPECT_NE(no_q.error().message.find("F64"), std::string::npos);

  Status missing = quantize_model(tmp_path("does-not-exist.gguf"), tmp_path("y.gguf"), QuantizeOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("does-not-exist"), std::string::npos);
}

TEST(Quantize, LlamaQuantizeNames) {
  QuantizeOptions o;
  ASSERT_TRUE(parse_quantize_target("q4_k_m", &o).ok());
  EXPECT_EQ(o.type, DType::Q4_K);
  EXPECT_EQ(o.mix, "Q4_K_M");
  ASSERT_TRUE(parse_quantize_target("Q6_K", &o).ok());  // a type: every matrix, no mix
  EXPECT_EQ(o.type, DType::Q6_K);
  EXPECT_TRUE(o.mix.empty());
  Status unknown = parse_quantize_target("Q4_K_XL", &o);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("Q4_K_M"), std::string::npos);  // the valid names listed
  EXPECT_NE(unknown.error().message.find("Q8_0"), std::string::npos);
  Status iq = parse_quantize_target("F64", &o);
  ASSERT_FALSE(iq.ok());
  EXPECT_NE(iq.error().message.find("cannot compute with F64"), std::string::npos) << iq.error().message;
  ASSERT_TRUE(parse_quantize_target("iq2_xxs", &o).ok());  // an i-quant with a quantizer
  EXPECT_EQ(o.type, DType::IQ2_XXS);
  ASSERT_TRUE(parse_quantize_target("Q5_0", &o).ok());  // the legacy 32-value types quantize too
  EXPECT_EQ(o.type, DType::Q5_0);
  EXPECT_FALSE(parse_quantize_target("Q8_1", &o).ok());  // an activation type, never a weight's
}

// Q4_K_M as llama.cpp picks it: output Q6_K, attn_v and ffn_down Q6_K in the layers
// use_more_bits favours (of 2 layers: the last), the rest Q4_K; rows of 128 (the
// experts' down matrices) do not fit 256-blocks and fall back.
TEST(Quantize, Q4KMMixesTypesAsLlamaCpp) {
  const std::string out = tmp_path("q4km.gguf");
  QuantizeOptions o;
  ASSERT_TRUE(parse_quantize_target("Q4_K_M", &o).ok());
  QuantizeReport rep;
  Status st = quantize_model(f32_model(), out, o, &rep);
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto q = ModelFile::open(out, local_file_opener());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->meta().int_or("general.file_type", -1), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  auto type_of = [&](const std::string& n) {
    const TensorRef* r = (*q)->tensor(n);
    return r ? r->info->type : DType::I8;
  };
  if ((*q)->tensor("output.weight")) {
    EXPECT_EQ(type_of("output.weight"), DType::Q6_K);
  }
  EXPECT_EQ(type_of("blk.0.attn_v.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.1.attn_v.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.1.ffn_down_exps.weight"), DType::Q8_0);  // 128-wide rows: the fallback
  EXPECT_EQ(type_of("blk.0.ffn_gate_exps.weight"), DType::Q4_K);
  EXPECT_GT(rep.types["Q6_K"], 0);
  EXPECT_GT(rep.types["Q4_K"], 0);
  EXPECT_GT(rep.fell_back, 0);
  std::remove(out.c_str());
}

// The dynamic-quant mixes (quant/dynamic_mix.h): experts in the low-bit type with the
// down projections a step higher, the core at 4-6 bits, the router untouched; the
// 128-wide expert rows take llama.cpp's fallback for 256-value blocks (IQ4_NL).
TEST(Quantize, DynamicMixTypesPerTensor) {
  const std::string out = tmp_path("iq1s_dyn.gguf");
  QuantizeOptions o;
  ASSERT_TRUE(parse_quantize_target("iq1_s_dyn", &o).ok());
  EXPECT_EQ(o.mix, "IQ1_S_DYN");
  QuantizeReport rep;
  Status st = quantize_model(f32_model(), out, o, &rep);
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto q = ModelFile::open(out, local_file_opener());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->meta().int_or("general.file_type", -1), 24);  // LLAMA_FTYPE_MOSTLY_IQ1_S
  auto type_of = [&](const std::string& n) {
    const TensorRef* r = (*q)->tensor(n);
    return r ? r->info->type : DType::I8;
  };
  EXPECT_EQ(type_of("blk.0.ffn_gate_exps.weight"), DType::IQ1_S);
  EXPECT_EQ(type_of("blk.0.ffn_up_exps.weight"), DType::IQ1_S);
  EXPECT_EQ(type_of("blk.0.ffn_down_exps.weight"), DType::IQ4_NL);  // 128-wide rows
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.0.ffn_gate_inp.weight"), DType::F32);
  if ((*q)->tensor("output.weight")) {
    EXPECT_EQ(type_of("output.weight"), DType::Q6_K);
  }
  EXPECT_GT(rep.fell_back, 0);
  // Still the same model, roughly: IQ1_S keeps about a third of a random matrix.
  auto in = ModelFile::open(f32_model(), local_file_opener());
  ASSERT_TRUE(in.ok());
  EXPECT_LT(rel_rms(floats(**in, "blk.0.ffn_gate_exps.weight"), floats(**q, "blk.0.ffn_gate_exps.weight")), 0.8);
  EXPECT_LT(rel_rms(floats(**in, "blk.0.attn_q.weight"), floats(**q, "blk.0.attn_q.weight")), 0.1);
  std::remove(out.c_str());
}

TEST(Quantize, DynamicMixFallbacksAreLlamaCpps) {
  EXPECT_EQ(dynamic_mix_fit(DType::IQ1_S, 512), DType::IQ1_S);
  EXPECT_EQ(dynamic_mix_fit(DType::IQ2_XXS, 128), DType::IQ4_NL);
  EXPECT_EQ(dynamic_mix_fit(DType::Q2_K, 96), DType::IQ4_NL);
  EXPECT_EQ(dynamic_mix_fit(DType::Q4_K, 128), DType::Q5_0);
  EXPECT_EQ(dynamic_mix_fit(DType::Q5_K, 128), DType::Q5_1);
  EXPECT_EQ(dynamic_mix_fit(DType::Q6_K, 128), DType::Q8_0);
  EXPECT_EQ(dynamic_mix_fit(DType::Q6_K, 100), DType::F32);
  EXPECT_EQ(dynamic_mix_type("Q2_K_DYN", "blk.3.ffn_down_exps.weight"), DType::Q3_K);
  EXPECT_EQ(dynamic_mix_type("IQ2_XXS_DYN", "blk.3.ffn_up_exps.weight"), DType::IQ2_XXS);
  EXPECT_EQ(dynamic_mix_type("IQ2_XXS_DYN", "blk.0.ffn_down.weight"), DType::Q8_0);  // a dense layer
  EXPECT_EQ(dynamic_mix_type("IQ2_XXS_DYN", "blk.3.ffn_down_shexp.weight"), DType::Q5_K);
  EXPECT_FALSE(is_dynamic_mix("IQ1_S"));
}

// synth --mix on a DeepSeek-shaped model: a dense first layer, shared experts, MLA.
TEST(Quantize, SynthWritesADynamicMix) {
  SynthSpec s;
  ASSERT_TRUE(synth_preset("tiny", "deepseek2", &s));
  s.mix = "IQ1_S_DYN";
  s.n_ff_exp = 256;
  const std::string p = tmp_path("synth_dyn.gguf");
  ThreadPool pool(1);
  SynthReport r;
  Status st = synth_model(s, p, pool, &r);
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto m = ModelFile::open(p, local_file_opener());
  ASSERT_TRUE(m.ok());
  auto type_of = [&](const std::string& n) {
    const TensorRef* t = (*m)->tensor(n);
    return t ? t->info->type : DType::I8;
  };
  EXPECT_EQ(type_of("blk.0.ffn_gate.weight"), DType::Q8_0);
  EXPECT_EQ(type_of("blk.1.ffn_gate_exps.weight"), DType::IQ1_S);
  EXPECT_EQ(type_of("blk.1.ffn_down_exps.weight"), DType::IQ2_XXS);
  EXPECT_EQ(type_of("blk.1.ffn_up_shexp.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.1.ffn_gate_inp.weight"), DType::F32);
  EXPECT_EQ(type_of("blk.1.attn_norm.weight"), DType::F32);
  std::remove(p.c_str());
}
