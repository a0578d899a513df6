// x86 kernels of the other 32-value block types (blocks_legacy.h), shared by
// legacy_avx2.cpp and legacy_avx512.cpp (built with AVX512-VNNI the same code uses
// vpdpbusd and a mask move for Q5's fifth bit). Internal linkage, as x86_common.h.
//
// Q5_0 and IQ4_NL decode to signed bytes and run x86_common.h's Q8_0 dots. Q4_1 and
// Q5_1 decode to unsigned codes and take Q8_1 activations: per block d_w * d_x times
// the integer dot, plus m_w * s_x (dot_q32m below, in the order of ggml's sum:
// the scaled dots in one float sum, the m * s terms in another, added at the end).
// IQ4_XS and TQ2_0 against Q8_K sum each super-block exactly in int32 (IQ4_XS: the
// sub-block dots times their 6-bit scales; TQ2_0: codes 0..2 times the activations,
// less the activations' sum from bsums), then one FMA by d_w * d_x.
#pragma once
#include "kernels/blocks_legacy.h"
#include "kernels/x86_common.h"

namespace deltafin::kern {
namespace {

// 16 where bit e of the block's qh is set, else 0, for the 32 elements in order.
inline __m256i q5_high_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_maskz_mov_epi8(__mmask32(h), _mm256_set1_epi8(16));
#else
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ULL));
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(int(h)), spread);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(16));
#endif
}

// The fp16 field m (Q4_1 / Q5_1) or s (Q8_1) of eight consecutive blocks as floats.
template <class Block, uint16_t Block::*F>
inline __m256 fp16_field8(const Block* b) {
  alignas(16) uint16_t h[8];
  DF_UNROLL
  for (int k = 0; k < 8; ++k) h[k] = b[k].*F;
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

struct DecodeQ5_0 {
  using Block = BlockQ5_0;
  static __m256i q(const Block& b) {
    return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles16(b.qs), q5_high_bits(b.qh)), _mm256_set1_epi8(16));
  }
  static float d(const Block& b) { return h2f(b.d); }
  static __m256 d8(const Block* b) { return fp16_scales8(b); }
};
// Offset types: q() gives the unsigned codes.
struct DecodeQ4_1 {
  using Block = BlockQ4_1;
  static __m256i q(const Block& b) { return unpack_nibbles16(b.qs); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block& b) { return h2f(b.m); }
  static __m256 d8(const Block* b) { return fp16_scales8(b); }
  static __m256 m8(const Block* b) { return fp16_field8<Block, &Block::m>(b); }
};
struct DecodeQ5_1 {
  using Block = BlockQ5_1;
  static __m256i q(const Block& b) { return _mm256_or_si256(unpack_nibbles16(b.qs), q5_high_bits(b.qh)); }
  static float d(const Block& b) { return h2f(b.d); }
  static float m(const Block& b) { return h2f(b.m); }
  static __m256 d8(const Block* b) { return fp16_scales8(b); }
  static __m256 m8(const Block* b) { return fp16_field8<Block, &Block::m>(b); }
};

// out[t] = dot(w, xp[t]) for NT activation rows of Q8_1 (offset types). Eight blocks'
// scales at a time as dot_q32; two accumulators for the scaled dots, one vector of
// m * s terms, a scalar for the m * s of the tail blocks.
template <class Dec, int NT>
void dot_q32m(int64_t n, float* out, const void* w, const void* const* xp) {
  using Block = typename Dec::Block;
  const auto* a = static_cast<const Block*>(w);
  const BlockQ8_1* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_1*>(xp[t]);
  const int64_t nb = n / kQ32;
  __m256 acc[NT][2], accm[NT];
  float tail_m[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = accm[t] = _mm256_setzero_ps(), tail_m[t] = 0;
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    alignas(32) float d[NT][8];
    const __m256 da = Dec::d8(a + i), ma = Dec::m8(a + i);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      _mm256_store_ps(d[t], _mm256_mul_ps(da, fp16_scales8(b[t] + i)));
      accm[t] = _mm256_fmadd_ps(ma, fp16_field8<BlockQ8_1, &BlockQ8_1::s>(b[t] + i), accm[t]);
    }
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      __m256i qa = Dec::q(a[i + k]);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) {
        __m256i p = dot_i8(qa, loadu256(b[t][i + k].qs));
        acc[t][k & 1] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[t][k]), _mm256_cvtepi32_ps(p), acc[t][k & 1]);
      }
    }
  }
  for (; i < nb; ++i) {
    __m256i qa = Dec::q(a[i]);
    const float da = Dec::d(a[i]), ma = Dec::m(a[i]);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m256i p = dot_i8(qa, loadu256(b[t][i].qs));
      acc[t][0] = _mm256_fmadd_ps(_mm256_set1_ps(da * h2f(b[t][i].d)), _mm256_cvtepi32_ps(p), acc[t][0]);
      tail_m[t] += ma * h2f(b[t][i].s);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(_mm256_add_ps(acc[t][0], acc[t][1])) + (hsum8(accm[t]) + tail_m[t]);
}

