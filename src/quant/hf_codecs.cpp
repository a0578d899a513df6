// The published checkpoint encodings <-> GGUF types (see hf_codecs.h). The layouts,
// as compressed-tensors, vLLM and llama.cpp's convert_hf_to_gguf.py read them:
//   compressed-tensors MXFP4: byte i of a row holds elements 2i (low nibble) and 2i+1
//     (high nibble); a code is sign (bit 3) and an E2M1 magnitude (bits 0..2); the
//     scale byte is E8M0, 2^(e - 127), one per 32 consecutive elements of a row.
//     GGUF MXFP4 holds the same codes and byte, element e (< 16) of a block in the low
//     nibble of qs[e] and element e + 16 in its high nibble: a lossless reshuffle.
//   FP8: element (r, c) is e4m3(w) * scale_inv[r / 128][c / 128] (the last block row
//     and column are partial when rows or cols are not multiples of 128); the converter
//     forms that product in F32 and rounds it to BF16 to nearest even (NaN kept quiet).
//   INT4: int32 word j of a row holds elements 8j..8j+7, element 8j+k in bits 4k..4k+3,
//     stored as q + 8 (symmetric, no zero point); value (code - 8) * scale of its group
//     of 32, formed in F32 and rounded to BF16 as above.
#include "quant/hf_codecs.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "kernels/types.h"

namespace deltafin {
namespace {

constexpr int64_t kFp8Block = 128;
constexpr float kE4M3Max = 448.0f;

// E4M3 (the "fn" variant: no infinities, S.1111.111 is NaN) -> F32. NaN decodes as
// torch's float8_e4m3fn conversion does (sign | 0x7ff00000), so that the product and
// its BF16 rounding carry the same NaN bits as the converter's.
float e4m3_to_f32(uint8_t b) {
  uint32_t sign = uint32_t(b & 0x80u) << 24;
  uint32_t exp = (b >> 3) & 15u, man = b & 7u;
  if (exp == 15 && man == 7) return std::bit_cast<float>(sign | 0x7ff00000u);
  float mag = exp == 0 ? float(man) * 0x1p-9f                              // man/8 * 2^-6
                       : std::bit_cast<float>(((exp + 120u) << 23) | (man << 20));
  return sign ? -mag : mag;
}

struct E4M3Table {
  float v[256];
  E4M3Table() {
    for (int i = 0; i < 256; ++i) v[i] = e4m3_to_f32(uint8_t(i));
  }
};
const E4M3Table& e4m3_table() {
  static const E4M3Table t;
  return t;
}

// Nearest E4M3 code to x (ties to the even code), saturating at +-448; x finite.
uint8_t f32_to_e4m3(float x) {
  const float* v = e4m3_table().v;
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  float a = std::min(std::fabs(x), kE4M3Max);
  // Codes 0..126 are the non-negative finite values in increasing order.
  int hi = int(std::lower_bound(v, v + 127, a) - v);  // first code with v >= a
  if (hi == 0) return sign;
  int lo = hi - 1;
  float dlo = a - v[lo], dhi = v[hi] - a;
  int code = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
  return uint8_t(sign | code);
}

inline float bf16_bits_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// F32 -> BF16 the way the converter writes it (gguf-py's BF16 quantizer, which is
// ggml_compute_fp32_to_bf16): round to nearest even, NaN kept quiet. One row at a time
// through the type table.
void row_to_bf16(const float* x, uint16_t* out, int64_t n) {
  static const FromFloatFn to_bf16 = type_traits(DType::BF16)->from_float;
  to_bf16(x, out, n);
}

}  // namespace

void mxfp4_ct_to_gguf(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols, uint8_t* blocks) {
  const int64_t nb = cols / 32;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = packed + r * (cols / 2) + b * 16;
      uint8_t* blk = blocks + (r * nb + b) * 17;
      blk[0] = scales[r * nb + b];
      // Element e sits in p[e / 2], low nibble when e is even.
      auto code = [p](int e) { return uint8_t((p[e >> 1] >> ((e & 1) * 4)) & 15); };
      for (int e = 0; e < 16; ++e) blk[1 + e] = uint8_t(code(e) | (code(e + 16) << 4));
    }
  }
}

