// Derived tensors, HF <-> GGUF (hf_derive.h).
#include "format/hf_derive.h"

#include <cmath>
#include <cstring>

#include "format/model_file.h"
#include "kernels/blocks.h"

namespace deltafin {
namespace {

uint64_t numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

bool float_dtype(const std::string& d) { return d == "BF16" || d == "F16" || d == "F32"; }

// n elements of `t` from element `at`, widened to F32 (exact).
Status read_floats(const HfFolder& f, const HfTensor& t, uint64_t at, uint64_t n, float* out) {
  const int size = t.dtype == "F32" ? 4 : 2;
  std::vector<char> raw(size_t(n) * size_t(size));
  DF_TRY(f.shards[size_t(t.shard)]->read_at(t.offset + at * uint64_t(size), raw.data(), raw.size()));
  for (uint64_t i = 0; i < n; ++i) {
    if (size == 4) {
      std::memcpy(&out[i], raw.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      out[i] = t.dtype == "BF16" ? kern::bf16_to_f32(h) : kern::fp16_to_f32(h);
    }
  }
  return {};
}

// A reader computing the tensor in units of `unit` floats (a head, or all of it).
class UnitReader : public HfDerivedReader {
 public:
  UnitReader(uint64_t unit, uint64_t units) : unit_(unit), units_(units) {}
  Status read(uint64_t off, char* dst, size_t n) override {
    const uint64_t unit_bytes = unit_ * 4;
    std::vector<float> buf(static_cast<size_t>(unit_));
    while (n > 0) {
      const uint64_t u = off / unit_bytes, in = off % unit_bytes;
      if (u >= units_) return make_error("derived tensor read past its end");
      DF_TRY(compute(u, buf.data()));
      const size_t k = size_t(std::min<uint64_t>(n, unit_bytes - in));
      std::memcpy(dst, reinterpret_cast<const char*>(buf.data()) + in, k);
      dst += k, off += k, n -= k;
    }
    return {};
  }

 protected:
  virtual Status compute(uint64_t u, float* out) = 0;

 private:
  uint64_t unit_, units_;
};

class MulReader final : public UnitReader {
 public:
  MulReader(const HfFolder& f, const HfTensor& a, const HfTensor& b)
      : UnitReader(numel(a.shape), 1), f_(f), a_(a), b_(b) {}
  Status compute(uint64_t, float* out) override {
    const uint64_t n = numel(a_.shape);
    std::vector<float> y(static_cast<size_t>(n));
    DF_TRY(read_floats(f_, a_, 0, n, out));
    DF_TRY(read_floats(f_, b_, 0, n, y.data()));
    for (uint64_t i = 0; i < n; ++i) out[i] *= y[i];
    return {};
  }

 private:
  const HfFolder& f_;
  const HfTensor &a_, &b_;
};

class NegExpReader final : public UnitReader {
 public:
  NegExpReader(const HfFolder& f, const HfTensor& a) : UnitReader(numel(a.shape), 1), f_(f), a_(a) {}
  Status compute(uint64_t, float* out) override {
    const uint64_t n = numel(a_.shape);
    DF_TRY(read_floats(f_, a_, 0, n, out));
    for (uint64_t i = 0; i < n; ++i) out[i] = float(-std::exp(double(out[i])));
    return {};
  }

 private:
  const HfFolder& f_;
  const HfTensor& a_;
};

std::string shape_str(const std::vector<int64_t>& s) { return nlohmann::json(s).dump(); }

}  // namespace

Result<HfDerivedPlan> hf_plan_derived(const HfFolder& f, const HfNameRule& r, int layer) {
  const std::string& loc = f.location;
  HfDerivedPlan p;
  const std::string hn = hf_name_expand(r.hf, layer, -1);
  const std::string gname = hf_name_expand(r.gguf, layer, -1);
  auto find = [&](const std::string& name) -> Result<const HfTensor*> {
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) return static_cast<const HfTensor*>(nullptr);
    if (!float_dtype(it->second.dtype))
      return make_error("{}: tensor '{}' is {}; {} is computed from BF16, F16 or F32 only", loc, name,
                        it->second.dtype, gname);
    return &it->second;
  };
  DF_ASSIGN(const HfTensor* a, find(hn));
  const HfTensor* b = nullptr;
  if (r.derive == HfDerive::Mul) {
    DF_ASSIGN(b, find(hf_name_expand(r.hf2, layer, -1)));
  }
  if (!a || (r.derive == HfDerive::Mul && !b)) {
    if (r.optional && !a && !b) return p;
    const std::string missing = !a ? hn : hf_name_expand(r.hf2, layer, -1);
    return make_error("{}: tensor '{}' is missing (needed for {})", loc, missing, gname);
  }
  p.info.name = gname;
  p.info.type = DType::F32;
  p.inputs.push_back(a->name);
  const uint64_t n = numel(a->shape);
  switch (r.derive) {
    case HfDerive::Mul:
      if (numel(b->shape) != n)
        return make_error("{}: '{}' {} and '{}' {} cannot be multiplied element by element", loc, a->name,
                          shape_str(a->shape), b->name, shape_str(b->shape));
      p.inputs.push_back(b->name);
      p.info.n_dims = 1;
      p.info.ne[0] = int64_t(n);
      p.reader = std::make_unique<MulReader>(f, *a, *b);
      break;
    case HfDerive::NegExp:
      p.info.n_dims = 1;
      p.info.ne[0] = int64_t(n);
      p.reader = std::make_unique<NegExpReader>(f, *a);
      break;
    case HfDerive::None:
      return make_error("{}: rule for {} derives nothing", loc, gname);
  }
  return p;
}

namespace {

// All of GGUF tensor `name` as F32.
Result<std::vector<float>> gguf_floats(ModelFile& mf, const std::string& name) {
  const TensorRef* t = mf.tensor(name);
  if (!t) return make_error("{}: tensor '{}' is missing", mf.path(), name);
  const GGUFTensorInfo& ti = *t->info;
  const uint64_t n = ti.n_elements();
  std::vector<float> out(static_cast<size_t>(n));
  if (ti.type == DType::F32) {
    DF_TRY(mf.source(t->shard).read_at(t->file_offset, out.data(), size_t(n * 4)));
    return out;
  }
  if (ti.type != DType::F16 && ti.type != DType::BF16)
    return make_error("{}: tensor '{}' is {}; only F32, F16 and BF16 export", mf.path(), name, dtype_name(ti.type));
  std::vector<uint16_t> h(static_cast<size_t>(n));
  DF_TRY(mf.source(t->shard).read_at(t->file_offset, h.data(), size_t(n * 2)));
  for (uint64_t i = 0; i < n; ++i) out[i] = ti.type == DType::BF16 ? kern::bf16_to_f32(h[i]) : kern::fp16_to_f32(h[i]);
  return out;
}

HfExportedTensor make_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& v, DType t) {
  HfExportedTensor e{std::move(name), t == DType::BF16 ? "BF16" : t == DType::F16 ? "F16" : "F32", std::move(shape), {}};
  if (t == DType::F32) {
    e.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return e;
  }
  e.bytes.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = t == DType::BF16 ? kern::f32_to_bf16(v[i]) : kern::f32_to_fp16(v[i]);
    std::memcpy(e.bytes.data() + 2 * i, &h, 2);
  }
  return e;
}