template <class Dec>
void dot_q32m_1(int64_t n, float* out, const void* w, const void* x) {
  dot_q32m<Dec, 1>(n, out, w, &x);
}
template <class Dec>
void dot_q32m_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_q32m<Dec, 4>(n, out, w, xp);
}

// NR weight rows `w_stride` bytes apart against one Q8_1 row (decode): per row the
// operations of dot_q32m<Dec, 1> in the same order, so each result equals vec_dot's
// bit for bit; the activation is loaded once and the next rows are prefetched.
template <class Dec, int NR>
void dot_q32m_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  using Block = typename Dec::Block;
  const Block* a[NR];
  row_ptrs<Block, NR>(w, w_stride, a);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  const int64_t nb = n / kQ32;
  __m256 acc[NR][2], accm[NR];
  float tail_m[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = accm[r] = _mm256_setzero_ps(), tail_m[r] = 0;
  const size_t ahead = NR * w_stride;
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const char* p = reinterpret_cast<const char*>(a[r] + i) + ahead;
      for (size_t o = 0; o < 8 * sizeof(Block); o += 64) prefetch_l1(p + o);
      prefetch_l1(p + 8 * sizeof(Block) - 1);
    }
    const __m256 db = fp16_scales8(b + i), sb = fp16_field8<BlockQ8_1, &BlockQ8_1::s>(b + i);
    alignas(32) float d[NR][8];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      _mm256_store_ps(d[r], _mm256_mul_ps(Dec::d8(a[r] + i), db));
      accm[r] = _mm256_fmadd_ps(Dec::m8(a[r] + i), sb, accm[r]);
    }
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      const __m256i y = loadu256(b[i + k].qs);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i p = dot_i8(Dec::q(a[r][i + k]), y);
        acc[r][k & 1] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[r][k]), _mm256_cvtepi32_ps(p), acc[r][k & 1]);
      }
    }
  }
  for (; i < nb; ++i) {
    const __m256i y = loadu256(b[i].qs);
    const float dy = h2f(b[i].d), sy = h2f(b[i].s);
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      __m256i p = dot_i8(Dec::q(a[r][i]), y);
      acc[r][0] = _mm256_fmadd_ps(_mm256_set1_ps(Dec::d(a[r][i]) * dy), _mm256_cvtepi32_ps(p), acc[r][0]);
      tail_m[r] += Dec::m(a[r][i]) * sy;
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = hsum8(_mm256_add_ps(acc[r][0], acc[r][1])) + (hsum8(accm[r]) + tail_m[r]);
}

// Same float operations as from_float_q8_1_ref (and ggml's x86 quantize_row_q8_1).
inline void quantize_q8_1_x86(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v0), abs_ps(v1)), _mm256_max_ps(abs_ps(v2), abs_ps(v3)));
    float amax = hmax8(m);
    float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    __m256 s = _mm256_set1_ps(id);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, s)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, s));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, s)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, s));
    y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const int sum = hsum8_i32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    y[i].s = _cvtss_sh(d * float(sum), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), pack_i32x32_to_i8(i0, i1, i2, i3));
  }
}

