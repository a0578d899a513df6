// x86 SIMD kernels shared by the AVX2 and AVX-512 translation units: included only
// from *_avx2.cpp / *_avx512.cpp, and everything here has internal linkage so the
// two builds (different -m flags) never merge into one symbol.
//
// Contents: helpers, the 32-value block dots (Q8_0, Q4_0, MXFP4 against Q8_0) for 1
// or 4 activation rows and for 4 weight rows (decode), and the activation quantizers
// to Q8_0 and Q8_K. Built with AVX512-VNNI the signed 8-bit dot uses vpdpbusd,
// otherwise maddubs + madd.
#pragma once
#include <immintrin.h>

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_*().
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/kernels_impl.h"  // DF_UNROLL

namespace deltafin::kern {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum8_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Eight int32 sums of four products a[i] * b[i] (signed bytes; a != -128). The sign
// of a moves onto b so the unsigned x signed instructions apply.
inline __m256i dot_i8(__m256i a, __m256i b) {
  __m256i ua = _mm256_sign_epi8(a, a), sb = _mm256_sign_epi8(b, a);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ua, sb);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ua, sb), _mm256_set1_epi16(1));
#endif
}

// 16 packed nibbles -> 32 bytes: low nibbles first (elements 0..15), then high.
inline __m256i unpack_nibbles16(const uint8_t* p) {
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

// 16 packed nibbles -> 32 signed bytes table[nibble], in unpack_nibbles16's order.
inline __m256i lookup_nibbles16(const int8_t (&table)[16], const uint8_t* p) {
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
  return _mm256_shuffle_epi8(lut, unpack_nibbles16(p));
}

// A 16-entry level table moved up by `offset` (each level + offset as a byte), for the
// kernels that multiply unsigned weights: derived from the format's own table.
struct Table16 {
  alignas(16) int8_t v[16];
};
constexpr Table16 offset_levels(const int8_t (&levels)[16], int offset) {
  Table16 t{};
  for (int i = 0; i < 16; ++i) t.v[i] = int8_t(uint8_t(levels[i] + offset));
  return t;
}

// A software prefetch into L1 that the optimiser keeps: GCC 12 deletes
// __builtin_prefetch/_mm_prefetch inside some loops (seen in dot_q32_pairs_rows),
// as if they had no effect. Prefetching any address is safe (it never faults).
inline void prefetch_l1(const void* p) { asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p))); }

// a[r] = row r of NR weight rows `w_stride` bytes apart (the decode kernels' rows).
template <class Block, int NR>
inline void row_ptrs(const void* w, size_t w_stride, const Block** a) {
  DF_UNROLL
  for (int r = 0; r < NR; ++r) a[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * w_stride);
}

inline __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// sc[0..7] then m[0..7] of a Q4_K / Q5_K super-block (layout in blocks.h), unpacked
// in vector registers from the 12 scale bytes. Reads 16 bytes at s: the 4 bytes past
// the scales belong to the same block.
inline __m128i k4_scales(const uint8_t* s) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));  // u0 u1 u2 (u3 unused)
  __m128i a = _mm_shuffle_epi32(v, 0x98);                            // u0 u2 u1 u2
  a = _mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4));                // u0 u2 u1 u2>>4
  __m128i low = _mm_and_si128(a, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  __m128i b = _mm_srli_epi32(_mm_shuffle_epi32(v, 0x50), 2);        // u0 u0 u1 u1, >> 2
  __m128i high = _mm_and_si128(b, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, high);
}

