#include "quant/quantize_model.h"

#include <filesystem>
#include <vector>

#include "format/gguf_writer.h"
#include "format/model_file.h"
#include "kernels/types.h"

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

DType target_for(const GGUFTensorInfo& t, const QuantizeOptions& o) {
  const bool matrix = t.n_dims >= 2 && ends_with(t.name, ".weight") && !ends_with(t.name, "ffn_gate_inp.weight");
  if (!matrix) return t.type;
  if (fits(o.type, t.ne[0])) return o.type;
  if (fits(o.fallback, t.ne[0])) return o.fallback;
  return t.type;
}

}  // namespace

Status quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& opts,
                      QuantizeReport* report) {
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec)) return make_error("quantize: output {} is the input file", out);
  for (DType t : {opts.type, opts.fallback}) {
    const TypeTraits* tt = type_traits_ref(t);
    if (!tt || !tt->from_float)
      return make_error("quantize: no quantizer for type {}", dtype_name(t));
  }
  DF_ASSIGN(auto model, ModelFile::open(in, local_file_opener()));
  GGUFWriter w(out);
  GGUFFile& f = w.file();
  const GGUFFile& meta = model->meta();
  for (const auto& k : meta.keys)
    if (k.rfind("split.", 0) != 0 && k != "general.file_type") f.set(k, meta.kv.at(k));
  if (int64_t ft = file_type_of(opts.type); ft >= 0) f.set("general.file_type", GGUFValue::u32(uint32_t(ft)));

  // Directory in the input's order (all shards), each with its new type.
  std::vector<const TensorRef*> refs;
  QuantizeReport rep;
  for (int s = 0; s < model->shard_count(); ++s) {
    for (const auto& t : model->shard(s).tensors) {
      const TensorRef* r = model->tensor(t.name);
      DType to = target_for(t, opts);
      if (to != t.type) {
        const TypeTraits* src = type_traits_ref(t.type);
        if (!src || !src->to_float)
          return make_error("quantize: {}: tensor {} has type {}, which cannot be read as floats", in, t.name,
                            dtype_name(t.type));
      }
      (to == t.type ? rep.kept : to == opts.type ? rep.converted : rep.fell_back)++;
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
    src_buf.resize(size_t(t.bytes));
    DF_TRY(model->read_tensor(*refs[i], src_buf.data()));
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
    for (int64_t r = 0; r < rows; ++r) {
      src->to_float(src_buf.data() + uint64_t(r) * in_row, row.data(), cols);
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
