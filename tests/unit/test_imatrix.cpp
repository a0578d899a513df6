// llama.cpp importance matrices: the i-quants' weighted quantizers lower the
// importance-weighted error they are asked to lower; both file formats read back
// what a writer here put in them (the legacy .dat built byte by byte, the GGUF one
// with GGUFWriter), bad files give errors that name the file and entry, and
// quantize_model uses the entries it has and counts the tensors it lacks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/gguf_writer.h"
#include "format/model_file.h"
#include "kernels/importance.h"
#include "kernels/types.h"
#include "quant/imatrix.h"
#include "quant/quantize_model.h"
#include "synth/synth.h"
#include "kernel_test_util.h"

using namespace deltafin;

namespace {

const DType kImpTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ3_XXS, DType::IQ2_S,
                           DType::IQ3_S,   DType::IQ1_S,  DType::IQ1_M};

// Quantizes each row of `x` (rows of n) with or without its importance `imp` (one
// vector for every row) and returns the dequantized values.
std::vector<float> round_trip(DType t, const std::vector<float>& x, int64_t n, const std::vector<float>* imp) {
  const TypeTraits* tt = type_traits_ref(t);
  std::vector<uint8_t> q(dtype_row_bytes(t, uint64_t(n)));
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / size_t(n); ++r) {
    if (imp)
      from_float_imp(t)(x.data() + r * size_t(n), q.data(), n, imp->data());
    else
      tt->from_float(x.data() + r * size_t(n), q.data(), n);
    tt->to_float(q.data(), y.data() + r * size_t(n), n);
  }
  return y;
}

// sum_j imp_j (x_j - y_j)^2 over all rows.
double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& imp) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += double(imp[i % imp.size()]) * (x[i] - y[i]) * (x[i] - y[i]);
  return e;
}

double rel_rms(const std::vector<float>& y, const std::vector<float>& x) {
  double e2 = 0, x2 = 0;
  for (size_t i = 0; i < x.size(); ++i) e2 += double(y[i] - x[i]) * (y[i] - x[i]), x2 += double(x[i]) * x[i];
  return std::sqrt(e2 / x2);
}

}  // namespace

// ---- weighted quantization -----------------------------------------------------------

// Gaussian rows, a skewed importance (log-normal, sigma 1.5: a few loud columns, as
// in real imatrices): the error the importance weighs is clearly lower when the
// quantizer is told it. Measured ratios weighted / plain of sum_j imp_j (x_j - q_j)^2
// (32 rows of 512, printed): IQ2_XXS 0.63, IQ2_XS 0.59, IQ3_XXS 0.52, IQ2_S 0.69,
// IQ3_S 0.63, IQ1_S 0.74, IQ1_M 0.64; the bound 0.85 leaves a margin over each.
TEST(ImatrixQuant, WeightedErrorIsLower) {
  constexpr int64_t n = 512, rows = 32;
  const auto x = gaussian(size_t(n * rows), 3);
  std::vector<float> imp(n);
  {
    auto z = gaussian(size_t(n), 4);
    for (int64_t j = 0; j < n; ++j) imp[size_t(j)] = std::exp(1.5f * z[size_t(j)]);
  }
  for (DType t : kImpTypes) {
    ASSERT_NE(from_float_imp(t), nullptr) << dtype_name(t);
    const double plain = weighted_error(x, round_trip(t, x, n, nullptr), imp);
    const double weighted = weighted_error(x, round_trip(t, x, n, &imp), imp);
    std::printf("  %-8s importance-weighted error: weighted / plain = %.3f\n", std::string(dtype_name(t)).c_str(),
                weighted / plain);
    EXPECT_LT(weighted, 0.85 * plain) << dtype_name(t);
  }
  EXPECT_EQ(from_float_imp(DType::Q4_K), nullptr);
  EXPECT_EQ(from_float_imp(DType::TQ1_0), nullptr);
}