// The fp16 scales (field d) of eight consecutive blocks as floats.
template <class Block>
inline __m256 fp16_scales8(const Block* b) {
  alignas(16) uint16_t h[8];
  DF_UNROLL
  for (int k = 0; k < 8; ++k) h[k] = b[k].d;
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

// Decoders of a 32-value weight block: signed int8 values (never -128) and the scale,
// one block (d) or eight at once (d8).
struct DecodeQ8_0 {
  using Block = BlockQ8_0;
  static __m256i q(const Block& b) { return loadu256(b.qs); }
  static float d(const Block& b) { return h2f(b.d); }
  static __m256 d8(const Block* b) { return fp16_scales8(b); }
};
struct DecodeQ4_0 {
  using Block = BlockQ4_0;
  static __m256i q(const Block& b) { return _mm256_sub_epi8(unpack_nibbles16(b.qs), _mm256_set1_epi8(8)); }
  static float d(const Block& b) { return h2f(b.d); }
  static __m256 d8(const Block* b) { return fp16_scales8(b); }
};
struct DecodeIQ4_NL {
  using Block = BlockIQ4_NL;
  static __m256i q(const Block& b) { return lookup_nibbles16(kIq4nlValues, b.qs); }
  static float d(const Block& b) { return h2f(b.d); }
  static __m256 d8(const Block* b) { return fp16_scales8(b); }
};
struct DecodeMXFP4 {
  using Block = BlockMXFP4;
  static __m256i q(const Block& b) { return lookup_nibbles16(kMxfp4Values, b.qs); }
  static float d(const Block& b) { return e8m0_half_to_f32(b.e); }
  static __m256 d8(const Block* b) {  // 2^(e - 128): exponent field e - 1, subnormal below e = 2
    alignas(32) uint32_t e[8];
    DF_UNROLL
    for (int k = 0; k < 8; ++k) e[k] = b[k].e;
    __m256i ev = _mm256_load_si256(reinterpret_cast<const __m256i*>(e));
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(ev, _mm256_set1_epi32(1)), 23);
    __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), ev);
    __m256i is_tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), ev);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, is_tiny));
  }
};

// out[t] = dot(w, xp[t]) for NT activation rows of Q8_0. Scales are handled eight
// blocks at a time (one vector product, then broadcasts from memory): done per block
// in scalar code they cost as much as the dot itself. Two accumulators per row so the
// FMA latency chain does not limit the single-row (decode) case.
template <class Dec, int NT>
void dot_q32(int64_t n, float* out, const void* w, const void* const* xp) {
  using Block = typename Dec::Block;
  const auto* a = static_cast<const Block*>(w);
  const BlockQ8_0* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_0*>(xp[t]);
  const int64_t nb = n / kQ32;
  __m256 acc[NT][2];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    alignas(32) float d[NT][8];
    const __m256 da = Dec::d8(a + i);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) _mm256_store_ps(d[t], _mm256_mul_ps(da, fp16_scales8(b[t] + i)));
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
    float da = Dec::d(a[i]);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m256i p = dot_i8(qa, loadu256(b[t][i].qs));
      acc[t][0] = _mm256_fmadd_ps(_mm256_set1_ps(da * h2f(b[t][i].d)), _mm256_cvtepi32_ps(p), acc[t][0]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = hsum8(_mm256_add_ps(acc[t][0], acc[t][1]));
}

template <class Dec>
void dot_q32_1(int64_t n, float* out, const void* w, const void* x) {
  dot_q32<Dec, 1>(n, out, w, &x);
}
template <class Dec>
void dot_q32_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_q32<Dec, 4>(n, out, w, xp);
}

// Prefetches the eight blocks from block i of the NR rows that follow rows a[0..NR)
// (`ahead` = NR row strides on): the decode matvecs stream weights from DRAM.
template <class Block, int NR>
inline void prefetch_next_rows(const Block* const* a, int64_t i, size_t ahead) {
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    const char* p = reinterpret_cast<const char*>(a[r] + i) + ahead;
    for (size_t o = 0; o < 8 * sizeof(Block); o += 64) prefetch_l1(p + o);
    prefetch_l1(p + 8 * sizeof(Block) - 1);
  }
}

// A Q8_0 activation row as quantized, for dot_q32_rows_over: a block's eight int32
// lane sums from the signed weight (dot_i8), the scales converted from fp16.
struct Q8_0Row {
  const BlockQ8_0* b;
  template <class Dec>
  static __m256i weight(const typename Dec::Block& a) { return Dec::q(a); }
  __m256i sums(__m256i q, int64_t i) const { return dot_i8(q, loadu256(b[i].qs)); }
  __m256 scales8(int64_t i) const { return fp16_scales8(b + i); }
  float scale(int64_t i) const { return h2f(b[i].d); }
};

