// AVX-512 (BW + VNNI) dot products of IQ2_S and IQ3_S against Q8_K. Each 512-bit
// vector covers two groups of 32 (64 consecutive values): the codebook points
// gathered with scalar loads, the 64 free sign bits loaded as the mask that negates
// the activations, maddubs forms pair products and vpdpwssd multiplies them by the
// odd scales (per 16 for IQ2_S, per 32 for IQ3_S) and accumulates. One float FMA per
// super-block, 1/8 (IQ2_S) at the end.
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

// Groups 2c and 2c + 1 of an IQ3_S block (scale byte c holds both codes), with scalar
// index arithmetic and loads: for batches, where a gather's latency stalls their work.
DF_ALWAYS_INLINE __m512i iq3s_pair_loads(const BlockIQ3_S& b, int c, __mmask64* neg, __m512i* sc) {
  const uint32_t* grid = kIq3sGrid.data();
  int g[16];
  DF_UNROLL
  for (int k = 0; k < 16; ++k) g[k] = int(grid[b.qs[16 * c + k] | (((b.qh[2 * c + k / 8] >> (k % 8)) & 1) << 8)]);
  uint64_t m;
  std::memcpy(&m, b.signs + 8 * c, 8);
  *neg = _cvtu64_mask64(m);
  const int s = b.scales[c];
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * (s & 15) + 1))),
                           _mm256_set1_epi16(short(2 * (s >> 4) + 1)), 1);
  return _mm512_set_epi32(g[15], g[14], g[13], g[12], g[11], g[10], g[9], g[8], g[7], g[6], g[5], g[4], g[3], g[2], g[1],
                          g[0]);
}

// The same from one vector of the 16 indices and a dword gather of their points (decode).
DF_ALWAYS_INLINE __m512i iq3s_pair_gather(const BlockIQ3_S& b, int c, __mmask64* neg, __m512i* sc) {
  uint16_t h;
  std::memcpy(&h, b.qh + 2 * c, 2);
  const __m512i high = _mm512_and_si512(
      _mm512_srlv_epi32(_mm512_set1_epi32(h), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)),
      _mm512_set1_epi32(1));
  const __m512i low = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * c)));
  const __m512i g = _mm512_i32gather_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 8)), kIq3sGrid.data(), 4);
  uint64_t m;
  std::memcpy(&m, b.signs + 8 * c, 8);
  *neg = _cvtu64_mask64(m);
  const int s = b.scales[c];
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * (s & 15) + 1))),
                           _mm256_set1_epi16(short(2 * (s >> 4) + 1)), 1);
  return g;
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
    if constexpr (NT >= 4) iq512_dot<NR, NT, iq_d<BlockIQ3_S>, iq3s_pair_loads>(n, out, a, y, 1.0f);
    else iq512_dot<NR, NT, iq_d<BlockIQ3_S>, iq3s_pair_gather>(n, out, a, y, 1.0f);
  }
};

}  // namespace

void install_iq_s_avx512(TypeTraits* t) {
  install_iq_row<BlockIQ2_S, DotIq2s512>(t[uint32_t(DType::IQ2_S)], Isa::AVX512);
  install_iq_row<BlockIQ3_S, DotIq3s512>(t[uint32_t(DType::IQ3_S)], Isa::AVX512);
}

}  // namespace deltafin::kern
