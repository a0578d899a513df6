// Encoded weights in a folder's GGUF view (hf_recipes.h).
#include "format/hf_recipes.h"

#include <algorithm>
#include <cstring>

#include "kernels/blocks.h"
#include "quant/hf_codecs.h"

namespace deltafin {
namespace {

constexpr int64_t kFp8Block = 128;  // hf_codecs' block (DeepSeek-V3's weight_block_size)
constexpr int64_t kInt4Group = 32;  // hf_codecs' group (Kimi K2 Thinking's group_size)

bool plain_dtype(const std::string& d, DType* out) {
  if (d == "BF16") *out = DType::BF16;
  else if (d == "F16") *out = DType::F16;
  else if (d == "F32") *out = DType::F32;
  else return false;
  return true;
}

std::string shape_str(const std::vector<int64_t>& s) { return nlohmann::json(s).dump(); }

// FP8 folders: quantization_config (when there is one) must be the block form the
// codec reads.
Status check_fp8_config(const HfFolder& f) {
  const nlohmann::json& q = f.quantization_config;
  if (!q.is_object()) return {};
  const std::string method = q.value("quant_method", std::string());
  if (method != "fp8")
    return make_error("{}/config.json: quantization_config.quant_method '{}' beside F8_E4M3 weights with "
                      "weight_scale_inv; only 'fp8' (128x128 block scales) is read",
                      f.location, method);
  if (auto b = q.find("weight_block_size"); b != q.end() && *b != nlohmann::json::array({kFp8Block, kFp8Block}))
    return make_error("{}/config.json: quantization_config.weight_block_size {} is not supported (128x128 only)",
                      f.location, b->dump());
  return {};
}

// INT4 folders: compressed-tensors pack-quantized, 4-bit symmetric int in groups of 32.
Status check_int4_config(const HfFolder& f) {
  const nlohmann::json& q = f.quantization_config;
  const std::string where = f.location + "/config.json: quantization_config";
  if (!q.is_object()) return make_error("{} is missing; I32 weight_packed tensors need compressed-tensors' to be read", where);
  if (q.value("quant_method", std::string()) != "compressed-tensors")
    return make_error("{}.quant_method is '{}'; I32 weight_packed tensors are read as compressed-tensors only", where,
                      q.value("quant_method", std::string()));
  auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty())
    return make_error("{}.config_groups is missing", where);
  for (auto g = groups->begin(); g != groups->end(); ++g) {
    const std::string gw = where + ".config_groups." + g.key() + ".weights";
    auto w = g->find("weights");
    if (w == g->end() || !w->is_object()) return make_error("{} is missing", gw);
    const std::string fmt_ = g->value("format", q.value("format", std::string()));
    if (fmt_ != "pack-quantized")
      return make_error("{}: format '{}' is not supported (pack-quantized only)", where, fmt_);
    if (w->value("num_bits", 0) != 4 || w->value("type", std::string()) != "int" || w->value("symmetric", false) != true ||
        w->value("group_size", 0) != kInt4Group || w->value("strategy", std::string("group")) != "group")
      return make_error("{} {} is not supported (4-bit symmetric int in groups of 32 only)", gw, w->dump());
  }
  return {};
}

// Source rows [r0, r1) of the piece (relative to p.row0), decoded to out (p.elem bytes
// an element, p.cols elements a row).
Status decode_rows(const HfGgufSource::Piece& p, ByteSource& data, ByteSource& scales, uint64_t r0, uint64_t r1,
                   char* out) {
  const uint64_t R0 = p.row0 + r0, n_rows = r1 - r0, cols = p.cols;
  if (n_rows == 0) return {};
  if (p.op == HfGgufSource::Op::Copy)
    return data.read_at(p.in_off + R0 * cols * p.elem, out, size_t(n_rows * cols * p.elem));
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  if (p.op == HfGgufSource::Op::Fp8) {
    std::vector<uint8_t> codes(size_t(n_rows * cols));
    DF_TRY(data.read_at(p.in_off + R0 * cols, codes.data(), codes.size()));
    const uint64_t sc_cols = (cols + kFp8Block - 1) / kFp8Block;
    const uint64_t b0 = R0 / kFp8Block, b1 = (R0 + n_rows - 1) / kFp8Block;
    std::vector<float> sc(size_t((b1 - b0 + 1) * sc_cols));
    DF_TRY(scales.read_at(p.scale_off + b0 * sc_cols * 4, sc.data(), sc.size() * 4));
    for (uint64_t i = 0; i < n_rows; ++i)
      fp8_block_to_bf16(codes.data() + i * cols, sc.data() + ((R0 + i) / kFp8Block - b0) * sc_cols, 1, int64_t(cols),
                        o + i * cols);
    return {};
  }
  if (p.op == HfGgufSource::Op::Int4) {
    std::vector<int32_t> packed(size_t(n_rows * cols / 8));
    std::vector<uint16_t> sc(size_t(n_rows * cols / kInt4Group));
    DF_TRY(data.read_at(p.in_off + R0 * (cols / 8) * 4, packed.data(), packed.size() * 4));
    DF_TRY(scales.read_at(p.scale_off + R0 * (cols / kInt4Group) * 2, sc.data(), sc.size() * 2));
    int4_pack_to_bf16(packed.data(), sc.data(), int64_t(n_rows), int64_t(cols), o);
    return {};
  }
  return make_error("internal: piece op {} has no row decoder", int(p.op));
}

}  // namespace