// ---- IQ4_XS ------------------------------------------------------------------------

// Eight int32 that sum to s * dot(a, b) over 32 signed bytes (a != -128; |s| <= 32).
inline __m256i dot_i8_scaled(__m256i a, __m256i b, int s) {
  __m256i ua = _mm256_sign_epi8(a, a), sb = _mm256_sign_epi8(b, a);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ua, sb), _mm256_set1_epi32(s));
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ua, sb), _mm256_set1_epi16(int16_t(s)));
#endif
}

// Sub-block j's 32 values as signed bytes (IQ4_NL levels).
inline __m256i iq4xs_sub(const BlockIQ4_XS& b, int j) {
  return lookup_nibbles16(kIq4nlValues, b.qs + 16 * j);
}

template <int NT>
void dot_iq4_xs(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockIQ4_XS*>(w);
  const BlockQ8_K* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_K*>(xp[t]);
  __m256 acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m256i sumi[NT];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    DF_UNROLL
    for (int j = 0; j < 8; ++j) {
      const __m256i q = iq4xs_sub(a[i], j);
      const int ls = iq4xs_scale(a[i], j);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_add_epi32(sumi[t], dot_i8_scaled(q, loadu256(b[t][i].qs + 32 * j), ls));
    }
    const float d = h2f(a[i].d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * b[t][i].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
}

void dot_iq4_xs_1(int64_t n, float* out, const void* w, const void* x) { dot_iq4_xs<1>(n, out, w, &x); }
void dot_iq4_xs_4(int64_t n, float* out, const void* w, const void* const* xp) { dot_iq4_xs<4>(n, out, w, xp); }
// Eight tokens per decoded row (the level lookup, abs and scale of a sub-block shared
// by twice as many): AVX2 pp64 on Zen 5 303 against 294 tok/s over four tokens.
void dot_iq4_xs_8(int64_t n, float* out, const void* w, const void* const* xp) { dot_iq4_xs<8>(n, out, w, xp); }

// NR weight rows against one Q8_K row (decode): per row the operations of
// dot_iq4_xs<1> in the same order; the activation is loaded once per sub-block and
// the next rows' super-blocks are prefetched.
template <int NR>
void dot_iq4_xs_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  const BlockIQ4_XS* a[NR];
  row_ptrs<BlockIQ4_XS, NR>(w, w_stride, a);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  __m256 acc[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  const size_t ahead = NR * w_stride;
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m256i sumi[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const char* p = reinterpret_cast<const char*>(a[r] + i) + ahead;
      for (size_t o = 0; o < sizeof(BlockIQ4_XS); o += 64) prefetch_l1(p + o);
      prefetch_l1(p + sizeof(BlockIQ4_XS) - 1);
      sumi[r] = _mm256_setzero_si256();
    }
    DF_UNROLL
    for (int j = 0; j < 8; ++j) {
      const __m256i y = loadu256(b[i].qs + 32 * j);
      DF_UNROLL
      for (int r = 0; r < NR; ++r)
        sumi[r] = _mm256_add_epi32(sumi[r], dot_i8_scaled(iq4xs_sub(a[r][i], j), y, iq4xs_scale(a[r][i], j)));
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[r][i].d) * b[i].d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]);
}

// ---- TQ2_0 -------------------------------------------------------------------------

// Run k (values 32k..32k+31) of a TQ2_0 block's codes 0..2: bits 2(k % 4) of
// qs[32(k / 4) ..].
inline __m256i tq2_0_codes(const BlockTQ2_0& a, int k) {
  return _mm256_and_si256(_mm256_srli_epi16(loadu256(a.qs + 32 * (k / 4)), 2 * (k % 4)), _mm256_set1_epi8(3));
}