float rounded(float x, DType t) {
  if (t == DType::BF16) return kern::bf16_to_f32(kern::f32_to_bf16(x));
  if (t == DType::F16) return kern::fp16_to_f32(kern::f32_to_fp16(x));
  return x;
}

}  // namespace

Result<std::vector<HfExportedTensor>> hf_export_derived(ModelFile& mf, const HfArch& arch, const HfNameRule& r,
                                                        int layer, const std::string& gguf_name, DType matrix) {
  std::vector<HfExportedTensor> out;
  const std::string hn = hf_name_expand(r.hf, layer, -1);
  switch (r.derive) {
    case HfDerive::Mul: {
      // Split v into a norm weight of a few exact values and the projection v / norm.
      DF_ASSIGN(std::vector<float> v, gguf_floats(mf, gguf_name));
      std::vector<float> norm(v.size()), proj(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        norm[i] = 0.75f + 0.125f * float(i % 5);
        proj[i] = rounded(v[i] / norm[i], matrix);
      }
      out.push_back(make_tensor(hn, {int64_t(v.size())}, norm, matrix));
      out.push_back(make_tensor(hf_name_expand(r.hf2, layer, -1), {1, int64_t(v.size())}, proj, matrix));
      break;
    }
    case HfDerive::NegExp: {
      DF_ASSIGN(std::vector<float> v, gguf_floats(mf, gguf_name));
      for (float& x : v) {
        if (x == 0.0f || !std::isfinite(x))
          return make_error("{}: {} holds {}; A = -exp(A_log) cannot be that", mf.path(), gguf_name, x);
        x = float(std::log(std::fabs(double(x))));
      }
      out.push_back(make_tensor(hn, {int64_t(v.size())}, v, DType::F32));
      break;
    }
    case HfDerive::None:
      return make_error("{}: {} is not derived", mf.path(), gguf_name);
  }
  return out;
}

}  // namespace deltafin
