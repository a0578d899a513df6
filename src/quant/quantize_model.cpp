#include "quant/quantize_model.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "format/gguf_writer.h"
#include "format/hf_folder.h"
#include "format/hf_gguf_source.h"
#include "format/model_file.h"
#include "kernels/importance.h"
#include "kernels/types.h"
#include "quant/dynamic_mix.h"
#include "quant/imatrix.h"

namespace deltafin {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool fits(DType t, int64_t cols) {
  BlockGeometry g = block_geometry(t);
  return g.block_elems && cols % g.block_elems == 0;
}

// llama_ftype numbers (llama.h) for files mostly of one type; -1 if none.
int64_t file_type_of(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q8_0: return 7;
    case DType::Q2_K: return 10;
    case DType::Q3_K: return 11;  // Q3_K_S
    case DType::Q4_K: return 14;  // Q4_K_S
    case DType::Q5_K: return 16;  // Q5_K_S
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
    default: return -1;
  }
}

struct Mix {
  const char* name;
  DType base;
  int64_t file_type;  // llama_ftype
};
constexpr Mix kMixes[] = {{"Q2_K_S", DType::Q2_K, 21}, {"Q3_K_S", DType::Q3_K, 11}, {"Q3_K_M", DType::Q3_K, 12},
                          {"Q3_K_L", DType::Q3_K, 13}, {"Q4_K_S", DType::Q4_K, 14}, {"Q4_K_M", DType::Q4_K, 15},
                          {"Q5_K_S", DType::Q5_K, 16}, {"Q5_K_M", DType::Q5_K, 17}, {"MXFP4_MOE", DType::Q8_0, 38}};

// Types a target may name directly: those deltafin computes and can quantize to
// (not the activation-only types Q8_K and Q8_1, which llama.cpp cannot load as weights).
std::vector<DType> direct_types() {
  std::vector<DType> v;
  for (uint32_t i = 0; i < kDTypeCount; ++i) {
    const TypeTraits* tt = type_traits_ref(DType(i));
    if (tt && tt->from_float && DType(i) != DType::Q8_K && DType(i) != DType::Q8_1) v.push_back(DType(i));
  }
  return v;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer of "blk.N.…", or -1.
int layer_of(const std::string& name) {
  int layer = -1, used = 0;
  if (std::sscanf(name.c_str(), "blk.%d.%n", &layer, &used) == 1 && used > 0) return layer;
  return -1;
}

// What llama_tensor_get_type picks for a matrix in a mix (no importance matrix).
DType mix_type(const std::string& mix, const std::string& name, int n_layer, DType base) {
  const auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (mix == "MXFP4_MOE") return has("_exps.weight") ? DType::MXFP4 : DType::Q8_0;
  if (name == "output.weight") return DType::Q6_K;
  const int i = layer_of(name), n = std::max(n_layer, 1);
  if (has("attn_v.weight") && i >= 0) {
    if (mix == "Q3_K_M") return i < 2 ? DType::Q5_K : DType::Q4_K;
    if (mix == "Q3_K_L") return DType::Q5_K;
    if (mix == "Q4_K_M" || mix == "Q5_K_M") return use_more_bits(i, n) ? DType::Q6_K : base;
    if (mix == "Q4_K_S") return i < 4 ? DType::Q5_K : base;
  }
  if (has("ffn_down") && i >= 0) {
    if (mix == "Q3_K_M") return i < n / 16 ? DType::Q5_K : use_more_bits(i, n) ? DType::Q4_K : base;
    if (mix == "Q3_K_L") return DType::Q5_K;
    if (mix == "Q4_K_M" || mix == "Q5_K_M") return use_more_bits(i, n) ? DType::Q6_K : base;
    if (mix == "Q4_K_S") return i < n / 8 ? DType::Q5_K : base;
  }
  if (has("attn_output.weight")) {
    if (mix == "Q3_K_M") return DType::Q4_K;
    if (mix == "Q3_K_L") return DType::Q5_K;
  }
  if (has("attn_qkv.weight")) {
    if (mix == "Q3_K_M" || mix == "Q3_K_L") return DType::Q4_K;
    if (mix == "Q4_K_M") return DType::Q5_K;
    if (mix == "Q5_K_M") return DType::Q6_K;
  }
  return base;
}

// The new type of a tensor; *fell_back when its rows do not fit the chosen type.
DType target_for(const GGUFTensorInfo& t, const QuantizeOptions& o, int n_layer, bool* fell_back) {
  *fell_back = false;
  const bool matrix = t.n_dims >= 2 && ends_with(t.name, ".weight") && !ends_with(t.name, "ffn_gate_inp.weight");
  if (!matrix || (o.keep_experts && t.name.find("_exps.") != std::string::npos)) return t.type;
  if (is_dynamic_mix(o.mix)) {
    const DType want = dynamic_mix_type(o.mix, t.name), got = dynamic_mix_fit(want, t.ne[0]);
    *fell_back = got != want;
    return got == DType::F32 ? t.type : got;
  }
  const DType want = o.mix.empty() ? o.type : mix_type(o.mix, t.name, n_layer, o.type);
  if (fits(want, t.ne[0])) return want;
  *fell_back = true;
  if (fits(o.fallback, t.ne[0])) return o.fallback;
  return t.type;
}

}  // namespace

