// 256-bit dot products of the K-quants against Q8_K, for one or four activation
// rows (the weight super-block is unpacked once for all rows). Included by
// kquants_avx2.cpp and kquants_avx512.cpp (there with VNNI: vpdpwssd replaces
// madd + add); everything has internal linkage.
//
// Pattern shared by all five: weights are unpacked to unsigned bytes (q >= 0), each
// 32-byte run multiplied with the activations by maddubs (pairs, int16, no
// saturation for q <= 63), then by madd against the sub-block scales (int16) into
// int32. Offsets (the -32 of Q6_K, -4 of Q3_K) and mins are applied once per
// super-block through Q8_K's bsums. With VNNI the int32 sums are split over several
// accumulators per row (A), since a chain of vpdpwssd is latency-bound.
#pragma once
#include <type_traits>

#include "kernels/x86_common.h"

namespace deltafin::kern {
namespace {

// acc + madd(p, s): pairs of int16 products summed into int32 lanes.
inline __m256i madd_acc(__m256i acc, __m256i p, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, p, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
}

// Accumulators per row: VNNI's 5-cycle vpdpwssd chain needs several when NT == 1.
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
template <int NT>
constexpr int kAcc = NT == 1 ? 4 : 2;
#else
template <int NT>
constexpr int kAcc = 1;
#endif

template <int NT, int A>
inline __m256i sum_acc(const __m256i (&s)[NT][A], int t) {
  __m256i r = s[t][0];
  DF_UNROLL
  for (int k = 1; k < A; ++k) r = _mm256_add_epi32(r, s[t][k]);
  return r;
}

// Block i's 16 bsums summed in pairs (the sums of the eight 32-value sub-blocks).
inline __m128i bsum_pairs(const BlockQ8_K& b) {
  const __m256i bs = loadu256(b.bsums);
  return _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
}

template <int NT>
struct Rows {
  const BlockQ8_K* b[NT];
  Rows(const void* const* xp) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_K*>(xp[t]);
  }
  __m128i pairs(int t, int64_t i) const { return bsum_pairs(b[t][i]); }
};

// Q8_K rows prepared once per matrix (prep_q8k_pairs): the blocks, then each block's
// bsum pairs, which the Q4_K/Q5_K kernels would otherwise add up per weight row.
inline size_t prep_bytes_q8k_pairs(int64_t n) { return size_t(n / kQK) * (sizeof(BlockQ8_K) + sizeof(__m128i)); }
inline void prep_q8k_pairs(int64_t n, void* dst, const void* x) {
  const int64_t nb = n / kQK;
  const auto* b = static_cast<const BlockQ8_K*>(x);
  std::memcpy(dst, b, size_t(nb) * sizeof(BlockQ8_K));
  auto* pairs = reinterpret_cast<__m128i*>(static_cast<uint8_t*>(dst) + size_t(nb) * sizeof(BlockQ8_K));
  for (int64_t i = 0; i < nb; ++i) _mm_storeu_si128(pairs + i, bsum_pairs(b[i]));
}
template <int NT>
struct PreparedQ8KRows {
  const BlockQ8_K* b[NT];
  const __m128i* p[NT];
  PreparedQ8KRows(const void* const* xp, int64_t n) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      b[t] = static_cast<const BlockQ8_K*>(xp[t]);
      p[t] = reinterpret_cast<const __m128i*>(b[t] + n / kQK);
    }
  }
  __m128i pairs(int t, int64_t i) const { return _mm_loadu_si128(p[t] + i); }
};

inline float hsum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Shuffle control picking byte j eight times, then byte j + 1 eight times.
inline __m128i pair_ctrl(int j) {
  return _mm_set_epi64x(int64_t(0x0101010101010101ULL * uint64_t(j + 1)), int64_t(0x0101010101010101ULL * uint64_t(j)));
}
// Sub-block scales j and j+1 (from 16 int8), each repeated eight times as int16.
inline __m256i scale_pair_i8(__m128i sc8, int j) { return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pair_ctrl(j))); }
inline __m256i scale_pair_u8(__m128i sc8, int j) { return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sc8, pair_ctrl(j))); }

inline __m256i mask8(int v) { return _mm256_set1_epi8(char(v)); }

// sc[j] - 32 (j < 16) of a Q3_K super-block.
inline __m128i q3k_scales(const uint8_t* s) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  uint32_t w0 = (u[0] & 0x0f0f0f0fu) | ((u[2] << 4) & 0x30303030u);
  uint32_t w1 = (u[1] & 0x0f0f0f0fu) | ((u[2] << 2) & 0x30303030u);
  uint32_t w2 = ((u[0] >> 4) & 0x0f0f0f0fu) | (u[2] & 0x30303030u);
  uint32_t w3 = ((u[1] >> 4) & 0x0f0f0f0fu) | ((u[2] >> 2) & 0x30303030u);
  return _mm_sub_epi8(_mm_setr_epi32(int(w0), int(w1), int(w2), int(w3)), _mm_set1_epi8(32));
}

