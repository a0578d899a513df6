// AVX-512 (BW + VNNI) dot products of the K-quants against Q8_K, for one or four
// activation rows. Same arithmetic as kquants_x86.h, on 64-byte vectors: each
// vector covers 64 consecutive values of the super-block, so the activations load
// straight from Q8_K; maddubs forms pair products (int16) and vpdpwssd multiplies
// them by the sub-block scales and accumulates in one instruction.
#include "kernels/kernels_impl.h"
#include "kernels/kquants_x86.h"

namespace deltafin::kern {
namespace {

inline __m512i loadu512(const void* p) { return _mm512_loadu_si512(p); }
inline __m512i mask8x64(int v) { return _mm512_set1_epi8(char(v)); }

// [v | f(v)] as one 512-bit vector.
inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Permutation index for the int16 scales: lane l (of 32) takes scale first + l / per,
// the scale of the sub-block that lane's values belong to.
inline __m512i scale_index(int first, int per) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l) idx[l] = int16_t(first + l / per);
  return _mm512_load_si512(idx);
}

template <int Bits, int NT>
void dot512_q45k(int64_t n, float* out, const void* w, const void* const* xp) {
  using Block = std::conditional_t<Bits == 4, BlockQ4_K, BlockQ5_K>;
  const auto* a = static_cast<const Block*>(w);
  Rows<NT> y(xp);
  __m512i idx[4];
  DF_UNROLL
  for (int c = 0; c < 4; ++c) idx[c] = scale_index(2 * c, 16);  // chunk c: sub-blocks 2c, 2c + 1
  __m512 acc[NT];
  __m128 accm[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps(), accm[t] = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const Block& blk = a[i];
    __m256i scm = _mm256_cvtepu8_epi16(k4_scales(blk.scales));  // int16 sc[0..7] | m[0..7]
    __m128i mins = _mm256_extracti128_si256(scm, 1);
    __m512i sc512 = _mm512_castsi256_si512(scm);
    float da = h2f(blk.d), dm = h2f(blk.dmin);
    __m512i sumi[NT][2];  // two chains per row: vpdpwssd's latency would bound a single one
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& b = y.b[t][i];
      __m256i bs = loadu256(b.bsums);
      __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      accm[t] = _mm_fmadd_ps(_mm_set1_ps(dm * b.d), _mm_cvtepi32_ps(_mm_madd_epi16(mins, pairs)), accm[t]);
      sumi[t][0] = sumi[t][1] = _mm512_setzero_si512();
    }
    __m512i hx;
    if constexpr (Bits == 5) {
      __m256i hb = loadu256(blk.qh);
      hx = join(hb, _mm256_srli_epi16(hb, 1));  // bit 2c of [qh | qh >> 1]: the fifth bits of chunk c
    }
    DF_UNROLL
    for (int c = 0; c < 4; ++c) {
      __m256i q = loadu256(blk.qs + 32 * c);
      __m512i qv = _mm512_and_si512(join(q, _mm256_srli_epi16(q, 4)), mask8x64(15));
      if constexpr (Bits == 5) {
        qv = _mm512_or_si512(qv, _mm512_and_si512(_mm512_slli_epi16(hx, 4), mask8x64(16)));
        hx = _mm512_srli_epi16(hx, 2);
      }
      __m512i sv = _mm512_permutexvar_epi16(idx[c], sc512);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) {
        __m512i p = _mm512_maddubs_epi16(qv, loadu512(y.b[t][i].qs + 64 * c));
        sumi[t][c & 1] = _mm512_dpwssd_epi32(sumi[t][c & 1], p, sv);
      }
    }
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m512i s = _mm512_add_epi32(sumi[t][0], sumi[t][1]);
      acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(da * y.b[t][i].d), _mm512_cvtepi32_ps(s), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]) - hsum4(accm[t]);
}