std::string quantize_target_names() {
  std::string s;
  for (DType t : direct_types()) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  s += "; llama-quantize's mixes";
  for (const Mix& m : kMixes) s += std::string(&m == kMixes ? " " : ", ") + m.name;
  s += "; dynamic-quant mixes";
  for (const std::string& m : dynamic_mix_names()) s += " " + m;
  return s;
}

Status parse_quantize_target(const std::string& name, QuantizeOptions* opts) {
  std::string up = name;
  for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (is_dynamic_mix(up, &opts->mix)) {
    opts->type = DType::Q8_0;  // checked for a quantizer; every matrix's type comes from the mix
    return {};
  }
  for (const Mix& m : kMixes) {
    if (up == m.name) {
      opts->type = m.base;
      opts->mix = m.name;
      return {};
    }
  }
  DType t;
  if (dtype_from_name(up, &t)) {
    for (DType d : direct_types()) {
      if (d == t) {
        opts->type = t;
        opts->mix.clear();
        return {};
      }
    }
    return make_error("type '{}': deltafin cannot compute with {} yet, so it does not quantize to it; "
                      "choose one of: {}", name, dtype_name(t), quantize_target_names());
  }
  return make_error("unknown type '{}'; choose one of: {}", name, quantize_target_names());
}

Status quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& opts,
                      QuantizeReport* report) {
  // A Hugging Face folder is read as the GGUF it converts to (format/hf_gguf_source.h).
  DF_ASSIGN(auto model, is_local_hf_folder(in) ? open_local_hf_model(in) : ModelFile::open(in, local_file_opener()));
  return quantize_model(*model, out, opts, report);
}