// All-ones importance: still a valid quantization, within the plain quantizer's
// round-trip bound (IqQuant.RoundTripError's), and not far from its error.
TEST(ImatrixQuant, OnesStayWithinThePlainBound) {
  const struct {
    DType t;
    double bound;
  } bounds[] = {{DType::IQ2_XXS, 0.36}, {DType::IQ2_XS, 0.32}, {DType::IQ3_XXS, 0.2}, {DType::IQ2_S, 0.27},
                {DType::IQ3_S, 0.15},   {DType::IQ1_S, 0.5},   {DType::IQ1_M, 0.46}};
  constexpr int64_t n = 256 * 32;
  const auto x = gaussian(size_t(n), 1);
  const std::vector<float> ones(size_t(n), 1.0f);
  for (const auto& b : bounds) {
    const auto y = round_trip(b.t, x, n, &ones);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << dtype_name(b.t);
    const double rel = rel_rms(y, x), plain = rel_rms(round_trip(b.t, x, n, nullptr), x);
    std::printf("  %-8s rel rms error, imp = 1: %.4f (plain %.4f, bound %.3f)\n", std::string(dtype_name(b.t)).c_str(),
                rel, plain, b.bound);
    EXPECT_LE(rel, b.bound) << dtype_name(b.t);
    EXPECT_LE(rel, 1.05 * plain) << dtype_name(b.t);
  }
}

// Zero importance on whole blocks and zero rows: nothing breaks.
TEST(ImatrixQuant, ZeroImportanceAndZeroRows) {
  constexpr int64_t n = 512;
  auto x = gaussian(size_t(n), 5);
  std::vector<float> imp(size_t(n), 1.0f);
  std::fill(imp.begin(), imp.begin() + 256, 0.0f);
  const std::vector<float> zero(size_t(n), 0.0f);
  for (DType t : kImpTypes) {
    for (float v : round_trip(t, x, n, &imp)) ASSERT_TRUE(std::isfinite(v)) << dtype_name(t);
    for (float v : round_trip(t, zero, n, &imp)) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

// ---- reading -------------------------------------------------------------------------

namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "deltafin_test_imatrix_" + std::to_string(::getpid()) + "_" + name;
}

struct DatEntry {
  std::string name;
  int32_t ncall;
  std::vector<float> values;  // as stored: mean x^2 times ncall
};

void put_i32(std::string* s, int32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only, as llama.cpp writes it
  s->append(b, 4);
}

// The legacy .dat layout (imatrix.h), with the optional trailer when `dataset` is set.
std::string dat_bytes(const std::vector<DatEntry>& entries, const std::string* dataset = nullptr) {
  std::string s;
  put_i32(&s, int32_t(entries.size()));
  for (const auto& e : entries) {
    put_i32(&s, int32_t(e.name.size()));
    s += e.name;
    put_i32(&s, e.ncall);
    put_i32(&s, int32_t(e.values.size()));
    s.append(reinterpret_cast<const char*>(e.values.data()), e.values.size() * 4);
  }
  if (dataset) {
    put_i32(&s, 42);  // chunks
    put_i32(&s, int32_t(dataset->size()));
    s += *dataset;
  }
  return s;
}

Result<Imatrix> parse_bytes(const std::string& bytes, const std::string& name = "test.dat") {
  auto src = memory_source(bytes, name);
  return parse_imatrix(*src);
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(i % 17 + 1);
  return v;
}

struct GgufEntry {
  std::string name;
  int64_t n_per_row;
  std::vector<float> sums, counts;  // sums: n_per_row x counts.size()
};

Status write_gguf_imatrix(const std::string& path, const std::vector<GgufEntry>& entries,
                          const std::string& type = "imatrix", bool with_counts = true) {
  GGUFWriter w(path);
  w.file().set("general.type", GGUFValue::str(type));
  w.file().set("imatrix.chunk_count", GGUFValue::u32(7));
  w.file().set("imatrix.datasets", GGUFValue::string_array({"calibration.txt"}));
  for (const auto& e : entries) {
    const auto n_mat = int64_t(e.counts.size());
    w.add_tensor(e.name + ".in_sum2", DType::F32, {e.n_per_row, n_mat});
    if (with_counts) w.add_tensor(e.name + ".counts", DType::F32, {1, n_mat});
  }
  DF_TRY(w.begin());
  for (const auto& e : entries) {
    DF_TRY(w.write_data(e.sums.data(), e.sums.size() * 4));
    if (with_counts) DF_TRY(w.write_data(e.counts.data(), e.counts.size() * 4));
  }
  return w.finish();
}

}  // namespace