Result<HfWeight> find_hf_weight(const HfFolder& f, const std::string& name, std::set<std::string>* used,
                                bool* found) {
  *found = true;
  const std::string& loc = f.location;
  auto get = [&](const std::string& n) -> const HfTensor* {
    auto it = f.tensors.find(n);
    return it == f.tensors.end() ? nullptr : &it->second;
  };
  HfWeight w;
  if (const HfTensor* t = get(name)) {
    w.data = t;
    w.shape = t->shape;
    used->insert(name);
    if (plain_dtype(t->dtype, &w.plain)) return w;
    if (t->dtype != "F8_E4M3")
      return make_error("{}: tensor '{}' is {}; weights are read from BF16, F16, F32 or F8_E4M3 with "
                        "weight_scale_inv",
                        loc, name, t->dtype);
    const std::string sn = name + "_scale_inv";
    const HfTensor* s = get(sn);
    if (!s) return make_error("{}: tensor '{}' is missing (the FP8 block scales of '{}')", loc, sn, name);
    DF_TRY(check_fp8_config(f));
    if (t->shape.size() != 2) return make_error("{}: FP8 tensor '{}' has shape {}; a matrix is needed", loc, name,
                                                shape_str(t->shape));
    const std::vector<int64_t> need = {(t->shape[0] + kFp8Block - 1) / kFp8Block,
                                       (t->shape[1] + kFp8Block - 1) / kFp8Block};
    if (s->dtype != "F32" || s->shape != need)
      return make_error("{}: tensor '{}' is {} {}; the 128x128 block scales of '{}' {} are F32 {}", loc, sn, s->dtype,
                        shape_str(s->shape), name, shape_str(t->shape), shape_str(need));
    used->insert(sn);
    w.enc = HfEncoding::Fp8;
    w.scale = s;
    w.plain = DType::BF16;
    return w;
  }
  // compressed-tensors: X.weight_packed, X.weight_scale, X.weight_shape.
  const std::string pn = name + "_packed", sn = name + "_scale", shn = name + "_shape";
  const HfTensor* p = get(pn);
  if (!p) {
    *found = false;
    return w;
  }
  if (p->dtype != "I32")
    return make_error("{}: tensor '{}' is {}; compressed-tensors weights are read as INT4 pack-quantized (I32) here",
                      loc, pn, p->dtype);
  const HfTensor* s = get(sn);
  if (!s) return make_error("{}: tensor '{}' is missing (the INT4 group scales of '{}')", loc, sn, pn);
  DF_TRY(check_int4_config(f));
  if (get(name + "_zero_point"))
    return make_error("{}: tensor '{}_zero_point': asymmetric INT4 is not supported", loc, name);
  if (p->shape.size() != 2) return make_error("{}: tensor '{}' has shape {}; a matrix is needed", loc, pn,
                                              shape_str(p->shape));
  const int64_t rows = p->shape[0], cols = p->shape[1] * 8;
  const std::vector<int64_t> need = {rows, cols / kInt4Group};
  if (cols % kInt4Group != 0 || s->dtype != "BF16" || s->shape != need)
    return make_error("{}: tensor '{}' is {} {}; the group-of-32 scales of '{}' {} are BF16 {}", loc, sn, s->dtype,
                      shape_str(s->shape), pn, shape_str(p->shape), shape_str(need));
  if (const HfTensor* sh = get(shn)) {
    // The unpacked shape; read from the packed one (the same unless padded, which the
    // published checkpoints are not), so no tensor data is read for the inventory.
    if (sh->shape != std::vector<int64_t>{2})
      return make_error("{}: tensor '{}' has shape {}; [2] is expected", loc, shn, shape_str(sh->shape));
    used->insert(shn);
  }
  used->insert(pn);
  used->insert(sn);
  w.enc = HfEncoding::Int4;
  w.data = p;
  w.scale = s;
  w.shape = {rows, cols};
  w.plain = DType::BF16;
  return w;
}