Status quantize_model(ModelFile& model, const std::string& out, const QuantizeOptions& opts,
                      QuantizeReport* report) {
  const std::string& in = model.path();
  std::error_code ec;
  for (int s = 0; s < model.shard_count(); ++s)
    if (std::filesystem::equivalent(model.source(s).name(), out, ec))
      return make_error("quantize: output {} is the input file", out);
  if (!opts.mix.empty()) {
    QuantizeOptions check;
    if (!parse_quantize_target(opts.mix, &check).ok() || check.mix.empty())
      return make_error("quantize: unknown mix '{}'", opts.mix);
  }
  for (DType t : {opts.type, opts.fallback}) {
    const TypeTraits* tt = type_traits_ref(t);
    if (!tt || !tt->from_float)
      return make_error("quantize: no quantizer for type {}", dtype_name(t));
  }
  GGUFWriter w(out);
  GGUFFile& f = w.file();
  const GGUFFile& meta = model.meta();
  for (const auto& k : meta.keys)
    if (k.rfind("split.", 0) != 0 && k != "general.file_type") f.set(k, meta.kv.at(k));
  int64_t ft = file_type_of(opts.type);
  for (const Mix& m : kMixes)
    if (opts.mix == m.name) ft = m.file_type;
  if (is_dynamic_mix(opts.mix)) ft = dynamic_mix_file_type(opts.mix);
  if (ft >= 0) f.set("general.file_type", GGUFValue::u32(uint32_t(ft)));

  const int n_layer = int(meta.int_or(meta.string_or("general.architecture", "") + ".block_count", 0));
  // Directory in the input's order (all shards), each with its new type.
  std::vector<const TensorRef*> refs;
  std::vector<const ImatrixEntry*> imp;  // per tensor: its importances, or null
  QuantizeReport rep;
  for (int s = 0; s < model.shard_count(); ++s) {
    for (const auto& t : model.shard(s).tensors) {
      if (opts.core_only && t.name.find("_exps.") != std::string::npos) continue;
      const TensorRef* r = model.tensor(t.name);
      bool fell_back = false;
      DType to = target_for(t, opts, n_layer, &fell_back);
      if (to != t.type) {
        const TypeTraits* src = type_traits_ref(t.type);
        if (!src || !src->to_float)
          return make_error("quantize: {}: tensor {} has type {}, which cannot be read as floats", in, t.name,
                            dtype_name(t.type));
      }
      (to == t.type ? rep.kept : fell_back ? rep.fell_back : rep.converted)++;
      if (to != t.type) rep.types[std::string(dtype_name(to))]++;
      const ImatrixEntry* entry = nullptr;
      if (opts.imatrix && to != t.type && from_float_imp(to)) {
        DF_ASSIGN(entry, opts.imatrix->for_tensor(t.name, t.ne[0], t.ne[2] * t.ne[3]));
        (entry ? rep.imatrix_used : rep.imatrix_missing)++;
      }
      imp.push_back(entry);
      GGUFTensorInfo info = t;
      info.type = to;
      f.tensors.push_back(info);
      refs.push_back(r);
      rep.bytes_in += t.bytes;
    }
  }
  DF_TRY(w.begin());
  std::vector<uint8_t> src_buf;
  std::vector<float> row;
  std::vector<uint8_t> dst_row;
  for (size_t i = 0; i < refs.size(); ++i) {
    const GGUFTensorInfo& t = *refs[i]->info;
    const DType to = f.tensors[i].type;
    if (opts.headers_only) {
      const uint64_t n = f.tensors[i].bytes;
      DF_TRY(w.write_data(nullptr, n));
      rep.bytes_out += n;
      continue;
    }
    src_buf.resize(size_t(t.bytes));
    DF_TRY(model.read_tensor(*refs[i], src_buf.data()));
    if (to == t.type) {
      DF_TRY(w.write_data(src_buf.data(), src_buf.size()));
      rep.bytes_out += t.bytes;
      continue;
    }
    const int64_t cols = t.ne[0], rows = int64_t(t.n_elements() / uint64_t(cols));
    const uint64_t in_row = dtype_row_bytes(t.type, uint64_t(cols)), out_row = dtype_row_bytes(to, uint64_t(cols));
    row.resize(size_t(cols));
    dst_row.resize(size_t(out_row));
    const TypeTraits* src = type_traits_ref(t.type);
    const TypeTraits* dst = type_traits_ref(to);
    // Rows of matrix (expert) m are r / ne[1] == m; each weighs by its own vector.
    const ImatrixEntry* entry = imp[i];
    const FromFloatImpFn quantize_imp = from_float_imp(to);
    for (int64_t r = 0; r < rows; ++r) {
      src->to_float(src_buf.data() + uint64_t(r) * in_row, row.data(), cols);
      if (entry)
        quantize_imp(row.data(), dst_row.data(), cols, entry->values.data() + (r / t.ne[1]) * cols);
      else
        dst->from_float(row.data(), dst_row.data(), cols);
      DF_TRY(w.write_data(dst_row.data(), dst_row.size()));
    }
    rep.bytes_out += out_row * uint64_t(rows);
  }
  DF_TRY(w.finish());
  if (report) *report = rep;
  return {};
}

}  // namespace deltafin
