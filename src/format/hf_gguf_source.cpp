// The GGUF view of a Hugging Face folder (hf_gguf_source.h).
#include "format/hf_gguf_source.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "format/hf_mxfp4.h"
#include "format/hf_recipes.h"
#include "format/hf_tokenizer.h"
#include "tokenizer/vocab.h"
#include "kernels/blocks.h"
#include "quant/hf_codecs.h"

namespace deltafin {
namespace {

uint64_t dtype_size(DType t) { return dtype_row_bytes(t, 1); }  // F32, F16, BF16

std::string base_name(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

// llama_ftype of the model's matrices (general.file_type), as the converter writes it.
uint32_t file_type_of(const GGUFFile& m) {
  std::map<DType, uint64_t> bytes;
  for (const auto& t : m.tensors)
    if (t.n_dims >= 2) bytes[t.type] += t.bytes;
  DType best = DType::F32;
  uint64_t most = 0;
  for (auto [t, b] : bytes)
    if (b > most) most = b, best = t;
  return best == DType::BF16 ? 32 : best == DType::F16 ? 1 : best == DType::MXFP4 ? 38 : 0;
}

// generation_config.json's sampling defaults as the GGUF keys llama.cpp reads for a
// model's recommended sampling (general.sampling.*); do_sample false is greedy.
void generation_to_gguf(const nlohmann::json& gen, GGUFFile* m) {
  if (!gen.is_object()) return;
  auto number = [&](const char* key, const char* gguf_key) {
    if (auto it = gen.find(key); it != gen.end() && it->is_number() && !m->find(gguf_key))
      m->set(gguf_key, GGUFValue::f32(it->get<float>()));
  };
  if (auto d = gen.find("do_sample"); d != gen.end() && d->is_boolean() && !d->get<bool>())
    m->set("general.sampling.temp", GGUFValue::f32(0.0f));
  number("temperature", "general.sampling.temp");
  number("top_p", "general.sampling.top_p");
  number("min_p", "general.sampling.min_p");
  number("repetition_penalty", "general.sampling.penalty_repeat");
  if (auto k = gen.find("top_k"); k != gen.end() && k->is_number_integer())
    m->set("general.sampling.top_k", GGUFValue::i32(k->get<int32_t>()));
}

}  // namespace

Result<std::unique_ptr<HfGgufSource>> HfGgufSource::build(std::shared_ptr<HfFolder> folder) {
  auto v = std::unique_ptr<HfGgufSource>(new HfGgufSource());
  const HfFolder& f = *folder;
  const std::string& loc = f.location;
  v->folder_ = folder;
  v->name_ = loc + " [as GGUF]";  // not a path: the store reads it through read_at
  v->arch_ = find_hf_arch(f.model_type, f.container_type);
  if (!v->arch_)
    return make_error("{}: config.json model_type '{}'{} is not supported (supported: {})", loc, f.model_type,
                      f.container_type.empty() ? "" : " in '" + f.container_type + "'", hf_model_type_list());
  const HfArch& arch = *v->arch_;
  GGUFFile& m = v->meta_;
  m.set("general.architecture", GGUFValue::str(arch.gguf_arch));
  m.set("general.name", GGUFValue::str(base_name(loc)));
  if (Status s = arch.config_to_gguf(f.config, &m); !s.ok()) return make_error("{}/{}", loc, s.error().message);
  if (f.tokenizer.tokenizer_json.empty() && f.tokenizer.tiktoken_model.empty() && f.tokenizer.tokenizer_model.empty())
    return make_error("{}: no tokenizer.json, tokenizer.model or tiktoken.model", loc);
  if (Status s = hf_tokenizer_to_gguf(f.tokenizer, &m); !s.ok()) return make_error("{}: {}", loc, s.error().message);
  if (!m.find("tokenizer.ggml.eos_token_id") && !f.eos_ids.empty())
    m.set("tokenizer.ggml.eos_token_id", GGUFValue::u32(uint32_t(f.eos_ids[0])));
  if (f.eos_ids.size() > 1) m.set(Vocab::kEogIdsKey, GGUFValue::int_array(GGUFType::U32, f.eos_ids));
  generation_to_gguf(f.generation_config, &m);

  const int n_layer = int(m.int_or(arch.gguf_arch + ".block_count", 0));
  const int n_expert = int(m.int_or(arch.gguf_arch + ".expert_count", 0));

  // The tensor directory in llama.cpp's order: the rules before the first layer
  // rule, every layer's, then the rest. Each tensor keeps its HF inputs.
  struct Planned {
    std::vector<HfWeight> inputs;
    HfPart part = HfPart::Whole;
    int64_t rope_heads = 0;  // RopeQ/RopeK: the heads the rows are permuted within
    // Compressed-tensors MXFP4 experts (Kimi K3): each expert's codes and E8M0 scales.
    std::vector<const HfTensor*> mx_codes, mx_scales;
    std::unique_ptr<HfDerivedReader> derived;
  };
  std::vector<Planned> planned;
  std::set<std::string> used;
  const std::string& A = arch.gguf_arch;
  const int n_dense = int(m.int_or(A + ".leading_dense_block_count", 0));
  // MLA's kv_b_proj split (HfPart): heads, and each head's nope and value rows.
  const int64_t mla_h = m.int_or(A + ".attention.head_count", 0);
  const int64_t mla_dn = m.int_or(A + ".attention.key_length_mla", 0) - m.int_or(A + ".rope.dimension_count", 0);
  const int64_t mla_dv = m.int_or(A + ".attention.value_length_mla", 0);
  auto add = [&](const HfNameRule& r, int layer) -> Status {
    if (layer >= 0 && ((r.layers == HfLayers::Dense && layer >= n_dense) || (r.layers == HfLayers::Moe && layer < n_dense)))
      return {};
    const bool stacked = hf_rule_has_expert(r);
    Planned p;
    if (r.derive != HfDerive::None) {
      DF_ASSIGN(HfDerivedPlan d, hf_plan_derived(f, r, layer));
      if (d.info.name.empty()) return {};  // an optional tensor the folder does not have
      for (const std::string& in : d.inputs) used.insert(in);
      m.tensors.push_back(d.info);
      p.derived = std::move(d.reader);
      planned.push_back(std::move(p));
      return {};
    }
    // Compressed-tensors MXFP4 (U8 codes X.weight_packed with U8 E8M0 X.weight_scale);
    // INT4 pack-quantized uses the same names with I32 codes and goes to find_hf_weight.
    if (auto pk = f.tensors.find(hf_name_expand(r.hf, layer, 0) + "_packed");
        pk != f.tensors.end() && pk->second.dtype == "U8") {
      for (int e = 0; e < (stacked ? n_expert : 1); ++e) {
        const std::string hn = hf_name_expand(r.hf, layer, e);
        DF_ASSIGN(const HfTensor* scale, find_mxfp4_scale(f, hn));
        auto it = f.tensors.find(hn + "_packed");
        if (!scale || it == f.tensors.end())
          return make_error("{}: tensor '{}' is missing (needed for {})", loc, hn + "_packed",
                            hf_name_expand(r.gguf, layer, -1));
        const HfTensor& t = it->second;
        if (!p.mx_codes.empty() && (t.dtype != p.mx_codes[0]->dtype || t.shape != p.mx_codes[0]->shape))
          return make_error("{}: expert tensor '{}' is {} {} but expert 0's is {} {}", loc, t.name, t.dtype,
                            nlohmann::json(t.shape).dump(), p.mx_codes[0]->dtype,
                            nlohmann::json(p.mx_codes[0]->shape).dump());
        p.mx_codes.push_back(&t);
        p.mx_scales.push_back(scale);
        used.insert(t.name);
        used.insert(scale->name);
      }
      DF_TRY(add_mxfp4_info(f, r, layer, stacked ? n_expert : 0, *p.mx_codes[0], *p.mx_scales[0], &m));
      planned.push_back(std::move(p));
      return {};
    }
    p.part = r.part;
    for (int e = 0; e < (stacked ? n_expert : 1); ++e) {
      const std::string hn = hf_name_expand(r.hf, layer, e);
      bool found = false;
      DF_ASSIGN(HfWeight w, find_hf_weight(f, hn, &used, &found));
      if (!found) {
        if (r.optional && !stacked) return {};
        return make_error("{}: tensor '{}' is missing (needed for {})", loc, hn, hf_name_expand(r.gguf, layer, -1));
      }
      if (!p.inputs.empty()) {
        const HfWeight& w0 = p.inputs[0];
        if (w.enc != w0.enc || w.data->dtype != w0.data->dtype || w.shape != w0.shape)
          return make_error("{}: expert tensor '{}' is {} {} but expert 0's is {} {}", loc, w.data->name, w.data->dtype,
                            nlohmann::json(w.shape).dump(), w0.data->dtype, nlohmann::json(w0.shape).dump());
      }
      p.inputs.push_back(std::move(w));
    }
    const HfWeight& w0 = p.inputs[0];
    const std::vector<int64_t>& shape = w0.shape;
    GGUFTensorInfo ti;
    ti.name = hf_name_expand(r.gguf, layer, -1);
    const bool rope = r.part == HfPart::RopeQ || r.part == HfPart::RopeK;
    if (rope) {
      const char* key = r.part == HfPart::RopeQ ? ".attention.head_count" : ".attention.head_count_kv";
      p.rope_heads = m.int_or(A + key, 0);
      const int64_t h = p.rope_heads;
      if (stacked || shape.size() != 2 || h <= 0 || shape[0] % h != 0 || (shape[0] / h) % 2 != 0)
        return make_error("{}: tensor '{}' has shape {}; its rows must be {} heads ({}{}) of an even number of rows "
                          "each, for the RoPE pair permutation",
                          loc, w0.data->name, nlohmann::json(shape).dump(), h, A, key);
    }
    if (r.part == HfPart::Whole || rope) {
      const size_t nd = shape.size() + (stacked ? 1 : 0);
      if (shape.empty() || nd > size_t(kMaxDims))
        return make_error("{}: tensor '{}' has {} dimensions", loc, w0.data->name, shape.size());
      ti.n_dims = uint32_t(nd);
      for (size_t d = 0; d < shape.size(); ++d) ti.ne[d] = shape[shape.size() - 1 - d];
      if (stacked) ti.ne[shape.size()] = n_expert;
      ti.type = (shape.size() == 1 || r.f32) ? DType::F32 : w0.plain;
      if (w0.enc != HfEncoding::Plain && ti.type != DType::BF16)
        return make_error("{}: tensor '{}' is quantized, but {} is stored F32 (no recipe)", loc, w0.data->name, ti.name);
    } else {
      if (stacked || shape.size() != 2 || mla_h <= 0 || mla_dn <= 0 || mla_dv <= 0 ||
          shape[0] != mla_h * (mla_dn + mla_dv))
        return make_error("{}: tensor '{}' has shape {}; MLA's kv_b_proj is [{} heads x ({} + {}), kv_lora_rank]",
                          loc, w0.data->name, nlohmann::json(shape).dump(), mla_h, mla_dn, mla_dv);
      ti.n_dims = 3;
      const int64_t r_kv = shape[1];
      const bool k = r.part == HfPart::KvbK;
      ti.ne[0] = k ? mla_dn : r_kv;
      ti.ne[1] = k ? r_kv : mla_dv;
      ti.ne[2] = mla_h;
      ti.type = r.f32 ? DType::F32 : w0.plain;
    }
    m.tensors.push_back(ti);
    planned.push_back(std::move(p));
    return {};
  };
  size_t first_layer_rule = arch.rules.size();
  for (size_t i = 0; i < arch.rules.size(); ++i)
    if (hf_rule_has_layer(arch.rules[i])) {
      first_layer_rule = std::min(first_layer_rule, i);
    }
  for (size_t i = 0; i < first_layer_rule; ++i) DF_TRY(add(arch.rules[i], -1));
  for (int L = 0; L < n_layer; ++L) {
    const unsigned kind = arch.layer_kind ? arch.layer_kind(f.config, L) : ~0u;
    for (const HfNameRule& r : arch.rules)
      if (hf_rule_has_layer(r) && (r.kind & kind) == r.kind) DF_TRY(add(r, L));
  }
  for (size_t i = first_layer_rule; i < arch.rules.size(); ++i)
    if (!hf_rule_has_layer(arch.rules[i])) DF_TRY(add(arch.rules[i], -1));
  for (const auto& [name, t] : f.tensors)
    if (!used.count(name) && !(arch.skip_tensor && arch.skip_tensor(f.config, name)))
      return make_error("{}: tensor '{}' ({}) is not part of the {} model deltafin runs", loc, name,
                        f.shard_files[size_t(t.shard)], arch.model_type);

  m.set("general.file_type", GGUFValue::u32(file_type_of(m)));
  v->header_ = serialize_gguf_header(m);
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const GGUFTensorInfo& ti = m.tensors[i];
    Planned& p = planned[i];
    const uint64_t begin = m.data_offset + ti.offset;
    uint64_t out = begin;
    v->size_ = std::max(v->size_, m.data_offset + ti.offset + ti.bytes);
    if (p.derived) {
      Piece pc;
      pc.out_off = out;
      pc.out_len = ti.bytes;
      pc.op = Op::Derived;
      pc.aux = v->derived_.size();
      v->derived_.push_back(std::move(p.derived));
      v->pieces_.push_back(pc);
      continue;
    }
    if (!p.mx_codes.empty()) {
      const uint64_t per = ti.bytes / p.mx_codes.size();
      for (size_t e = 0; e < p.mx_codes.size(); ++e) {
        const HfTensor &codes = *p.mx_codes[e], &scales = *p.mx_scales[e];
        if (codes.bytes != per / 17 * 16 || scales.bytes != per / 17)
          return make_error("{}: '{}' ({} bytes) and '{}' ({} bytes) do not make {} bytes of MXFP4 blocks", loc,
                            codes.name, codes.bytes, scales.name, scales.bytes, per);
        Piece pc;
        pc.out_off = out + e * per;
        pc.out_len = per;
        pc.op = Op::Mxfp4Ct;
        pc.shard = codes.shard;
        pc.in_off = codes.offset;
        pc.shard2 = scales.shard;
        pc.in_off2 = scales.offset;
        v->pieces_.push_back(pc);
      }
      continue;
    }
    const uint64_t esz = dtype_size(ti.type);
    // One piece: `len` output bytes from `w`, its rows [row0, row0 + rows) when decoded.
    auto piece = [&](const HfWeight& w, uint64_t len, uint64_t row0, uint64_t rows, bool transpose,
                     bool rope_pairs = false) -> Status {
      Piece pc;
      pc.out_off = out;
      pc.out_len = len;
      pc.shard = w.data->shard;
      pc.in_off = w.data->offset;
      const uint64_t cols = w.shape.size() == 2 ? uint64_t(w.shape[1]) : 0;
      if (w.enc != HfEncoding::Plain || transpose || rope_pairs) {
        pc.op = w.enc == HfEncoding::Fp8 ? Op::Fp8 : w.enc == HfEncoding::Int4 ? Op::Int4 : Op::Copy;
        if (w.scale) {
          pc.scale_shard = w.scale->shard;
          pc.scale_off = w.scale->offset;
        }
        pc.row0 = uint32_t(row0);
        pc.rows = uint32_t(rows);
        pc.cols = uint32_t(cols);
        pc.elem = uint8_t(esz);
        pc.transpose = transpose;
        pc.rope_pairs = rope_pairs;
        if (transpose && ti.type == DType::F32 && (w.plain == DType::BF16 || w.plain == DType::F16)) {
          pc.elem = 2;
          pc.widen = w.plain == DType::BF16 ? 1 : 2;
        }
        if (len != rows * cols * esz || (ti.type != w.plain && pc.widen == 0))
          return make_error("{}: tensor '{}': {} bytes of {} where {} rows of {} are decoded", loc, w.data->name, len,
                            dtype_name(ti.type), rows, cols);
      } else {
        DType from = w.plain;
        pc.in_off += row0 * cols * dtype_size(from);
        pc.op = ti.type == from ? Op::Copy : from == DType::BF16 ? Op::WidenBF16 : Op::WidenF16;
        if (ti.type != from && ti.type != DType::F32)
          return make_error("{}: tensor '{}': no recipe from {} to {}", loc, w.data->name, dtype_name(from),
                            dtype_name(ti.type));
        const uint64_t in_expect = pc.op == Op::Copy ? len : len / 2;
        const uint64_t in_have = rows ? rows * cols * dtype_size(from) : w.data->bytes;
        if (in_have != in_expect || in_have > w.data->bytes)
          return make_error("{}: tensor '{}': {} bytes where {} are needed", loc, w.data->name, in_have, in_expect);
      }
      v->pieces_.push_back(pc);
      out += len;
      return {};
    };
    if (p.part == HfPart::Whole) {
      const uint64_t per = ti.bytes / p.inputs.size();
      for (const HfWeight& w : p.inputs) {
        const bool two_d = w.shape.size() == 2;
        DF_TRY(piece(w, per, 0, w.enc == HfEncoding::Plain || !two_d ? 0 : uint64_t(w.shape[0]), false));
      }
    } else if (p.rope_heads > 0) {
      // One piece per head, its rows permuted.
      const HfWeight& w = p.inputs[0];
      const uint64_t d = uint64_t(w.shape[0] / p.rope_heads), cols = uint64_t(w.shape[1]);
      for (int64_t h = 0; h < p.rope_heads; ++h)
        DF_TRY(piece(w, d * cols * esz, uint64_t(h) * d, d, false, /*rope_pairs=*/true));
    } else {
      // One piece per head: attn_k_b's block transposed, attn_v_b's as it is.
      const bool k = p.part == HfPart::KvbK;
      const HfWeight& w = p.inputs[0];
      const uint64_t rows = uint64_t(k ? mla_dn : mla_dv), r_kv = uint64_t(w.shape[1]);
      for (int64_t h = 0; h < mla_h; ++h)
        DF_TRY(piece(w, rows * r_kv * esz, uint64_t(h * (mla_dn + mla_dv) + (k ? 0 : mla_dn)), rows, k));
    }
    if (out != begin + ti.bytes)
      return make_error("{}: internal: {} pieces cover {} of {} bytes", loc, ti.name, out - begin, ti.bytes);
    v->size_ = std::max(v->size_, m.data_offset + ti.offset + ti.bytes);
  }
  v->size_ = std::max<uint64_t>(v->size_, v->header_.size());
  std::sort(v->pieces_.begin(), v->pieces_.end(), [](const Piece& a, const Piece& b) { return a.out_off < b.out_off; });
  return v;
}

Status HfGgufSource::read_piece(const Piece& p, uint64_t off, char* dst, size_t n) {
  ByteSource& src = *folder_->shards[size_t(p.shard)];
  const uint64_t rel = off - p.out_off;
  if (p.decoded()) return read_decoded_piece(p, src, *folder_->shards[size_t(p.scale_shard)], rel, dst, n);
  if (p.op == Op::Copy) return src.read_at(p.in_off + rel, dst, n);
  if (p.op == Op::Derived) return derived_[p.aux]->read(rel, dst, n);
  if (p.op == Op::Mxfp4Ct) return read_mxfp4_ct(src, *folder_->shards[size_t(p.shard2)], p.in_off, p.in_off2, rel, dst, n);
  // Widening: 2 input bytes per 4 output bytes; read the covering elements in
  // bounded chunks and copy out the asked-for bytes.
  constexpr uint64_t kChunk = 1 << 18;  // elements
  uint64_t e = rel / 4;
  const uint64_t e_end = (rel + n + 3) / 4;
  std::vector<uint16_t> in(size_t(std::min(kChunk, e_end - e)));
  std::vector<float> outf(in.size());
  uint64_t pos = rel;  // next output byte, relative to the piece
  while (e < e_end) {
    const uint64_t k = std::min(kChunk, e_end - e);
    DF_TRY(src.read_at(p.in_off + e * 2, in.data(), size_t(k * 2)));
    for (uint64_t i = 0; i < k; ++i)
      outf[i] = p.op == Op::WidenBF16 ? kern::bf16_to_f32(in[i]) : kern::fp16_to_f32(in[i]);
    const uint64_t chunk_lo = e * 4, chunk_hi = (e + k) * 4;
    const uint64_t hi = std::min(chunk_hi, rel + n);
    std::memcpy(dst + (pos - rel), reinterpret_cast<const char*>(outf.data()) + (pos - chunk_lo), size_t(hi - pos));
    pos = hi;
    e += k;
  }
  return {};
}

bool HfGgufSource::locate(uint64_t off, uint64_t n, ShardSpan* at) const {
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), off,
                             [](uint64_t o, const Piece& p) { return o < p.out_off; });
  if (it == pieces_.begin()) return false;
  const Piece& p = *std::prev(it);
  if (off + n > p.out_off + p.out_len) return false;
  *at = {};
  at->shard = p.shard;
  if (p.op == Op::Copy && !p.decoded()) {
    at->offset = p.in_off + (off - p.out_off);
    return true;
  }
  // MXFP4: 16 bytes of codes and 1 of scale per 17-byte block, so a whole tensor's
  // codes and scales side by side are exactly its blocks' bytes.
  if (p.op != Op::Mxfp4Ct || off != p.out_off || n != p.out_len || p.shard2 != p.shard) return false;
  const uint64_t codes = n / 17 * 16, scales = n / 17;
  at->mxfp4 = true;
  if (p.in_off2 == p.in_off + codes) {
    at->offset = p.in_off;
    at->scales_at = codes;
  } else if (p.in_off == p.in_off2 + scales) {
    at->offset = p.in_off2;
    at->codes_at = scales;
  } else {
    return false;
  }
  return true;
}