// out[r] = dot(w row r, x) for NR Q4_K/Q5_K rows `w_stride` bytes apart against one
// Q8_K row (decode). Per row the same operations in the same order as
// dot512_q45k<Bits, 1>, so each result is bit-identical to vec_dot; the activation's
// quants and block sums are loaded once for all rows and the rows' chains overlap.
template <int Bits, int NR>
void dot512_q45k_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  using Block = std::conditional_t<Bits == 4, BlockQ4_K, BlockQ5_K>;
  const Block* a[NR];
  row_ptrs<Block, NR>(w, w_stride, a);
  const auto* by = static_cast<const BlockQ8_K*>(x);
  __m512i idx[4];
  DF_UNROLL
  for (int c = 0; c < 4; ++c) idx[c] = scale_index(2 * c, 16);
  __m512 acc[NR];
  __m128 accm[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps(), accm[r] = _mm_setzero_ps();
  const size_t ahead = NR * w_stride;
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_next_rows<NR>(a, i, ahead);
    const BlockQ8_K& b = by[i];
    const __m256i bs = loadu256(b.bsums);
    const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    __m512i sc512[NR], sumi[NR][2], hx[NR];
    float da[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const Block& blk = a[r][i];
      __m256i scm = _mm256_cvtepu8_epi16(k4_scales(blk.scales));
      __m128i mins = _mm256_extracti128_si256(scm, 1);
      sc512[r] = _mm512_castsi256_si512(scm);
      da[r] = h2f(blk.d);
      const float dm = h2f(blk.dmin);
      accm[r] = _mm_fmadd_ps(_mm_set1_ps(dm * b.d), _mm_cvtepi32_ps(_mm_madd_epi16(mins, pairs)), accm[r]);
      sumi[r][0] = sumi[r][1] = _mm512_setzero_si512();
      if constexpr (Bits == 5) {
        __m256i hb = loadu256(blk.qh);
        hx[r] = join(hb, _mm256_srli_epi16(hb, 1));
      }
    }
    DF_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m512i yv = loadu512(b.qs + 64 * c);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i q = loadu256(a[r][i].qs + 32 * c);
        __m512i qv = _mm512_and_si512(join(q, _mm256_srli_epi16(q, 4)), mask8x64(15));
        if constexpr (Bits == 5) {
          qv = _mm512_or_si512(qv, _mm512_and_si512(_mm512_slli_epi16(hx[r], 4), mask8x64(16)));
          hx[r] = _mm512_srli_epi16(hx[r], 2);
        }
        __m512i sv = _mm512_permutexvar_epi16(idx[c], sc512[r]);
        sumi[r][c & 1] = _mm512_dpwssd_epi32(sumi[r][c & 1], _mm512_maddubs_epi16(qv, yv), sv);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      __m512i s = _mm512_add_epi32(sumi[r][0], sumi[r][1]);
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(da[r] * b.d), _mm512_cvtepi32_ps(s), acc[r]);
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = _mm512_reduce_add_ps(acc[r]) - hsum4(accm[r]);
}

// Shared frame of Q6_K, Q3_K, Q2_K: 16 sub-blocks of 16, four 64-value groups, each
// group's codes (unsigned, offset applied later) produced by Unpack.
template <int NT, class Unpack>
inline void dot_k16_groups(const Unpack& unpack, __m512i sc512, const __m512i* idx, const Rows<NT>& y, int64_t i,
                           __m512i* sumi) {
  __m512i odd[NT];  // a second chain per row for odd groups (vpdpwssd latency)
  DF_UNROLL
  for (int t = 0; t < NT; ++t) odd[t] = _mm512_setzero_si512();
  DF_UNROLL
  for (int g = 0; g < 4; ++g) {
    __m512i qv = unpack(g);
    __m512i sv = _mm512_permutexvar_epi16(idx[g], sc512);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m512i p = _mm512_maddubs_epi16(qv, loadu512(y.b[t][i].qs + 64 * g));
      if (g & 1) odd[t] = _mm512_dpwssd_epi32(odd[t], p, sv);
      else sumi[t] = _mm512_dpwssd_epi32(sumi[t], p, sv);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) sumi[t] = _mm512_add_epi32(sumi[t], odd[t]);
}

inline void group_indices(__m512i* idx) {
  DF_UNROLL
  for (int g = 0; g < 4; ++g) idx[g] = scale_index(4 * g, 8);  // group g: sub-blocks 4g .. 4g + 3
}