// out[r] = dot(w row r, x) for NR rows of a 32-value block type, `w_stride` bytes
// apart, against one activation row X (Q8_0Row, or a prepared row: q32_avx2.cpp): the
// decode matvec's kernel. Per row the operations of dot_q32<Dec, 1> in the same order
// (each result bit-identical to vec_dot); the activation's quants and scales are
// loaded once for all rows, the rows' chains overlap, and the next rows' blocks are
// prefetched (decode streams weights from DRAM).
template <class Dec, int NR, class X>
void dot_q32_rows_over(int64_t n, float* out, const void* w, size_t w_stride, const X x) {
  using Block = typename Dec::Block;
  const Block* a[NR];
  row_ptrs<Block, NR>(w, w_stride, a);
  const int64_t nb = n / kQ32;
  __m256 acc[NR][2];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const size_t ahead = NR * w_stride;
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    if constexpr (NR > 1) prefetch_next_rows<Block, NR>(a, i, ahead);
    const __m256 db = x.scales8(i);
    alignas(32) float d[NR][8];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) _mm256_store_ps(d[r], _mm256_mul_ps(Dec::d8(a[r] + i), db));
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        const __m256i p = x.sums(X::template weight<Dec>(a[r][i + k]), i + k);
        acc[r][k & 1] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[r][k]), _mm256_cvtepi32_ps(p), acc[r][k & 1]);
      }
    }
  }
  for (; i < nb; ++i) {
    const float dy = x.scale(i);
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const __m256i p = x.sums(X::template weight<Dec>(a[r][i]), i);
      acc[r][0] = _mm256_fmadd_ps(_mm256_set1_ps(Dec::d(a[r][i]) * dy), _mm256_cvtepi32_ps(p), acc[r][0]);
    }
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = hsum8(_mm256_add_ps(acc[r][0], acc[r][1]));
}
template <class Dec, int NR>
void dot_q32_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  dot_q32_rows_over<Dec, NR>(n, out, w, w_stride, Q8_0Row{static_cast<const BlockQ8_0*>(x)});
}

// Four vectors of eight int32 (32 values) -> 32 saturated int8 in element order.
inline __m256i pack_i32x32_to_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  __m256i p01 = _mm256_packs_epi32(i0, i1);    // per 128-bit lane: i0[0..3] i1[0..3] | i0[4..7] i1[4..7]
  __m256i p23 = _mm256_packs_epi32(i2, i3);
  __m256i p = _mm256_packs_epi16(p01, p23);   // lane-interleaved dwords
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline __m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }

// Same float operations as from_float_q8_0_ref (cvtps rounds to nearest even, as
// nearbyint does), hence identical bytes.
inline void quantize_q8_0_x86(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQ32; ++i, x += kQ32) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v0), abs_ps(v1)), _mm256_max_ps(abs_ps(v2), abs_ps(v3)));
    float amax = hmax8(m);
    float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;  // ggml's x86 form, not 1/d
    y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    __m256 s = _mm256_set1_ps(id);
    __m256i q = pack_i32x32_to_i8(_mm256_cvtps_epi32(_mm256_mul_ps(v0, s)), _mm256_cvtps_epi32(_mm256_mul_ps(v1, s)),
                                  _mm256_cvtps_epi32(_mm256_mul_ps(v2, s)), _mm256_cvtps_epi32(_mm256_mul_ps(v3, s)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), q);
  }
}

// Same float operations as from_float_q8_k_ref.
inline void quantize_q8_k_x86(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    __m256 m = _mm256_setzero_ps();
    for (int e = 0; e < kQK; e += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + e)));
    float amax = hmax8(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    float iscale = 127.0f / amax;
    __m256 s = _mm256_set1_ps(iscale);
    for (int g = 0; g < kQK; g += 32) {
      __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g), s));
      __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 8), s));
      __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 16), s));
      __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 24), s));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + g), pack_i32x32_to_i8(i0, i1, i2, i3));
      y[i].bsums[g / 16] = int16_t(hsum8_i32(_mm256_add_epi32(i0, i1)));
      y[i].bsums[g / 16 + 1] = int16_t(hsum8_i32(_mm256_add_epi32(i2, i3)));
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace
}  // namespace deltafin::kern