void HfGgufSource::unpack(const ShardSpan& at, const char* src, uint64_t n, char* dst) {
  if (!at.mxfp4) {
    std::memcpy(dst, src, n);
    return;
  }
  const auto* s = reinterpret_cast<const uint8_t*>(src);
  mxfp4_ct_to_gguf(s + at.codes_at, s + at.scales_at, 1, int64_t(n / 17 * 32), reinterpret_cast<uint8_t*>(dst));
}

Status HfGgufSource::read_at(uint64_t off, void* dst_v, size_t n) {
  if (off > size_ || n > size_ - off)
    return make_error("{}: read of {} bytes at offset {} is past the end ({} bytes)", name_, n, off, size_);
  char* dst = static_cast<char*>(dst_v);
  while (n > 0) {
    size_t k;
    if (off < header_.size()) {
      k = size_t(std::min<uint64_t>(n, header_.size() - off));
      std::memcpy(dst, header_.data() + off, k);
    } else {
      auto it = std::upper_bound(pieces_.begin(), pieces_.end(), off,
                                 [](uint64_t o, const Piece& p) { return o < p.out_off; });
      if (it != pieces_.begin() && off < std::prev(it)->out_off + std::prev(it)->out_len) {
        const Piece& p = *std::prev(it);
        k = size_t(std::min<uint64_t>(n, p.out_off + p.out_len - off));
        DF_TRY(read_piece(p, off, dst, k));
      } else {  // alignment padding
        const uint64_t next = it == pieces_.end() ? size_ : it->out_off;
        k = size_t(std::min<uint64_t>(n, next - off));
        std::memset(dst, 0, k);
      }
    }
    dst += k;
    off += k;
    n -= k;
  }
  return {};
}

Result<std::unique_ptr<ModelFile>> open_hf_model(const std::string& location, const SourceOpener& files) {
  SourceOpener view = [files](const std::string& loc) -> Result<std::unique_ptr<ByteSource>> {
    DF_ASSIGN(std::shared_ptr<HfFolder> folder, open_hf_folder(loc, files));
    DF_ASSIGN(std::unique_ptr<HfGgufSource> src, HfGgufSource::build(std::move(folder)));
    return std::unique_ptr<ByteSource>(std::move(src));
  };
  return ModelFile::open(location, view);
}

Result<std::unique_ptr<ModelFile>> open_local_hf_model(const std::string& dir) {
  return open_hf_model(dir, hf_local_opener(dir));
}

const HfGgufSource* hf_source_of(ModelFile& file) {
  return file.shard_count() == 1 ? dynamic_cast<const HfGgufSource*>(&file.source(0)) : nullptr;
}

}  // namespace deltafin