// The three K-quants of 16 sub-blocks of 16 (Q6_K, Q3_K, Q2_K) for the kernels below:
// the int16 sub-block scales, the integer sum a block starts from (its code offset
// through Q8_K's bsums), the min term (Q2_K), and the unsigned codes of 64-value
// group g (0..3). Groups 2h and 2h+1 share a load: an even group fills the Unpack
// state, the odd one reuses it.
struct KindQ6K {
  using Block = BlockQ6_K;
  static constexpr bool kMins = false;
  struct Unpack {
    __m512i ql, hx;
    void init(const Block&) {}
  };
  static __m256i scales(const Block& blk) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
  }
  // The -32 offset: -32 * sum_j sc[j] * bsums[j].
  static __m512i start(__m256i sc16, __m256i bsums) {
    __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 5);
    return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(corr));
  }
  static __m512i codes(const Block& blk, int g, Unpack& u) {
    if ((g & 1) == 0) {
      u.ql = loadu512(blk.ql + 32 * g);
      __m256i qh = loadu256(blk.qh + 16 * g);
      u.hx = join(qh, _mm256_srli_epi16(qh, 2));  // bits 0-1: codes of k = 0 | k = 1; bits 4-5: k = 2 | k = 3
      return _mm512_or_si512(_mm512_and_si512(u.ql, mask8x64(15)),
                             _mm512_and_si512(_mm512_slli_epi16(u.hx, 4), mask8x64(0x30)));
    }
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(u.ql, 4), mask8x64(15)),
                           _mm512_and_si512(u.hx, mask8x64(0x30)));
  }
};

struct KindQ3K {
  using Block = BlockQ3_K;
  static constexpr bool kMins = false;
  struct Unpack {
    __m512i qx, hx;
    void init(const Block& blk) {
      __m256i hm = loadu256(blk.hmask);
      hx = join(hm, _mm256_srli_epi16(hm, 1));  // bit 2g: third bits of group g
    }
  };
  static __m256i scales(const Block& blk) { return _mm256_cvtepi8_epi16(q3k_scales(blk.scales)); }
  // The -4 offset: -4 * sum_j sc[j] * bsums[j].
  static __m512i start(__m256i sc16, __m256i bsums) {
    __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 2);
    return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(corr));
  }
  static __m512i codes(const Block& blk, int g, Unpack& u) {
    __m512i lo;
    if ((g & 1) == 0) {
      __m256i q = loadu256(blk.qs + 16 * g);
      u.qx = join(q, _mm256_srli_epi16(q, 2));
      lo = _mm512_and_si512(u.qx, mask8x64(3));
    } else {
      lo = _mm512_and_si512(_mm512_srli_epi16(u.qx, 4), mask8x64(3));
    }
    __m512i hb = _mm512_and_si512(_mm512_slli_epi16(u.hx, 2), mask8x64(4));
    u.hx = _mm512_srli_epi16(u.hx, 2);
    return _mm512_or_si512(lo, hb);
  }
};

struct KindQ2K {
  using Block = BlockQ2_K;
  static constexpr bool kMins = true;
  struct Unpack {
    __m512i qx;
    void init(const Block&) {}
  };
  static __m256i scales(const Block& blk) {
    __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    return _mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(15)));
  }
  static __m512i start(__m256i, __m256i) { return _mm512_setzero_si512(); }
  // accm += dmin * d_y * sum_j m[j] * bsums[j].
  static void mins(const Block& blk, const BlockQ8_K& b, __m256& accm) {
    __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    __m256i m = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
    __m256i msum = _mm256_madd_epi16(m, loadu256(b.bsums));
    accm = _mm256_fmadd_ps(_mm256_set1_ps(h2f(blk.dmin) * b.d), _mm256_cvtepi32_ps(msum), accm);
  }
  static __m512i codes(const Block& blk, int g, Unpack& u) {
    if ((g & 1) == 0) {
      __m256i q = loadu256(blk.qs + 16 * g);
      u.qx = join(q, _mm256_srli_epi16(q, 2));
      return _mm512_and_si512(u.qx, mask8x64(3));
    }
    return _mm512_and_si512(_mm512_srli_epi16(u.qx, 4), mask8x64(3));
  }
};

