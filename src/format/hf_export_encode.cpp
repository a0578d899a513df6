// Made tensors of a Hugging Face export (hf_export_encode.h).
#include "format/hf_export_encode.h"

#include <cstring>
#include <memory>

#include "kernels/blocks.h"
#include "quant/hf_codecs.h"

namespace deltafin {
namespace {

constexpr int64_t kFp8Block = 128;
constexpr int64_t kInt4Group = 32;

// A matrix's values as F32, [rows, cols] outermost first.
using Matrix = std::function<Result<std::vector<float>>(ByteSource&)>;

Result<std::vector<float>> read_floats(ByteSource& src, uint64_t off, DType type, uint64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (type == DType::F32) {
    DF_TRY(src.read_at(off, out.data(), size_t(n * 4)));
    return out;
  }
  if (type != DType::BF16 && type != DType::F16)
    return make_error("{} tensors do not export (F32, F16 and BF16 only)", dtype_name(type));
  std::vector<uint16_t> h(static_cast<size_t>(n));
  DF_TRY(src.read_at(off, h.data(), size_t(n * 2)));
  for (size_t i = 0; i < h.size(); ++i) out[i] = type == DType::BF16 ? kern::bf16_to_f32(h[i]) : kern::fp16_to_f32(h[i]);
  return out;
}

std::string to_bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// The HF tensors of one [rows, cols] matrix `name` in `enc`, or plain in `type`.
Status emit(const std::string& name, int64_t rows, int64_t cols, HfEncoding enc, DType type, Matrix values,
            std::vector<HfMadeTensor>* out) {
  const uint64_t n = uint64_t(rows) * uint64_t(cols);
  if (enc == HfEncoding::Plain) {
    const uint64_t es = type == DType::F32 ? 4 : 2;
    out->push_back({name, type == DType::F32 ? "F32" : type == DType::F16 ? "F16" : "BF16", {rows, cols}, n * es,
                    [values, type, n](ByteSource& s, std::string* o) -> Status {
                      DF_ASSIGN(std::vector<float> x, values(s));
                      if (type == DType::F32) {
                        *o = to_bytes(x.data(), size_t(n * 4));
                        return {};
                      }
                      std::vector<uint16_t> h(static_cast<size_t>(n));
                      for (size_t i = 0; i < h.size(); ++i)
                        h[i] = type == DType::BF16 ? kern::f32_to_bf16(x[i]) : kern::f32_to_fp16(x[i]);
                      *o = to_bytes(h.data(), h.size() * 2);
                      return {};
                    }});
    return {};
  }
  if (enc == HfEncoding::Fp8) {
    const int64_t sr = (rows + kFp8Block - 1) / kFp8Block, sc = (cols + kFp8Block - 1) / kFp8Block;
    auto encode = [values, rows, cols, sr, sc](ByteSource& s, bool scales, std::string* o) -> Status {
      DF_ASSIGN(std::vector<float> x, values(s));
      std::vector<uint8_t> w(x.size());
      std::vector<float> si(size_t(sr * sc));
      f32_to_fp8_block(x.data(), rows, cols, w.data(), si.data());
      *o = scales ? to_bytes(si.data(), si.size() * 4) : to_bytes(w.data(), w.size());
      return {};
    };
    out->push_back({name, "F8_E4M3", {rows, cols}, n,
                    [encode](ByteSource& s, std::string* o) { return encode(s, false, o); }});
    out->push_back({name + "_scale_inv", "F32", {sr, sc}, uint64_t(sr * sc) * 4,
                    [encode](ByteSource& s, std::string* o) { return encode(s, true, o); }});
    return {};
  }
  if (cols % kInt4Group != 0)
    return make_error("{}: {} columns; INT4 pack-quantized needs a multiple of {}", name, cols, kInt4Group);
  auto encode = [values, rows, cols](ByteSource& s, bool scales, std::string* o) -> Status {
    DF_ASSIGN(std::vector<float> x, values(s));
    std::vector<int32_t> p(size_t(rows * cols / 8));
    std::vector<uint16_t> sc(size_t(rows * cols / kInt4Group));
    f32_to_int4_pack(x.data(), rows, cols, p.data(), sc.data());
    *o = scales ? to_bytes(sc.data(), sc.size() * 2) : to_bytes(p.data(), p.size() * 4);
    return {};
  };
  const std::string base = name;  // "X.weight" -> X.weight_packed, X.weight_scale, X.weight_shape
  out->push_back({base + "_packed", "I32", {rows, cols / 8}, n / 2,
                  [encode](ByteSource& s, std::string* o) { return encode(s, false, o); }});
  out->push_back({base + "_scale", "BF16", {rows, cols / kInt4Group}, n / kInt4Group * 2,
                  [encode](ByteSource& s, std::string* o) { return encode(s, true, o); }});
  const int32_t shape[2] = {int32_t(rows), int32_t(cols)};
  const std::string sb = to_bytes(shape, 8);
  out->push_back({base + "_shape", "I32", {2}, 8, [sb](ByteSource&, std::string* o) -> Status {
                    *o = sb;
                    return {};
                  }});
  return {};
}

}  // namespace

Status hf_export_made(ModelFile& mf, const HfArch& arch, const HfNameRule& rule, const GGUFTensorInfo& t, int L,
                      HfEncoding enc, DType matrix, std::vector<HfMadeTensor>* out, bool* handled) {
  *handled = false;
  auto wants = [&](const std::string& hf) {
    return enc != HfEncoding::Plain && arch.quantized && arch.quantized(enc, hf);
  };
  const uint64_t off = mf.tensor(t.name)->file_offset;
  if (rule.part == HfPart::KvbV) {  // written with attn_k_b, as kv_b_proj
    *handled = true;
    return {};
  }
  if (rule.part == HfPart::KvbK) {
    const HfNameRule* vr = nullptr;
    for (const HfNameRule& r : arch.rules)
      if (r.part == HfPart::KvbV && r.hf == rule.hf) vr = &r;
    const std::string vname = vr ? hf_name_expand(vr->gguf, L, -1) : std::string();
    const TensorRef* v = vr ? mf.tensor(vname) : nullptr;
    if (!v) return make_error("{}: {} has no attn_v_b beside it ({}); kv_b_proj needs both", mf.path(), t.name, vname);
    const GGUFTensorInfo& vi = *v->info;
    const int64_t dn = t.ne[0], r_kv = t.ne[1], H = t.ne[2], dv = vi.ne[1];
    if (t.n_dims != 3 || vi.n_dims != 3 || vi.ne[0] != r_kv || vi.ne[2] != H || vi.type != t.type)
      return make_error("{}: {} and {} do not split one kv_b_proj", mf.path(), t.name, vname);
    const uint64_t voff = v->file_offset;
    const DType type = t.type;
    Matrix kvb = [=](ByteSource& s) -> Result<std::vector<float>> {
      DF_ASSIGN(std::vector<float> k, read_floats(s, off, type, uint64_t(dn * r_kv * H)));
      DF_ASSIGN(std::vector<float> vv, read_floats(s, voff, type, uint64_t(dv * r_kv * H)));
      std::vector<float> x(size_t(H * (dn + dv) * r_kv));
      for (int64_t h = 0; h < H; ++h) {
        float* head = x.data() + h * (dn + dv) * r_kv;
        for (int64_t i = 0; i < dn; ++i)  // k_b is [H, r_kv, dn]: each head's nope rows transposed
          for (int64_t j = 0; j < r_kv; ++j) head[i * r_kv + j] = k[size_t((h * r_kv + j) * dn + i)];
        std::memcpy(head + dn * r_kv, vv.data() + h * dv * r_kv, size_t(dv * r_kv) * 4);
      }
      return x;
    };
    const std::string hf = hf_name_expand(rule.hf, L, -1);
    *handled = true;
    const DType hf_type = type == DType::F32 && rule.f32 ? matrix : type;  // F32 by rule: the folder's dtype
    return emit(hf, H * (dn + dv), r_kv, wants(hf) ? enc : HfEncoding::Plain, hf_type, kvb, out);
  }
  if (rule.part == HfPart::RopeQ || rule.part == HfPart::RopeK) {
    // The inverse of the converter's permutation: HF row hf_rope_source_row(r) is GGUF row r.
    const std::string key = arch.gguf_arch + (rule.part == HfPart::RopeQ ? ".attention.head_count" : ".attention.head_count_kv");
    const int64_t heads = mf.meta().int_or(key, 0), rows = t.ne[1], cols = t.ne[0];
    if (t.n_dims != 2 || heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
      return make_error("{}: {} has {} rows; they must be {} heads ({}) of an even number of rows each", mf.path(),
                        t.name, rows, heads, key);
    const DType type = t.type;
    if (type != DType::F32 && type != DType::F16 && type != DType::BF16)
      return make_error("{}: tensor '{}' is {}; only F32, F16 and BF16 export", mf.path(), t.name, dtype_name(type));
    const int64_t d = rows / heads;
    const std::string hf = hf_name_expand(rule.hf, L, -1);
    *handled = true;
    if (wants(hf)) {
      Matrix m = [=](ByteSource& s) -> Result<std::vector<float>> {
        DF_ASSIGN(std::vector<float> g, read_floats(s, off, type, uint64_t(rows * cols)));
        std::vector<float> x(g.size());
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(&x[size_t(hf_rope_source_row(r, d) * cols)], &g[size_t(r * cols)], size_t(cols) * 4);
        return x;
      };
      return emit(hf, rows, cols, enc, type, m, out);
    }
    // Plain: the rows' bytes moved, unchanged.
    const uint64_t row_bytes = t.bytes / uint64_t(rows), bytes = t.bytes;
    out->push_back({hf, type == DType::F32 ? "F32" : type == DType::F16 ? "F16" : "BF16", {rows, cols}, bytes,
                    [=](ByteSource& s, std::string* o) -> Status {
                      std::string g(size_t(bytes), '\0');
                      DF_TRY(s.read_at(off, g.data(), g.size()));
                      o->assign(size_t(bytes), '\0');
                      for (int64_t r = 0; r < rows; ++r)
                        std::memcpy(o->data() + hf_rope_source_row(r, d) * row_bytes, g.data() + r * row_bytes,
                                    size_t(row_bytes));
                      return {};
                    }});
    return {};
  }
  const bool stacked = hf_rule_has_expert(rule);
  const uint32_t dims = stacked ? t.n_dims - 1 : t.n_dims;
  if (dims != 2 || !wants(hf_name_expand(rule.hf, L, 0))) return {};
  const int n = stacked ? int(t.ne[t.n_dims - 1]) : 1;
  const uint64_t per = t.bytes / uint64_t(n);
  const int64_t rows = t.ne[1], cols = t.ne[0];
  const DType type = t.type;
  for (int e = 0; e < n; ++e) {
    const uint64_t at = off + uint64_t(e) * per;
    Matrix m = [=](ByteSource& s) { return read_floats(s, at, type, uint64_t(rows * cols)); };
    DF_TRY(emit(hf_name_expand(rule.hf, L, stacked ? e : -1), rows, cols, enc, type, m, out));
  }
  *handled = true;
  return {};
}

nlohmann::json hf_quantization_config(HfEncoding enc, const std::vector<std::string>& plain_linear) {
  if (enc == HfEncoding::Fp8)
    return {{"activation_scheme", "dynamic"},
            {"fmt", "e4m3"},
            {"quant_method", "fp8"},
            {"weight_block_size", {kFp8Block, kFp8Block}}};
  if (enc == HfEncoding::Int4) {
    nlohmann::json weights = {{"actorder", nullptr},     {"block_structure", nullptr}, {"dynamic", false},
                              {"group_size", kInt4Group}, {"num_bits", 4},              {"observer", "minmax"},
                              {"observer_kwargs", nlohmann::json::object()},            {"strategy", "group"},
                              {"symmetric", true},       {"type", "int"}};
    nlohmann::json group = {{"input_activations", nullptr},
                            {"output_activations", nullptr},
                            {"targets", {"Linear"}},
                            {"weights", weights}};
    return {{"config_groups", {{"group_0", group}}},
            {"format", "pack-quantized"},
            {"ignore", plain_linear},
            {"kv_cache_scheme", nullptr},
            {"quant_method", "compressed-tensors"},
            {"quantization_status", "compressed"}};
  }
  return nullptr;
}

}  // namespace deltafin