void mxfp4_gguf_to_ct(const uint8_t* blocks, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales) {
  const int64_t nb = cols / 32;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = blocks + (r * nb + b) * 17;
      uint8_t* p = packed + r * (cols / 2) + b * 16;
      scales[r * nb + b] = blk[0];
      // Element e is the low nibble of qs[e] (e < 16) or the high nibble of qs[e - 16].
      auto code = [blk](int e) { return uint8_t(e < 16 ? blk[1 + e] & 15 : blk[1 + e - 16] >> 4); };
      for (int i = 0; i < 16; ++i) p[i] = uint8_t(code(2 * i) | (code(2 * i + 1) << 4));
    }
  }
}

void fp8_block_to_bf16(const uint8_t* w, const float* scale_inv, int64_t rows, int64_t cols, uint16_t* out) {
  const float* v = e4m3_table().v;
  const int64_t sc_cols = (cols + kFp8Block - 1) / kFp8Block;
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = scale_inv + (r / kFp8Block) * sc_cols;
    const uint8_t* wr = w + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[size_t(c)] = v[wr[c]] * s[c / kFp8Block];
    row_to_bf16(row.data(), out + r * cols, cols);
  }
}

void f32_to_fp8_block(const float* x, int64_t rows, int64_t cols, uint8_t* w, float* scale_inv) {
  const int64_t sc_rows = (rows + kFp8Block - 1) / kFp8Block, sc_cols = (cols + kFp8Block - 1) / kFp8Block;
  for (int64_t br = 0; br < sc_rows; ++br) {
    const int64_t r0 = br * kFp8Block, r1 = std::min(rows, r0 + kFp8Block);
    for (int64_t bc = 0; bc < sc_cols; ++bc) {
      const int64_t c0 = bc * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
      float amax = 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
      const float s = amax > 0 ? amax / kE4M3Max : 1.0f;
      scale_inv[br * sc_cols + bc] = s;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) w[r * cols + c] = f32_to_e4m3(x[r * cols + c] / s);
    }
  }
}

void int4_pack_to_bf16(const int32_t* packed, const uint16_t* scale_bf16, int64_t rows, int64_t cols, uint16_t* out) {
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* pr = packed + r * (cols / 8);
    const uint16_t* sr = scale_bf16 + r * (cols / 32);
    for (int64_t c = 0; c < cols; ++c) {
      const int code = int((uint32_t(pr[c / 8]) >> (4 * (c % 8))) & 15u);
      row[size_t(c)] = float(code - 8) * bf16_bits_to_f32(sr[c / 32]);
    }
    row_to_bf16(row.data(), out + r * cols, cols);
  }
}

void f32_to_int4_pack(const float* x, int64_t rows, int64_t cols, int32_t* packed, uint16_t* scale_bf16) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    uint32_t* pr = reinterpret_cast<uint32_t*>(packed + r * (cols / 8));
    std::fill(pr, pr + cols / 8, 0u);
    for (int64_t g = 0; g < cols / 32; ++g) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xr[g * 32 + i]));
      // compressed-tensors' symmetric scale: the largest magnitude over half the range
      // of 16 codes; stored as BF16, and the codes computed against the stored value.
      const float scale = amax / 7.5f;
      uint16_t sb;
      row_to_bf16(&scale, &sb, 1);
      scale_bf16[r * (cols / 32) + g] = sb;
      const float s = bf16_bits_to_f32(sb);
      for (int i = 0; i < 32; ++i) {
        const int64_t c = g * 32 + i;
        const float q = s > 0 ? std::nearbyint(xr[c] / s) : 0.0f;
        const int code = int(std::clamp(q, -8.0f, 7.0f)) + 8;
        pr[c / 8] |= uint32_t(code) << (4 * (c % 8));
      }
    }
  }
}

}  // namespace deltafin