// out[t] = dot(w, x_t) against NT activation rows, for a Kind above.
template <class Kind, int NT>
void dot512_k16(int64_t n, float* out, const void* w, const void* const* xp) {
  using Block = typename Kind::Block;
  const auto* a = static_cast<const Block*>(w);
  Rows<NT> y(xp);
  __m512i idx[4];
  group_indices(idx);
  __m512 acc[NT];
  __m256 accm[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps(), accm[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const Block& blk = a[i];
    const __m256i sc16 = Kind::scales(blk);
    __m512i sumi[NT];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      if constexpr (Kind::kMins) Kind::mins(blk, y.b[t][i], accm[t]);
      sumi[t] = Kind::start(sc16, loadu256(y.b[t][i].bsums));
    }
    typename Kind::Unpack u;
    u.init(blk);
    auto unpack = [&](int g) { return Kind::codes(blk, g, u); };
    dot_k16_groups<NT>(unpack, _mm512_castsi256_si512(sc16), idx, y, i, sumi);
    const float da = h2f(blk.d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(da * y.b[t][i].d), _mm512_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    if constexpr (Kind::kMins) out[t] = _mm512_reduce_add_ps(acc[t]) - hsum8(accm[t]);
    else out[t] = _mm512_reduce_add_ps(acc[t]);
  }
}

// out[r] = dot(w row r, x) for NR rows of a Kind `w_stride` bytes apart against one
// Q8_K row (decode). Per row the operations of dot512_k16<Kind, 1> in the same order
// (each result bit-identical to vec_dot); the activation is loaded once for all rows,
// and the next rows' blocks are prefetched.
template <class Kind, int NR>
void dot512_k16_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  using Block = typename Kind::Block;
  const Block* a[NR];
  row_ptrs<Block, NR>(w, w_stride, a);
  const auto* by = static_cast<const BlockQ8_K*>(x);
  __m512i idx[4];
  group_indices(idx);
  __m512 acc[NR];
  __m256 accm[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps(), accm[r] = _mm256_setzero_ps();
  const size_t ahead = NR * w_stride;
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_next_rows<NR>(a, i, ahead);
    const BlockQ8_K& b = by[i];
    const __m256i bs = loadu256(b.bsums);
    __m512i sc512[NR], sumi[NR], odd[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const __m256i sc16 = Kind::scales(a[r][i]);
      if constexpr (Kind::kMins) Kind::mins(a[r][i], b, accm[r]);
      sumi[r] = Kind::start(sc16, bs);
      odd[r] = _mm512_setzero_si512();
      sc512[r] = _mm512_castsi256_si512(sc16);
    }
    typename Kind::Unpack u[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) u[r].init(a[r][i]);
    DF_UNROLL
    for (int g = 0; g < 4; ++g) {
      const __m512i yv = loadu512(b.qs + 64 * g);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m512i p = _mm512_maddubs_epi16(Kind::codes(a[r][i], g, u[r]), yv);
        __m512i sv = _mm512_permutexvar_epi16(idx[g], sc512[r]);
        if (g & 1) odd[r] = _mm512_dpwssd_epi32(odd[r], p, sv);
        else sumi[r] = _mm512_dpwssd_epi32(sumi[r], p, sv);
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const float da = h2f(a[r][i].d);
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(da * b.d), _mm512_cvtepi32_ps(_mm512_add_epi32(sumi[r], odd[r])), acc[r]);
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    if constexpr (Kind::kMins) out[r] = _mm512_reduce_add_ps(acc[r]) - hsum8(accm[r]);
    else out[r] = _mm512_reduce_add_ps(acc[r]);
  }
}

}  // namespace

// Measured per kernel (bench_kernels, matvec_l2 / matmul16_l2): the 256-bit VNNI
// kernels win for single rows of Q4_K/Q5_K (fewer port-5 shuffles), the 512-bit ones
// everywhere else; single rows still use the 512-bit ones (see below).
void install_kquants_avx512(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4, VecDotR4Fn dot_r4 = nullptr) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = dot_r4;
    // The AVX2 set's prepared forms (kquants_avx2.cpp) keep the AVX2 kernels' bits.
    set_prepared(r, nullptr, nullptr, nullptr, nullptr, nullptr);
    r.isa = Isa::AVX512;
  };
  // Single rows use the x4 kernel's code (batch invariance: a row's result must not
  // depend on its batch grouping), although the 256-bit kernel is faster for them.
  set(DType::Q4_K, one<dot512_q45k<4, 1>>, dot512_q45k<4, 4>, dot512_q45k_rows<4, 4>);
  set(DType::Q5_K, one<dot512_q45k<5, 1>>, dot512_q45k<5, 4>, dot512_q45k_rows<5, 4>);
  set(DType::Q6_K, one<dot512_k16<KindQ6K, 1>>, dot512_k16<KindQ6K, 4>, dot512_k16_rows<KindQ6K, 4>);
  set(DType::Q2_K, one<dot512_k16<KindQ2K, 1>>, dot512_k16<KindQ2K, 4>, dot512_k16_rows<KindQ2K, 4>);
  set(DType::Q3_K, one<dot512_k16<KindQ3K, 1>>, dot512_k16<KindQ3K, 4>, dot512_k16_rows<KindQ3K, 4>);
}

}  // namespace deltafin::kern
