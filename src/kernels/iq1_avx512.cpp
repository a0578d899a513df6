// AVX-512 (BW + VNNI) dot products of IQ1_S and IQ1_M against Q8_K. Each 512-bit
// vector covers two groups of 32 (64 consecutive values): eight codebook points
// gathered with scalar loads from the table of 8 g, the runs' deltas (+-1) added
// bytewise, so each weight is the odd integer 8 g + delta of the scalar reference
// (ref_iq1.cpp); its sign becomes a mask that negates the activations, maddubs forms
// the pair products with its magnitude and vpdpwssd multiplies them by the scales
// (2 ls + 1: per group for IQ1_S, per half of 16 for IQ1_M) and accumulates. One
// float FMA per super-block, 1/8 at the end.
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

// The same from one vector of the eight runs' indices and a gather (decode).
DF_ALWAYS_INLINE __m512i iq1s_pair_gather(const BlockIQ1_S& b, int c, __m512i* sc) {
  uint32_t h;
  std::memcpy(&h, b.qh + 2 * c, 4);  // group 2c's word in bits 0..15, 2c + 1's in 16..31
  const __m512i hv = _mm512_set1_epi64(int64_t(h));
  const __m512i high = _mm512_and_si512(_mm512_srlv_epi64(hv, _mm512_setr_epi64(0, 3, 6, 9, 16, 19, 22, 25)),
                                        _mm512_set1_epi64(7));
  const __m512i low = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * c)));
  const __m512i g = _mm512_i64gather_epi64(_mm512_or_si512(low, _mm512_slli_epi64(high, 8)), kIq1sGrid8.data(), 8);
  const __mmask8 neg = _mm512_test_epi64_mask(hv, _mm512_setr_epi64(0x8000, 0x8000, 0x8000, 0x8000, 0x80000000LL,
                                                                     0x80000000LL, 0x80000000LL, 0x80000000LL));
  const __m512i delta = _mm512_mask_blend_epi64(neg, _mm512_set1_epi64(0x0101010101010101LL), _mm512_set1_epi64(-1));
  *sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * ((h >> 12) & 7) + 1))),
                           _mm256_set1_epi16(short(2 * ((h >> 28) & 7) + 1)), 1);
  return _mm512_add_epi8(g, delta);
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
// (one 128-bit lane each). qh[4c .. 4c + 3] as one word: run k's high index bits at
// 4k..4k+2, its delta sign at 4k + 3. The eight indices are formed in one vector
// (a lane per run) and their points gathered; the signs pick the deltas by mask.
DF_ALWAYS_INLINE __m512i iq1m_pair_gather(const BlockIQ1_M& b, int c, __m512i* sc) {
  uint32_t h;
  std::memcpy(&h, b.qh + 4 * c, 4);
  const __m512i per_run = _mm512_srlv_epi64(_mm512_set1_epi64(int64_t(h)), _mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28));
  const __m512i low = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * c)));
  const __m512i idx = _mm512_or_si512(low, _mm512_slli_epi64(_mm512_and_si512(per_run, _mm512_set1_epi64(7)), 8));
  const __m512i g = _mm512_i64gather_epi64(idx, kIq1sGrid8.data(), 8);
  const __mmask8 neg = _mm512_test_epi64_mask(per_run, _mm512_set1_epi64(8));
  const __m512i delta = _mm512_mask_blend_epi64(neg, _mm512_set1_epi64(0x0101010101010101LL), _mm512_set1_epi64(-1));
  *sc = group_scales_of_chunk(iq1m_odd_scales16(b), c);
  return _mm512_add_epi8(g, delta);
}

// The same weights with scalar index arithmetic and loads: faster where several
// tokens share each unpacked row (a gather's latency then stalls their work).
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
    if constexpr (NT >= 4) iq512_dot<NR, NT, iq_d<BlockIQ1_S>, iq1_abs_pair<iq1s_pair_loads, BlockIQ1_S>>(n, out, a, y, 0.125f);
    else iq512_dot<NR, NT, iq_d<BlockIQ1_S>, iq1_abs_pair<iq1s_pair_gather, BlockIQ1_S>>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq1m512 {
  static void run(int64_t n, float* out, const BlockIQ1_M* const* a, const BlockQ8_K* const* y) {
    if constexpr (NT >= 4) iq512_dot<NR, NT, iq1m_super, iq1_abs_pair<iq1m_pair_loads, BlockIQ1_M>>(n, out, a, y, 0.125f);
    else iq512_dot<NR, NT, iq1m_super, iq1_abs_pair<iq1m_pair_gather, BlockIQ1_M>>(n, out, a, y, 0.125f);
  }
};

}  // namespace

void install_iq1_avx512(TypeTraits* t) {
  install_iq_row<BlockIQ1_S, DotIq1s512>(t[uint32_t(DType::IQ1_S)], Isa::AVX512);
  install_iq_row<BlockIQ1_M, DotIq1m512>(t[uint32_t(DType::IQ1_M)], Isa::AVX512);
}

}  // namespace deltafin::kern