TEST(Imatrix, ReadsLegacyDat) {
  const std::string ds = "wiki.train.raw";
  const auto dense = ramp(256, 4.0f), experts = ramp(2 * 128, 3.0f);
  auto m = parse_bytes(dat_bytes({{"blk.0.attn_q.weight", 4, dense},
                                   {"blk.0.ffn_up_exps.weight", 3, experts},
                                   {"blk.0.never_called.weight", 0, ramp(64, 1.0f)}},
                                  &ds));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(m->legacy);
  EXPECT_EQ(m->chunk_count, 42);
  ASSERT_EQ(m->datasets.size(), 1u);
  EXPECT_EQ(m->datasets[0], ds);
  ASSERT_EQ(m->entries.size(), 3u);
  // Stored values are mean x^2 times ncall; the importance is their mean again.
  const auto& q = m->entries.at("blk.0.attn_q.weight").values;
  for (size_t i = 0; i < q.size(); ++i) ASSERT_FLOAT_EQ(q[i], dense[i] / 4) << i;
  EXPECT_FLOAT_EQ(m->entries.at("blk.0.ffn_up_exps.weight").values[129], experts[129] / 3);
  EXPECT_FLOAT_EQ(m->entries.at("blk.0.never_called.weight").values[5], 6.0f);  // ncall 0: as stored
  // Sizes are checked against the tensor: 2-D rows of 256, and 2 experts of rows of 128.
  auto dq = m->for_tensor("blk.0.attn_q.weight", 256, 1);
  ASSERT_TRUE(dq.ok() && *dq != nullptr);
  auto ex = m->for_tensor("blk.0.ffn_up_exps.weight", 128, 2);
  ASSERT_TRUE(ex.ok() && *ex != nullptr);
  auto none = m->for_tensor("output.weight", 256, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  // Without the optional trailer the file reads the same.
  auto bare = parse_bytes(dat_bytes({{"blk.0.attn_q.weight", 4, dense}}));
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_EQ(bare->chunk_count, -1);
}

TEST(Imatrix, ReadsGguf) {
  const std::string path = tmp_path("im.gguf");
  // Expert 0 ran 4 times, expert 1 never: its importance is 1 everywhere.
  std::vector<float> sums = ramp(2 * 128, 4.0f);
  ASSERT_TRUE(write_gguf_imatrix(path, {{"blk.1.ffn_down_exps.weight", 128, sums, {4.0f, 0.0f}},
                                        {"blk.1.attn_k.weight", 64, ramp(64, 2.0f), {2.0f}}})
                  .ok());
  auto m = load_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FALSE(m->legacy);
  EXPECT_EQ(m->chunk_count, 7);
  ASSERT_EQ(m->datasets.size(), 1u);
  EXPECT_EQ(m->datasets[0], "calibration.txt");
  const ImatrixEntry& e = m->entries.at("blk.1.ffn_down_exps.weight");
  EXPECT_EQ(e.n_mat, 2);
  for (int j = 0; j < 128; ++j) {
    ASSERT_FLOAT_EQ(e.values[size_t(j)], sums[size_t(j)] / 4) << j;
    ASSERT_EQ(e.values[size_t(128 + j)], 1.0f) << j;
  }
  EXPECT_FLOAT_EQ(m->entries.at("blk.1.attn_k.weight").values[3], 4.0f);  // 2 * 4 / 2
  EXPECT_TRUE(m->for_tensor("blk.1.ffn_down_exps.weight", 128, 2).ok());
  // 256 values as 1 x 256 is not 2 experts of 128, though the count matches.
  auto flat = m->for_tensor("blk.1.ffn_down_exps.weight", 256, 1);
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.error().message.find("blk.1.ffn_down_exps.weight"), std::string::npos) << flat.error().message;
  std::remove(path.c_str());
}

