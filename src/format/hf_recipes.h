// The encoded weights of published checkpoints in a folder's GGUF view
// (hf_gguf_source.h): finding a weight in whichever form the folder holds it (plain,
// FP8 E4M3 + weight_scale_inv, compressed-tensors INT4 weight_packed + weight_scale
// [+ weight_shape]), and reading any byte range of the BF16 llama.cpp's converter
// makes of it (quant/hf_codecs.h), a few rows at a time, so that a single expert's
// slice or a few bytes cost only the rows they touch.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "format/hf_arch.h"
#include "format/hf_folder.h"
#include "format/hf_gguf_source.h"

namespace deltafin {

// One weight of the model as the folder holds it.
struct HfWeight {
  HfEncoding enc = HfEncoding::Plain;
  const HfTensor* data = nullptr;   // X (plain), X.weight (FP8) or X.weight_packed (INT4)
  const HfTensor* scale = nullptr;  // X.weight_scale_inv (FP8) or X.weight_scale (INT4)
  std::vector<int64_t> shape;       // the weight's, outermost first
  DType plain = DType::F32;         // a plain weight's type; BF16 for FP8 and INT4 (what they widen to)
};

// Finds weight `name` in the folder in any encoding and adds the tensors it uses to
// *used; *found false when no form of it is there. Errors name the tensor: an FP8
// weight without its weight_scale_inv, scales of the wrong shape or dtype, a
// quantization_config this reader does not follow.
Result<HfWeight> find_hf_weight(const HfFolder& f, const std::string& name, std::set<std::string>* used,
                                bool* found);

// Bytes [rel, rel + n) of a decoded piece (Piece::decoded()).
Status read_decoded_piece(const HfGgufSource::Piece& p, ByteSource& data, ByteSource& scales, uint64_t rel, char* dst,
                          size_t n);

}  // namespace deltafin
