// The encodings of published Hugging Face checkpoints, to and from the GGUF types
// deltafin computes on. Pure functions over one tensor's bytes (row-major, rows of
// `cols` elements); no I/O.
//   MXFP4 (compressed-tensors mxfp4-pack-quantized): weight_packed U8 [rows, cols/2],
//     two E2M1 codes per byte, and weight_scale U8 [rows, cols/32], E8M0. Repacked
//     losslessly into GGUF MXFP4 blocks (one E8M0 byte + 16 bytes of nibbles each).
//   FP8 E4M3 (DeepSeek-V3, Kimi K2): weight F8_E4M3 [rows, cols] with
//     weight_scale_inv F32 [ceil(rows/128), ceil(cols/128)]; widened the way
//     llama.cpp's converter does (value * scale in F32, then to BF16).
//   INT4 (compressed-tensors pack-quantized, symmetric, group 32): weight_packed I32
//     [rows, cols/8], weight_scale BF16 [rows, cols/32]; widened the way llama.cpp's
//     converter does ((code - 8) * scale in F32, then to BF16: its dequant_packed, as
//     for Kimi K2 Thinking; a lossless Q4_0 repack was only ever a closed demo there).
// Bit layouts and rounding: hf_codecs.cpp's header comment.
// The encoders (the other direction) are for `synth --format hf`.
#pragma once
#include <cstdint>

namespace deltafin {

// compressed-tensors MXFP4 -> GGUF MXFP4 blocks (rows * cols/32 blocks of 17 bytes).
// cols % 32 == 0.
void mxfp4_ct_to_gguf(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols, uint8_t* blocks);
// GGUF MXFP4 blocks -> compressed-tensors packed codes and scales.
void mxfp4_gguf_to_ct(const uint8_t* blocks, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales);

// FP8 E4M3 with 128x128 block scales -> BF16 (uint16_t bits), as llama.cpp converts.
void fp8_block_to_bf16(const uint8_t* w, const float* scale_inv, int64_t rows, int64_t cols, uint16_t* out);
// F32 -> FP8 E4M3 codes and 128x128 block scale_inv (max |x| of a block maps to 448).
void f32_to_fp8_block(const float* x, int64_t rows, int64_t cols, uint8_t* w, float* scale_inv);

// compressed-tensors INT4 pack-quantized (group 32, symmetric) -> BF16, as llama.cpp
// converts. cols % 32 == 0.
void int4_pack_to_bf16(const int32_t* packed, const uint16_t* scale_bf16, int64_t rows, int64_t cols, uint16_t* out);
// F32 -> INT4 pack-quantized codes and BF16 group scales.
void f32_to_int4_pack(const float* x, int64_t rows, int64_t cols, int32_t* packed, uint16_t* scale_bf16);

}  // namespace deltafin