TEST(Imatrix, BadFilesNameTheFileAndEntry) {
  const auto vals = ramp(256, 1.0f);
  const std::string good = dat_bytes({{"blk.0.attn_q.weight", 1, vals}, {"blk.0.attn_k.weight", 1, vals}});
  // Every truncation is an error (the trailer is optional, so the whole file is the
  // shortest valid one), and names the file.
  for (size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 97)) {
    auto m = parse_bytes(good.substr(0, n), "cut.dat");
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_NE(m.error().message.find("cut.dat"), std::string::npos) << m.error().message;
  }
  auto cut = parse_bytes(good.substr(0, good.size() - 10), "cut.dat");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("truncated"), std::string::npos) << cut.error().message;
  EXPECT_NE(cut.error().message.find("blk.0.attn_k.weight"), std::string::npos) << cut.error().message;

  for (float bad : {std::nanf(""), -1.0f, INFINITY}) {
    auto v = vals;
    v[100] = bad;
    auto m = parse_bytes(dat_bytes({{"blk.3.ffn_gate.weight", 1, v}}), "bad.dat");
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.error().message.find("bad.dat"), std::string::npos) << m.error().message;
    EXPECT_NE(m.error().message.find("blk.3.ffn_gate.weight"), std::string::npos) << m.error().message;
  }

  // Neither format: text, and a file too short for either.
  for (const std::string& junk : {std::string("This is not an imatrix, just some text.\n"), std::string("ab")}) {
    auto m = parse_bytes(junk, "junk.txt");
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message.find("junk.txt"), std::string::npos) << m.error().message;
    EXPECT_NE(m.error().message.find("not an importance matrix"), std::string::npos) << m.error().message;
  }

  // The size check against the model: rows of 256 given for rows of 512.
  auto m = parse_bytes(good, "other_model.dat");
  ASSERT_TRUE(m.ok());
  auto fit = m->for_tensor("blk.0.attn_k.weight", 512, 1);
  ASSERT_FALSE(fit.ok());
  EXPECT_NE(fit.error().message.find("other_model.dat"), std::string::npos) << fit.error().message;
  EXPECT_NE(fit.error().message.find("'blk.0.attn_k.weight' has 256 values"), std::string::npos)
      << fit.error().message;

  // A GGUF that is a model, not an imatrix; a GGUF imatrix without counts; a NaN sum.
  const std::string gpath = tmp_path("bad.gguf");
  ASSERT_TRUE(write_gguf_imatrix(gpath, {{"blk.0.attn_q.weight", 256, vals, {1}}}, "model").ok());
  auto model = load_imatrix(gpath);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("not an importance matrix"), std::string::npos) << model.error().message;
  ASSERT_TRUE(write_gguf_imatrix(gpath, {{"blk.0.attn_q.weight", 256, vals, {1}}}, "imatrix", false).ok());
  auto nocounts = load_imatrix(gpath);
  ASSERT_FALSE(nocounts.ok());
  EXPECT_NE(nocounts.error().message.find("blk.0.attn_q.weight.counts"), std::string::npos)
      << nocounts.error().message;
  auto nan = vals;
  nan[7] = std::nanf("");
  ASSERT_TRUE(write_gguf_imatrix(gpath, {{"blk.0.attn_q.weight", 256, nan, {1}}}).ok());
  auto gnan = load_imatrix(gpath);
  ASSERT_FALSE(gnan.ok());
  EXPECT_NE(gnan.error().message.find("blk.0.attn_q.weight"), std::string::npos) << gnan.error().message;
  // A truncated GGUF imatrix: the parser's error, with the file named.
  {
    std::ifstream in(gpath, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto t = parse_bytes(bytes.substr(0, bytes.size() - 100), "cut.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("cut.gguf"), std::string::npos) << t.error().message;
  }
  auto missing = load_imatrix(tmp_path("does_not_exist.dat"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("does_not_exist.dat"), std::string::npos) << missing.error().message;
  std::remove(gpath.c_str());
}

// ---- quantize_model --------------------------------------------------------------------

namespace {

const std::string& f32_model() {
  static const std::string path = [] {
    SynthSpec s;
    EXPECT_TRUE(synth_preset("tiny", "qwen3moe", &s));
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

}  // namespace

// An imatrix for every matrix but output.weight and token_embd.weight (llama-imatrix
// records neither by default), with a skewed importance per expert, plus an entry the
// model lacks: the matrices it covers weigh by it (their weighted error drops), the
// two others are counted as missing, the extra entry is ignored; an entry of the
// wrong size is an error naming it.
TEST(Quantize, ImatrixWeighsTheMatricesItCovers) {
  auto in = ModelFile::open(f32_model(), local_file_opener());
  ASSERT_TRUE(in.ok());
  std::vector<DatEntry> entries = {{"blk.99.not_in_model.weight", 1, std::vector<float>(64, 1.0f)}};
  std::map<std::string, std::vector<float>> imp;  // per tensor, all matrices
  int covered = 0, uncovered = 0;
  uint32_t seed = 10;
  for (const auto& [name, ref] : (*in)->tensors()) {
    const GGUFTensorInfo& t = *ref.info;
    if (t.n_dims < 2 || name.find("ffn_gate_inp") != std::string::npos) continue;
    if (name == "output.weight" || name == "token_embd.weight") {
      uncovered += t.ne[0] % 256 == 0;
      continue;
    }
    auto z = gaussian(size_t(t.ne[0] * t.ne[2]), seed++);
    std::vector<float> v(z.size());
    for (size_t j = 0; j < v.size(); ++j) v[j] = std::exp(1.5f * z[j]);
    imp[name] = v;
    entries.push_back({name, 1, v});
    covered += t.ne[0] % 256 == 0;  // the rest fall back to Q8_0, unweighted
  }
  const std::string dat = tmp_path("model.dat");
  {
    std::ofstream f(dat, std::ios::binary);
    f << dat_bytes(entries);
  }
  auto m = load_imatrix(dat);
  ASSERT_TRUE(m.ok()) << m.error().message;

  QuantizeOptions o;
  o.type = DType::IQ2_XXS;
  QuantizeReport plain_rep, rep;
  const std::string plain_out = tmp_path("plain.gguf"), out = tmp_path("imatrix.gguf");
  ASSERT_TRUE(quantize_model(f32_model(), plain_out, o, &plain_rep).ok());
  EXPECT_EQ(plain_rep.imatrix_used + plain_rep.imatrix_missing, 0);
  o.imatrix = &*m;
  Status st = quantize_model(f32_model(), out, o, &rep);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(rep.imatrix_used, covered);
  EXPECT_EQ(rep.imatrix_missing, uncovered);
  EXPECT_GT(covered, 0);
  EXPECT_GT(uncovered, 0);

  auto p = ModelFile::open(plain_out, local_file_opener());
  auto q = ModelFile::open(out, local_file_opener());
  ASSERT_TRUE(p.ok() && q.ok());
  double e_plain = 0, e_imp = 0;
  for (const auto& [name, v] : imp) {
    if ((*q)->tensor(name)->info->type != DType::IQ2_XXS) continue;
    const auto x = floats(**in, name), yp = floats(**p, name), yq = floats(**q, name);
    const int64_t cols = (*in)->tensor(name)->info->ne[0], per_mat = cols * (*in)->tensor(name)->info->ne[1];
    for (size_t i = 0; i < x.size(); ++i) {
      const double w = v[size_t((int64_t(i) / per_mat) * cols + int64_t(i) % cols)];
      e_plain += w * (x[i] - yp[i]) * (x[i] - yp[i]);
      e_imp += w * (x[i] - yq[i]) * (x[i] - yq[i]);
    }
  }
  std::printf("  tiny qwen3moe as IQ2_XXS: importance-weighted error with / without the imatrix = %.3f\n",
              e_imp / e_plain);
  EXPECT_LT(e_imp, 0.8 * e_plain);

  // Rows of another model: the entry's size does not fit.
  ASSERT_EQ((*in)->tensor(entries[1].name)->info->ne[0] % 256, 0) << entries[1].name;
  entries[1].values.resize(entries[1].values.size() / 2);
  {
    std::ofstream f(dat, std::ios::binary);
    f << dat_bytes(entries);
  }
  auto bad = load_imatrix(dat);
  ASSERT_TRUE(bad.ok()) << bad.error().message;
  o.imatrix = &*bad;
  Status mis = quantize_model(f32_model(), out, o);
  ASSERT_FALSE(mis.ok());
  EXPECT_NE(mis.error().message.find(entries[1].name), std::string::npos) << mis.error().message;
  for (const auto& f : {dat, plain_out, out}) std::remove(f.c_str());
}
