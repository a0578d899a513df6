// AVX2 dot products of IQ1_S and IQ1_M against Q8_K. Per group of 32 values the four
// codebook points are gathered with scalar loads from the table of 8 g (bytes -8, 0,
// 8), the runs' deltas (+-1, in units of 1/8) added bytewise, so each weight is the
// odd integer 8 g + delta (|.| <= 9) of the scalar reference (ref_iq1.cpp); its sign
// moves onto the activations (vpsignb), maddubs forms the pair products (at most
// 9 * 127 * 2) and madd multiplies them by the scale (2 ls + 1) of the group (IQ1_S)
// or of each half of 16 (IQ1_M) into int32 lanes. One float FMA per super-block, 1/8
// at the end.
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"

namespace deltafin::kern {
namespace {

// The four runs' points of a group (indices i0..i3) plus their deltas (bytes of d).
DF_ALWAYS_INLINE __m256i iq1_weights(int i0, int i1, int i2, int i3, __m256i delta) {
  const uint64_t* g8 = kIq1sGrid8.data();
  const __m256i g = _mm256_set_epi64x(int64_t(g8[i3]), int64_t(g8[i2]), int64_t(g8[i1]), int64_t(g8[i0]));
  return _mm256_add_epi8(g, delta);
}

// +1 / -1 in all eight bytes.
DF_ALWAYS_INLINE int64_t delta_bytes(bool neg) { return neg ? int64_t(-1) : int64_t(0x0101010101010101LL); }

DF_ALWAYS_INLINE float iq1s_super(const BlockIQ1_S& b) { return h2f(b.d); }
DF_ALWAYS_INLINE float iq1m_super(const BlockIQ1_M& b) { return h2f(iq1m_d(b)); }

// Group ib of an IQ1_S block: the 32 weights, and the scale as 16-bit lanes.
DF_ALWAYS_INLINE __m256i iq1s_group(const BlockIQ1_S& b, int ib, __m256i* sc) {
  const int h = b.qh[ib];
  const uint8_t* q = b.qs + 4 * ib;
  *sc = _mm256_set1_epi16(short(2 * ((h >> 12) & 7) + 1));
  return iq1_weights(q[0] | (h << 8 & 0x700), q[1] | (h << 5 & 0x700), q[2] | (h << 2 & 0x700), q[3] | (h >> 1 & 0x700),
                     _mm256_set1_epi64x(delta_bytes(h & 0x8000)));
}

// Group ib of an IQ1_M block: runs 4ib..4ib+3, halves 2ib (low lane) and 2ib + 1.
// qh[2ib], qh[2ib + 1] as one 16-bit word: run l's high index bits at 4l..4l+2, its
// delta sign at 4l + 3.
DF_ALWAYS_INLINE __m256i iq1m_group(const BlockIQ1_M& b, int ib, __m256i* sc) {
  uint16_t h16, w;
  std::memcpy(&h16, b.qh + 2 * ib, 2);
  std::memcpy(&w, b.scales + 2 * (ib / 2), 2);
  const int h = h16, s = w >> (6 * (ib % 2));
  const uint8_t* q = b.qs + 4 * ib;
  *sc = _mm256_set_m128i(_mm_set1_epi16(short(2 * ((s >> 3) & 7) + 1)), _mm_set1_epi16(short(2 * (s & 7) + 1)));
  const int dbits = (h >> 3 & 1) | (h >> 6 & 2) | (h >> 9 & 4) | (h >> 12 & 8);
  const __m256i delta = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kIq1mDeltaBytes[size_t(dbits)].data()));
  return iq1_weights(q[0] | (h << 8 & 0x700), q[1] | (h << 4 & 0x700), q[2] | (h & 0x700), q[3] | (h >> 4 & 0x700), delta);
}

// Super(block) is the block's d, Group(block, ib, &scales) its group ib's weights.
template <int NR, int NT, auto Super, auto Group, class Block>
void iq1_dot(int64_t n, float* out, const Block* const* a, const BlockQ8_K* const* y) {
  __m256 acc[NR][NT];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m256i sumi[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      DF_UNROLL
      for (int t = 0; t < NT; ++t) sumi[r][t] = _mm256_setzero_si256();
    }
    for (int ib = 0; ib < 8; ++ib) {
      __m256i q8[NT];
      DF_UNROLL
      for (int t = 0; t < NT; ++t) q8[t] = loadu256(y[t][i].qs + 32 * ib);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i sc;
        const __m256i w = Group(a[r][i], ib, &sc);
        const __m256i aw = _mm256_sign_epi8(w, w);
        DF_UNROLL
        for (int t = 0; t < NT; ++t) {
          const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(q8[t], w));
          sumi[r][t] = _mm256_add_epi32(sumi[r][t], _mm256_madd_epi16(p, sc));
        }
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const float d = Super(a[r][i]);
      DF_UNROLL
      for (int t = 0; t < NT; ++t)
        acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[t][i].d), _mm256_cvtepi32_ps(sumi[r][t]), acc[r][t]);
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) out[r * NT + t] = 0.125f * hsum8(acc[r][t]);
  }
}

template <int NR, int NT>
struct DotIq1s {
  static void run(int64_t n, float* out, const BlockIQ1_S* const* a, const BlockQ8_K* const* y) {
    iq1_dot<NR, NT, iq1s_super, iq1s_group>(n, out, a, y);
  }
};

template <int NR, int NT>
struct DotIq1m {
  static void run(int64_t n, float* out, const BlockIQ1_M* const* a, const BlockQ8_K* const* y) {
    iq1_dot<NR, NT, iq1m_super, iq1m_group>(n, out, a, y);
  }
};

}  // namespace

void install_iq1_avx2(TypeTraits* t) {
  install_iq_row<BlockIQ1_S, DotIq1s, false>(t[uint32_t(DType::IQ1_S)], Isa::AVX2);
  install_iq_row<BlockIQ1_M, DotIq1m, false>(t[uint32_t(DType::IQ1_M)], Isa::AVX2);
}

}  // namespace deltafin::kern
