// AVX-512 (BW + VNNI) dot products of IQ1_S and IQ1_M against Q8_K. Each 512-bit
// vector covers two groups of 32 (64 consecutive values): eight codebook points
// gathered with scalar loads from the table of 8 g, the runs' deltas (+-1) added
// bytewise, so each weight is the odd integer 8 g + delta of the scalar reference
// (ref_iq1.cpp); its sign becomes a mask that negates the activations, maddubs forms
// the pair products with its magnitude and vpdpwssd multiplies them by the scales
// (2 ls + 1: per group for IQ1_S, per half of 16 for IQ1_M) and accumulates. The two
// 256-bit halves are added before the one float FMA per super-block (Fold256), which
// leaves the AVX2 kernels' lanes and so their bits: one token at a time the AVX2
// kernels run in this set too (types.cpp), these the batches. 1/8 at the end.
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"

namespace deltafin::kern {
namespace {

DF_ALWAYS_INLINE int64_t delta_bytes(bool neg) { return neg ? int64_t(-1) : int64_t(0x0101010101010101LL); }

// Runs 8c .. 8c + 7 (points idx[0..7], deltas as bytes) as 64 weights.
DF_ALWAYS_INLINE __m512i iq1_weights(const int* idx, const int64_t* delta) {
  const uint64_t* g8 = kIq1sGrid8.data();
  const __m512i g = _mm512_set_epi64(int64_t(g8[idx[7]]), int64_t(g8[idx[6]]), int64_t(g8[idx[5]]), int64_t(g8[idx[4]]),
                                     int64_t(g8[idx[3]]), int64_t(g8[idx[2]]), int64_t(g8[idx[1]]), int64_t(g8[idx[0]]));
  return _mm512_add_epi8(g, _mm512_set_epi64(delta[7], delta[6], delta[5], delta[4], delta[3], delta[2], delta[1], delta[0]));
}

DF_ALWAYS_INLINE float iq1m_super(const BlockIQ1_M& b) { return h2f(iq1m_d(b)); }

// Groups 2c and 2c + 1 of an IQ1_S block: 64 weights, the two scales as 16-bit lanes
// (scalar index arithmetic and loads, for batches: see iq1m_pair_loads).
DF_ALWAYS_INLINE __m512i iq1s_pair_loads(const BlockIQ1_S& b, int c, __m512i* sc) {
  int idx[8];
  int64_t delta[8];
  short ls[2];
  DF_UNROLL
  for (int k = 0; k < 2; ++k) {
    const int h = b.qh[2 * c + k];
    ls[k] = short(2 * ((h >> 12) & 7) + 1);
    DF_UNROLL
    for (int l = 0; l < 4; ++l) {
      idx[4 * k + l] = b.qs[8 * c + 4 * k + l] | (((h >> (3 * l)) & 7) << 8);
      delta[4 * k + l] = delta_bytes(h & 0x8000);
    }
  }
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(ls[0])), _mm256_set1_epi16(ls[1]), 1);
  return iq1_weights(idx, delta);
}

// 2 ls + 1 of an IQ1_M block's 16 halves as 16-bit words 0..15: half j's 3-bit code
// is bits 3 (j % 4) .. +2 of scale word j / 4.
DF_ALWAYS_INLINE __m512i iq1m_odd_scales16(const BlockIQ1_M& b) {
  const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales));
  __m256i v = _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                       _mm256_castsi128_si256(raw));
  v = _mm256_srlv_epi16(v, _mm256_setr_epi16(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9));
  v = _mm256_and_si256(v, _mm256_set1_epi16(7));
  return _mm512_castsi256_si512(_mm256_add_epi16(_mm256_add_epi16(v, v), _mm256_set1_epi16(1)));
}

// Groups 2c and 2c + 1 of an IQ1_M block: runs 8c .. 8c + 7, halves 4c .. 4c + 3
// (one 128-bit lane each), with scalar index arithmetic and loads.
DF_ALWAYS_INLINE __m512i iq1m_pair_loads(const BlockIQ1_M& b, int c, __m512i* sc) {
  uint32_t h;
  std::memcpy(&h, b.qh + 4 * c, 4);
  int idx[8];
  DF_UNROLL
  for (int k = 0; k < 8; ++k) idx[k] = b.qs[8 * c + k] | int((h >> (4 * k)) & 7) << 8;
  const uint32_t d0 = (h >> 3 & 1) | (h >> 6 & 2) | (h >> 9 & 4) | (h >> 12 & 8), d1 = (h >> 19 & 1) | (h >> 22 & 2) |
                                                                                   (h >> 25 & 4) | (h >> 28 & 8);
  const __m512i delta = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kIq1mDeltaBytes[d0].data()))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kIq1mDeltaBytes[d1].data())), 1);
  *sc = group_scales_of_chunk(iq1m_odd_scales16(b), c);
  const uint64_t* g8 = kIq1sGrid8.data();
  const __m512i g = _mm512_set_epi64(int64_t(g8[idx[7]]), int64_t(g8[idx[6]]), int64_t(g8[idx[5]]), int64_t(g8[idx[4]]),
                                     int64_t(g8[idx[3]]), int64_t(g8[idx[2]]), int64_t(g8[idx[1]]), int64_t(g8[idx[0]]));
  return _mm512_add_epi8(g, delta);
}

// The pairs' signed weights as magnitudes and the mask of the negative ones.
template <auto SignedPair, class Block>
DF_ALWAYS_INLINE __m512i iq1_abs_pair(const Block& b, int c, __mmask64* neg, __m512i* sc) {
  const __m512i w = SignedPair(b, c, sc);
  *neg = _mm512_movepi8_mask(w);
  return _mm512_abs_epi8(w);
}

template <int NR, int NT>
struct DotIq1s512 {
  static void run(int64_t n, float* out, const BlockIQ1_S* const* a, const BlockQ8_K* const* y) {
    iq512_dot<NR, NT, iq_d<BlockIQ1_S>, iq1_abs_pair<iq1s_pair_loads, BlockIQ1_S>, BlockIQ1_S, true>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq1m512 {
  static void run(int64_t n, float* out, const BlockIQ1_M* const* a, const BlockQ8_K* const* y) {
    iq512_dot<NR, NT, iq1m_super, iq1_abs_pair<iq1m_pair_loads, BlockIQ1_M>, BlockIQ1_M, true>(n, out, a, y, 0.125f);
  }
};

}  // namespace

void install_iq1_avx512(TypeTraits* t) {
  install_iq_row<BlockIQ1_S, DotIq1s512>(t[uint32_t(DType::IQ1_S)], Isa::AVX512);
  install_iq_row<BlockIQ1_M, DotIq1m512>(t[uint32_t(DType::IQ1_M)], Isa::AVX512);
}

}  // namespace deltafin::kern
