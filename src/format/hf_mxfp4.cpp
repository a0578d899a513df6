// Compressed-tensors MXFP4 in a folder's GGUF view (hf_mxfp4.h).
#include "format/hf_mxfp4.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/hf_codecs.h"

namespace deltafin {

Result<const HfTensor*> find_mxfp4_scale(const HfFolder& f, const std::string& weight_name) {
  auto packed = f.tensors.find(weight_name + "_packed");
  if (packed == f.tensors.end()) return static_cast<const HfTensor*>(nullptr);
  const std::string sname = weight_name + "_scale";
  auto scale = f.tensors.find(sname);
  if (scale == f.tensors.end())
    return make_error("{}: tensor '{}' is missing: '{}' (compressed-tensors MXFP4 codes) needs its E8M0 scales",
                      f.location, sname, packed->first);
  if (packed->second.dtype != "U8" || scale->second.dtype != "U8")
    return make_error("{}: '{}' is {} and '{}' {}; compressed-tensors MXFP4 (mxfp4-pack-quantized) is U8 and U8",
                      f.location, packed->first, packed->second.dtype, sname, scale->second.dtype);
  if (auto q = f.config.find("quantization_config"); q != f.config.end() && q->is_object()) {
    const std::string fmt = q->value("format", std::string());
    if (!fmt.empty() && fmt != "mxfp4-pack-quantized")
      return make_error("{}: '{}' is U8 codes but quantization_config.format is '{}', not mxfp4-pack-quantized",
                        f.location, packed->first, fmt);
  }
  return &scale->second;
}

Status add_mxfp4_info(const HfFolder& f, const HfNameRule& r, int layer, int n_expert, const HfTensor& codes,
                      const HfTensor& scales, GGUFFile* m) {
  if (codes.shape.size() != 2 || scales.shape.size() != 2)
    return make_error("{}: '{}' and '{}' must be 2-D (rows, packed columns)", f.location, codes.name, scales.name);
  const int64_t rows = codes.shape[0], cols = codes.shape[1] * 2;
  if (cols % 32 != 0 || scales.shape != std::vector<int64_t>{rows, cols / 32})
    return make_error("{}: '{}' is [{}, {}] beside '{}' [{}, {}]: {} columns need [{}, {}] scales, one per 32",
                      f.location, scales.name, scales.shape[0], scales.shape[1], codes.name, rows, codes.shape[1],
                      cols, rows, cols / 32);
  GGUFTensorInfo ti;
  ti.name = hf_name_expand(r.gguf, layer, -1);
  ti.type = DType::MXFP4;
  ti.n_dims = n_expert > 0 ? 3 : 2;
  ti.ne[0] = cols;
  ti.ne[1] = rows;
  if (n_expert > 0) ti.ne[2] = n_expert;
  m->tensors.push_back(ti);
  return {};
}

Status read_mxfp4_ct(ByteSource& codes, ByteSource& scales, uint64_t codes_off, uint64_t scales_off, uint64_t rel,
                     char* dst, size_t n) {
  constexpr uint64_t kBlock = 17, kChunk = 1 << 14;  // blocks per read
  uint64_t b = rel / kBlock;
  const uint64_t b_end = (rel + n + kBlock - 1) / kBlock;
  std::vector<uint8_t> q(size_t(std::min(kChunk, b_end - b) * 16)), e(q.size() / 16), out(e.size() * kBlock);
  uint64_t pos = rel;
  while (b < b_end) {
    const uint64_t k = std::min(kChunk, b_end - b);
    DF_TRY(codes.read_at(codes_off + b * 16, q.data(), size_t(k * 16)));
    DF_TRY(scales.read_at(scales_off + b, e.data(), size_t(k)));
    mxfp4_ct_to_gguf(q.data(), e.data(), 1, int64_t(k * 32), out.data());
    const uint64_t hi = std::min((b + k) * kBlock, rel + n);
    std::memcpy(dst + (pos - rel), out.data() + (pos - b * kBlock), size_t(hi - pos));
    pos = hi;
    b += k;
  }
  return {};
}

}  // namespace deltafin