Status read_decoded_piece(const HfGgufSource::Piece& p, ByteSource& data, ByteSource& scales, uint64_t rel, char* dst,
                          size_t n) {
  const uint64_t row_bytes = uint64_t(p.cols) * p.elem;
  if (p.transpose) {
    // A transposed block (one head of MLA's attn_k_b: small) is decoded whole.
    std::vector<char> buf(size_t(p.rows * row_bytes)), t(buf.size());
    DF_TRY(decode_rows(p, data, scales, 0, p.rows, buf.data()));
    for (uint64_t i = 0; i < p.rows; ++i)
      for (uint64_t j = 0; j < p.cols; ++j)
        std::memcpy(&t[size_t((j * p.rows + i) * p.elem)], &buf[size_t((i * p.cols + j) * p.elem)], p.elem);
    if (p.widen != 0) {  // 16-bit elements out as F32
      std::vector<float> f(t.size() / 2);
      for (size_t k = 0; k < f.size(); ++k) {
        uint16_t h;
        std::memcpy(&h, &t[2 * k], 2);
        f[k] = p.widen == 1 ? kern::bf16_to_f32(h) : kern::fp16_to_f32(h);
      }
      std::memcpy(dst, reinterpret_cast<const char*>(f.data()) + rel, n);
      return {};
    }
    std::memcpy(dst, t.data() + rel, n);
    return {};
  }
  if (p.rope_pairs) {
    // One head of d rows: output row 2i + j is source row j * d/2 + i. The output rows
    // [r0, r1) the range touches need source rows i in [i0, i1) of each half: two runs.
    const uint64_t half = p.rows / 2;
    const uint64_t r0 = rel / row_bytes, r1 = (rel + n + row_bytes - 1) / row_bytes;
    const uint64_t i0 = r0 / 2, i1 = (r1 - 1) / 2 + 1;
    std::vector<char> run[2];
    for (uint64_t j = 0; j < 2; ++j) {
      run[j].resize(size_t((i1 - i0) * row_bytes));
      DF_TRY(decode_rows(p, data, scales, j * half + i0, j * half + i1, run[j].data()));
    }
    for (uint64_t r = r0; r < r1; ++r) {
      const uint64_t lo = std::max(r * row_bytes, rel), hi = std::min((r + 1) * row_bytes, rel + n);
      const char* src = run[r % 2].data() + (r / 2 - i0) * row_bytes;
      std::memcpy(dst + (lo - rel), src + (lo - r * row_bytes), size_t(hi - lo));
    }
    return {};
  }
  // Rows in bounded chunks; copy out the asked-for bytes.
  const uint64_t chunk = std::max<uint64_t>(1, (uint64_t(1) << 20) / std::max<uint64_t>(1, p.cols));
  uint64_t r = rel / row_bytes;
  const uint64_t r_end = (rel + n + row_bytes - 1) / row_bytes;
  std::vector<char> buf;
  uint64_t pos = rel;
  while (r < r_end) {
    const uint64_t k = std::min(chunk, r_end - r);
    buf.resize(size_t(k * row_bytes));
    DF_TRY(decode_rows(p, data, scales, r, r + k, buf.data()));
    const uint64_t lo = r * row_bytes, hi = std::min((r + k) * row_bytes, rel + n);
    std::memcpy(dst + (pos - rel), buf.data() + (pos - lo), size_t(hi - pos));
    pos = hi;
    r += k;
  }
  return {};
}

}  // namespace deltafin
