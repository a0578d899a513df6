// Compressed-tensors MXFP4 tensors of a Hugging Face folder (mxfp4-pack-quantized:
// X.weight_packed U8 [rows, cols/2] and X.weight_scale U8 E8M0 [rows, cols/32] in
// place of X.weight) seen as GGUF MXFP4, the same codes and scale bytes reshuffled
// into 17-byte blocks (quant/hf_codecs.h), for the folder's GGUF view
// (format/hf_gguf_source.h).
#pragma once
#include <string>

#include "format/gguf.h"
#include "format/hf_arch.h"
#include "format/hf_folder.h"

namespace deltafin {

// For a dense weight name X.weight the folder lacks: X.weight_scale when the folder
// has X.weight_packed (U8) with it, nullptr when it has no X.weight_packed either.
// A packed tensor without its scale, or with other dtypes, is an error naming it.
Result<const HfTensor*> find_mxfp4_scale(const HfFolder& f, const std::string& weight_name);

// Appends GGUF tensor rule `r` at `layer` (MXFP4, ne {cols, rows}, and n_expert
// stacked when n_expert > 0) to `m` after checking the codes' and scales' shapes.
Status add_mxfp4_info(const HfFolder& f, const HfNameRule& r, int layer, int n_expert, const HfTensor& codes,
                      const HfTensor& scales, GGUFFile* m);

// Bytes [rel, rel + n) of one tensor's GGUF MXFP4 blocks, from its codes at
// `codes_off` in `codes` and its scales at `scales_off` in `scales` (bounded memory).
Status read_mxfp4_ct(ByteSource& codes, ByteSource& scales, uint64_t codes_off, uint64_t scales_off, uint64_t rel,
                     char* dst, size_t n);

}  // namespace deltafin
