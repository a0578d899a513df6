// AVX-512 (BW + VNNI) dot products of IQ2_S and IQ3_S against Q8_K. Each 512-bit
// vector covers two groups of 32 (64 consecutive values): the codebook points
// gathered with scalar loads, the 64 free sign bits loaded as the mask that negates
// the activations, maddubs forms pair products and vpdpwssd multiplies them by the
// odd scales (per 16 for IQ2_S, per 32 for IQ3_S) and accumulates. One float FMA per
// super-block, 1/8 (IQ2_S) at the end. IQ3_S decodes a group at a time in 256 bits.
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"

namespace deltafin::kern {
namespace {

// Groups 2c and 2c + 1 of an IQ2_S block: the points, sign mask and scales.
DF_ALWAYS_INLINE __m512i iq2s_pair(const BlockIQ2_S& b, int c, __mmask64* neg, __m512i* sc) {
  const uint64_t* grid = kIq2sGrid.data();
  int idx[8];
  DF_UNROLL
  for (int k = 0; k < 8; ++k) idx[k] = b.qs[8 * c + k] | (((b.qh[2 * c + k / 4] >> (2 * (k % 4))) & 3) << 8);
  uint64_t m;
  std::memcpy(&m, b.qs + 32 + 8 * c, 8);
  *neg = _cvtu64_mask64(m);
  *sc = group_scales_of_chunk(odd_scales16(b.scales), c);
  return _mm512_set_epi64(int64_t(grid[idx[7]]), int64_t(grid[idx[6]]), int64_t(grid[idx[5]]), int64_t(grid[idx[4]]),
                          int64_t(grid[idx[3]]), int64_t(grid[idx[2]]), int64_t(grid[idx[1]]), int64_t(grid[idx[0]]));
}

// Groups 2c and 2c + 1 of an IQ3_S block (scale byte c holds both codes) for batches:
// two groups' points as the decoder makes them (iq3s_points) joined, which measured
// faster than sixteen scalar loads inserted into one 512-bit vector (pp64 on Zen 5
// 225 -> 244-259 tok/s; a gather's latency had stalled the batches before).
DF_ALWAYS_INLINE __m512i iq3s_pair_loads(const BlockIQ3_S& b, int c, __mmask64* neg, __m512i* sc) {
  uint64_t m;
  std::memcpy(&m, b.signs + 8 * c, 8);
  *neg = _cvtu64_mask64(m);
  const int s = b.scales[c];
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * (s & 15) + 1))),
                           _mm256_set1_epi16(short(2 * (s >> 4) + 1)), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(iq3s_points(b, 2 * c)), iq3s_points(b, 2 * c + 1), 1);
}

// Decode: a group of 32 values in 256 bits (iq256_dot), its points as the AVX2
// kernel's (iq3s_points), its sign bits the mask that negates the activations, VNNI
// for the scales. Per (row, token) its eight int32 lanes sum the same values as
// iq512_dot's two halves folded (Fold256), so batch and decode agree bit for bit. Zen
// 5, qwen3-moe-mini tg64 75 -> 86 tok/s against 512-bit pairs of gathered points (the
// 512-bit pairs with scalar loads: 67).
DF_ALWAYS_INLINE __m256i iq3s_group256(const BlockIQ3_S& b, int ib, __mmask32* neg) {
  uint32_t m;
  std::memcpy(&m, b.signs + 4 * ib, 4);
  *neg = _cvtu32_mask32(m);
  return iq3s_points(b, ib);
}

template <int NR, int NT>
struct DotIq2s512 {
  static void run(int64_t n, float* out, const BlockIQ2_S* const* a, const BlockQ8_K* const* y) {
    iq512_dot<NR, NT, iq_d<BlockIQ2_S>, iq2s_pair>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq3s512 {
  static void run(int64_t n, float* out, const BlockIQ3_S* const* a, const BlockQ8_K* const* y) {
    if constexpr (NT >= 4)
      iq512_dot<NR, NT, iq_d<BlockIQ3_S>, iq3s_pair_loads, BlockIQ3_S, true>(n, out, a, y, 1.0f);
    else
      iq256_dot<NR, NT, true, __mmask32, iq_d<BlockIQ3_S>, iq3s_scales, iq3s_group256, add_group_masked>(n, out, a, y,
                                                                                                         1.0f);
  }
};

}  // namespace

void install_iq_s_avx512(TypeTraits* t) {
  install_iq_row<BlockIQ2_S, DotIq2s512>(t[uint32_t(DType::IQ2_S)], Isa::AVX512);
  install_iq_row<BlockIQ3_S, DotIq3s512>(t[uint32_t(DType::IQ3_S)], Isa::AVX512);
}

}  // namespace deltafin::kern