// The super-block's exact sum of (q - 1) * y as eight int32 lanes: codes times the
// activations, less the activations' sum (the sixteen bsums); lane m holds bytes
// 4m..4m+3 of every 32-value run less bsums 2m and 2m + 1.
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
inline __m256i tq2_0_block(const BlockTQ2_0& a, const BlockQ8_K& b) {
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.bsums));
  __m256i s = _mm256_madd_epi16(bsums, _mm256_set1_epi16(-1));
  DF_UNROLL
  for (int k = 0; k < 8; ++k) s = _mm256_dpbusd_epi32(s, tq2_0_codes(a, k), loadu256(b.qs + 32 * k));
  return s;
}
#else
// Without VNNI the products sum as int16 (eight pairs of at most 3 x 128 x 2, codes to
// 3 in a damaged file, less a bsum of at most 16 x 128: within 8192) and one vpmaddwd
// ends the super-block: each lane's integer, and so the bits, as a vpmaddwd per run.
inline __m256i tq2_0_block(const BlockTQ2_0& a, const BlockQ8_K& b) {
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.bsums));
  __m256i s = _mm256_setzero_si256();
  DF_UNROLL
  for (int k = 0; k < 8; ++k) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(tq2_0_codes(a, k), loadu256(b.qs + 32 * k)));
  return _mm256_madd_epi16(_mm256_sub_epi16(s, bsums), _mm256_set1_epi16(1));
}
#endif

template <int NT>
void dot_tq2_0(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockTQ2_0*>(w);
  const BlockQ8_K* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_K*>(xp[t]);
  __m256 acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = h2f(a[i].d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * b[t][i].d), _mm256_cvtepi32_ps(tq2_0_block(a[i], b[t][i])), acc[t]);
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
}

void dot_tq2_0_1(int64_t n, float* out, const void* w, const void* x) { dot_tq2_0<1>(n, out, w, &x); }
void dot_tq2_0_4(int64_t n, float* out, const void* w, const void* const* xp) { dot_tq2_0<4>(n, out, w, xp); }

// NR weight rows against one Q8_K row (decode): per row the operations of
// dot_tq2_0<1> in the same order, four independent chains, next rows prefetched.
template <int NR>
void dot_tq2_0_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  const BlockTQ2_0* a[NR];
  row_ptrs<BlockTQ2_0, NR>(w, w_stride, a);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  __m256 acc[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  const size_t ahead = NR * w_stride;
  for (int64_t i = 0; i < n / kQK; ++i) {
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const char* p = reinterpret_cast<const char*>(a[r] + i) + ahead;
      prefetch_l1(p);
      prefetch_l1(p + sizeof(BlockTQ2_0) - 1);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[r][i].d) * b[i].d), _mm256_cvtepi32_ps(tq2_0_block(a[r][i], b[i])),
                               acc[r]);
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]);
}

// Fills the rows of Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, TQ2_0 and Q8_1's quantizer in `t`, marking
// them with `isa`.
inline void install_legacy_x86(TypeTraits* t, Isa isa) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4, VecDotR4Fn dot_r4) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = dot_r4;
    r.isa = isa;
  };
  set(DType::Q5_0, dot_q32_1<DecodeQ5_0>, dot_q32_4<DecodeQ5_0>, dot_q32_rows<DecodeQ5_0, 4>);
  set(DType::IQ4_NL, dot_q32_1<DecodeIQ4_NL>, dot_q32_4<DecodeIQ4_NL>, dot_q32_rows<DecodeIQ4_NL, 4>);
  set(DType::Q4_1, dot_q32m_1<DecodeQ4_1>, dot_q32m_4<DecodeQ4_1>, dot_q32m_rows<DecodeQ4_1, 4>);
  set(DType::Q5_1, dot_q32m_1<DecodeQ5_1>, dot_q32m_4<DecodeQ5_1>, dot_q32m_rows<DecodeQ5_1, 4>);
  set(DType::IQ4_XS, dot_iq4_xs_1, dot_iq4_xs_4, dot_iq4_xs_rows<4>);
  t[uint32_t(DType::IQ4_XS)].vec_dot_x8 = dot_iq4_xs_8;
  set(DType::TQ2_0, dot_tq2_0_1, dot_tq2_0_4, dot_tq2_0_rows<4>);
  t[uint32_t(DType::Q8_1)].from_float = quantize_q8_1_x86;
}

}  // namespace
}  // namespace deltafin::kern