// int16 element e of both 128-bit lanes, broadcast (shuffle control).
inline __m256i elem16_ctrl(int e) { return _mm256_set1_epi16(short(((2 * e + 1) << 8) | (2 * e))); }

// Super-block i of a Q4_K (Bits = 4) / Q5_K (Bits = 5) row against NT activation rows
// Y, exactly in int32: sumi[t] (A accumulators) sum to sum_j sc_j * (codes . y) over
// the sub-blocks j, msum[t]'s four lanes to sum_j m_j * (sum of y over sub-block j).
template <int Bits, int NT, int A, class Block, class Y>
inline void q45k_block_sums(const Block& blk, const Y& y, int64_t i, __m256i (&sumi)[NT][A], __m128i* msum) {
  __m256i scm = _mm256_cvtepu8_epi16(k4_scales(blk.scales));  // int16 sc[0..7] | m[0..7]
  __m128i mins = _mm256_extracti128_si256(scm, 1);
  __m256i scales = _mm256_permute2x128_si256(scm, scm, 0x00);
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    msum[t] = _mm_madd_epi16(mins, y.pairs(t, i));
    DF_UNROLL
    for (int k = 0; k < A; ++k) sumi[t][k] = _mm256_setzero_si256();
  }
  __m256i hb;
  if constexpr (Bits == 5) hb = loadu256(blk.qh);
  DF_UNROLL
  for (int c = 0; c < 4; ++c) {
    __m256i q = loadu256(blk.qs + 32 * c);
    __m256i lo = _mm256_and_si256(q, mask8(15));
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask8(15));
    if constexpr (Bits == 5) {  // bit 2c -> 16 for lo, bit 2c + 1 -> 16 for hi
      lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hb, 4), mask8(16)));
      hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hb, 3), mask8(16)));
      hb = _mm256_srli_epi16(hb, 2);
    }
    __m256i s_lo = _mm256_shuffle_epi8(scales, elem16_ctrl(2 * c));
    __m256i s_hi = _mm256_shuffle_epi8(scales, elem16_ctrl(2 * c + 1));
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const int8_t* yq = y.b[t][i].qs + 64 * c;
      const int k0 = (2 * c) % A, k1 = (2 * c + 1) % A;
      sumi[t][k0] = madd_acc(sumi[t][k0], _mm256_maddubs_epi16(lo, loadu256(yq)), s_lo);
      sumi[t][k1] = madd_acc(sumi[t][k1], _mm256_maddubs_epi16(hi, loadu256(yq + 32)), s_hi);
    }
  }
}

// Q4_K (Bits = 4) and Q5_K (Bits = 5) against NT activation rows Y (Rows, or
// PreparedQ8KRows: the same bits).
template <int Bits, int NT, class Y>
void dot_q45k_over(int64_t n, float* out, const void* w, const Y& y) {
  using Block = std::conditional_t<Bits == 4, BlockQ4_K, BlockQ5_K>;
  const auto* a = static_cast<const Block*>(w);
  __m256 acc[NT];
  __m128 accm[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps(), accm[t] = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const Block& blk = a[i];
    const float da = h2f(blk.d), dm = h2f(blk.dmin);
    constexpr int A = kAcc<NT>;
    __m256i sumi[NT][A];
    __m128i msum[NT];
    q45k_block_sums<Bits, NT, A>(blk, y, i, sumi, msum);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      accm[t] = _mm_fmadd_ps(_mm_set1_ps(dm * y.b[t][i].d), _mm_cvtepi32_ps(msum[t]), accm[t]);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(da * y.b[t][i].d), _mm256_cvtepi32_ps(sum_acc<NT, A>(sumi, t)), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]) - hsum4(accm[t]);
}
template <int Bits, int NT>
void dot_q45k(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_q45k_over<Bits, NT>(n, out, w, Rows<NT>(xp));
}

// The 6-bit codes (unsigned) of half h (128 values) of a Q6_K block: four runs of 32.
inline void q6k_codes(const BlockQ6_K& blk, int h, __m256i* q) {
  __m256i ql0 = loadu256(blk.ql + 64 * h), ql1 = loadu256(blk.ql + 64 * h + 32);
  __m256i qh = loadu256(blk.qh + 32 * h);
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, mask8(15)), _mm256_slli_epi16(_mm256_and_si256(qh, mask8(0x03)), 4));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, mask8(15)), _mm256_slli_epi16(_mm256_and_si256(qh, mask8(0x0c)), 2));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), mask8(15)), _mm256_and_si256(qh, mask8(0x30)));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), mask8(15)),
                         _mm256_srli_epi16(_mm256_and_si256(qh, mask8(0xc0)), 2));
}

// Block i of rows [0, NR) `ahead` bytes on (the caller's next rows) into L1 while a
// decode kernel computes: decode streams weights from DRAM. Prefetches never fault.
template <int NR, class Block>
inline void prefetch_next_rows(const Block* const* a, int64_t i, size_t ahead) {
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    const char* p = reinterpret_cast<const char*>(a[r] + i) + ahead;
    for (size_t o = 0; o < sizeof(Block); o += 64) prefetch_l1(p + o);
    prefetch_l1(p + sizeof(Block) - 1);
  }
}

