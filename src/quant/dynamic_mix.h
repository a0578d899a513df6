// Per-tensor type mixes shaped like the published low-bit "dynamic" GGUFs of Kimi
// K2/K3 and DeepSeek-V3/R1 (the files that fit a laptop): the routed experts, almost
// all of the bytes, in 1-3 bit types with their down projections one step higher;
// attention, the shared experts, the latent projections and the rest of the core
// kept at 4-6 bits; the leading dense layers' FFNs at Q8_0; the output head Q6_K.
//
//   IQ1_S_DYN    ~1.8 bits an expert weight: experts gate/up IQ1_S, down IQ2_XXS, core Q4_K
//   IQ2_XXS_DYN  ~2.2 bits: experts gate/up IQ2_XXS, down IQ3_XXS, core Q5_K
//   Q2_K_DYN     ~2.7 bits: experts gate/up Q2_K, down Q3_K, core Q6_K
//
// A matrix whose row length does not divide into the chosen type's blocks takes the
// type llama.cpp's quantizer falls back to (the 256-value types to IQ4_NL, Q4_K to
// Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), else F32. Used by `synth --mix` and `quantize`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace deltafin {

// The mix names, in order of size.
std::vector<std::string> dynamic_mix_names();
// True when `name` (case-insensitive) is one of them; *canonical gets its spelling.
bool is_dynamic_mix(const std::string& name, std::string* canonical = nullptr);
// The type `mix` gives the matrix `tensor` (a GGUF name: blk.N.ffn_down_exps.weight,
// output.weight ...) of `cols` values a row, before any fallback.
DType dynamic_mix_type(const std::string& mix, const std::string& tensor);
// llama.cpp's general.file_type for the mix: that of its experts' gate/up type
// (LLAMA_FTYPE_MOSTLY_IQ1_S ...); -1 for an unknown mix.
int64_t dynamic_mix_file_type(const std::string& mix);
// `want`, or llama.cpp's fallback when rows of `cols` values do not fit its blocks.
DType dynamic_mix_fit(DType want, int64_t cols);

}  // namespace deltafin