template <int NT>
void dot_q6k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  Rows<NT> y(xp);
  __m256 acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const BlockQ6_K& blk = a[i];
    __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    constexpr int A = kAcc<NT>;
    __m256i sumi[NT][A];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {  // the -32 offset: -32 * sum_j sc[j] * bsums[j]
      __m256i corr = _mm256_madd_epi16(sc16, loadu256(y.b[t][i].bsums));
      sumi[t][0] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
      DF_UNROLL
      for (int k = 1; k < A; ++k) sumi[t][k] = _mm256_setzero_si256();
    }
    DF_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      q6k_codes(blk, h, q);
      DF_UNROLL
      for (int k = 0; k < 4; ++k) {
        __m256i sv = scale_pair_i8(sc8, 8 * h + 2 * k);
        DF_UNROLL
        for (int t = 0; t < NT; ++t) {
          __m256i p = _mm256_maddubs_epi16(q[k], loadu256(y.b[t][i].qs + 128 * h + 32 * k));
          const int a = (4 * h + k) % A;
          sumi[t][a] = madd_acc(sumi[t][a], p, sv);
        }
      }
    }
    float da = h2f(blk.d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(da * y.b[t][i].d), _mm256_cvtepi32_ps(sum_acc<NT, A>(sumi, t)), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
}

template <int NT>
void dot_q2k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockQ2_K*>(w);
  Rows<NT> y(xp);
  __m256 acc[NT], accm[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const BlockQ2_K& blk = a[i];
    __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    __m128i sc = _mm_and_si128(s, _mm_set1_epi8(15));
    __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
    float da = h2f(blk.d), dm = h2f(blk.dmin);
    constexpr int A = kAcc<NT>;
    __m256i sumi[NT][A];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& b = y.b[t][i];
      __m256i msum = _mm256_madd_epi16(mins, loadu256(b.bsums));
      accm[t] = _mm256_fmadd_ps(_mm256_set1_ps(dm * b.d), _mm256_cvtepi32_ps(msum), accm[t]);
      DF_UNROLL
      for (int k = 0; k < A; ++k) sumi[t][k] = _mm256_setzero_si256();
    }
    DF_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m256i q = loadu256(blk.qs + 32 * h);
      DF_UNROLL
      for (int sh = 0; sh < 4; ++sh) {
        __m256i qv = _mm256_and_si256(q, mask8(3));
        q = _mm256_srli_epi16(q, 2);
        __m256i sv = scale_pair_u8(sc, 8 * h + 2 * sh);
        DF_UNROLL
        for (int t = 0; t < NT; ++t) {
          __m256i p = _mm256_maddubs_epi16(qv, loadu256(y.b[t][i].qs + 128 * h + 32 * sh));
          const int a = (4 * h + sh) % A;
          sumi[t][a] = madd_acc(sumi[t][a], p, sv);
        }
      }
    }
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(da * y.b[t][i].d), _mm256_cvtepi32_ps(sum_acc<NT, A>(sumi, t)), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]) - hsum8(accm[t]);
}

template <int NT>
void dot_q3k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockQ3_K*>(w);
  Rows<NT> y(xp);
  __m256 acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const BlockQ3_K& blk = a[i];
    __m128i sc8 = q3k_scales(blk.scales);
    __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    constexpr int A = kAcc<NT>;
    __m256i sumi[NT][A];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {  // the -4 offset: -4 * sum_j sc[j] * bsums[j]
      __m256i corr = _mm256_madd_epi16(sc16, loadu256(y.b[t][i].bsums));
      sumi[t][0] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 2));
      DF_UNROLL
      for (int k = 1; k < A; ++k) sumi[t][k] = _mm256_setzero_si256();
    }
    __m256i hm = loadu256(blk.hmask);
    DF_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m256i q = loadu256(blk.qs + 32 * h);
      DF_UNROLL
      for (int sh = 0; sh < 4; ++sh) {
        __m256i qv = _mm256_or_si256(_mm256_and_si256(q, mask8(3)), _mm256_and_si256(_mm256_slli_epi16(hm, 2), mask8(4)));
        q = _mm256_srli_epi16(q, 2);
        hm = _mm256_srli_epi16(hm, 1);
        __m256i sv = scale_pair_i8(sc8, 8 * h + 2 * sh);
        DF_UNROLL
        for (int t = 0; t < NT; ++t) {
          __m256i p = _mm256_maddubs_epi16(qv, loadu256(y.b[t][i].qs + 128 * h + 32 * sh));
          const int a = (4 * h + sh) % A;
          sumi[t][a] = madd_acc(sumi[t][a], p, sv);
        }
      }
    }
    float da = h2f(blk.d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(da * y.b[t][i].d), _mm256_cvtepi32_ps(sum_acc<NT, A>(sumi, t)), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
}

// The single-row vec_dot form of a kernel.
template <void (*F)(int64_t, float*, const void*, const void* const*)>
void one(int64_t n, float* out, const void* w, const void* x) {
  F(n, out, w, &x);
}

}  // namespace
}  // namespace deltafin::kern
