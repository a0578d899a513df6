// AVX-512 (F, BW, VL, DQ, VNNI) kernels: the float types with 512-bit vectors, the
// 32-value block types two blocks per vector with vpdpbusd and scales loaded 16
// blocks at a time, the activation quantizers (x86_common.h); install_avx512 also
// pulls in the K-quants (kquants_avx512.cpp). Rows it does not set keep their AVX2
// kernels.
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/kernels_impl.h"
#include "kernels/x86_common.h"

namespace deltafin::kern {

namespace {

inline __m512 load16_f32(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16_bf16(const uint16_t* p) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline float id_f32(float v) { return v; }
inline float bf16_scalar(uint16_t v) { return bf16_to_f32(v); }

// out[t] = dot(w, x_t) over n values; 4 accumulators per row for NT == 1.
template <class T, __m512 (*Load)(const T*), float (*Scalar)(T), int NT>
void dot_float(int64_t n, float* out, const void* w, const void* const* xp) {
  const T* a = static_cast<const T*>(w);
  const T* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const T*>(xp[t]);
  // Four accumulators per row whatever NT is: a row's sum is then computed in
  // the same order alone or in a group (batch invariance, test_kernels X4EqualsSingle).
  constexpr int U = 4;
  __m512 acc[NT][U];
  DF_UNROLL
  for (int t = 0; t < NT; ++t)
    DF_UNROLL
    for (int u = 0; u < U; ++u) acc[t][u] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 * U <= n; i += 16 * U) {
    DF_UNROLL
    for (int u = 0; u < U; ++u) {
      __m512 va = Load(a + i + 16 * u);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[t][u] = _mm512_fmadd_ps(va, Load(b[t] + i + 16 * u), acc[t][u]);
    }
  }
  for (; i + 16 <= n; i += 16) {
    __m512 va = Load(a + i);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) acc[t][0] = _mm512_fmadd_ps(va, Load(b[t] + i), acc[t][0]);
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    for (int u = 1; u < U; ++u) acc[t][0] = _mm512_add_ps(acc[t][0], acc[t][u]);
    float s = _mm512_reduce_add_ps(acc[t][0]);
    for (int64_t j = i; j < n; ++j) s += Scalar(a[j]) * Scalar(b[t][j]);
    out[t] = s;
  }
}

template <class T, __m512 (*Load)(const T*), float (*Scalar)(T)>
void dot_float_1(int64_t n, float* out, const void* w, const void* x) {
  dot_float<T, Load, Scalar, 1>(n, out, w, &x);
}
template <class T, __m512 (*Load)(const T*), float (*Scalar)(T)>
void dot_float_4(int64_t n, float* out, const void* w, const void* const* xp) {
  // Two rows at a time keeps the accumulators in registers (2 x 4).
  dot_float<T, Load, Scalar, 2>(n, out, w, xp);
  dot_float<T, Load, Scalar, 2>(n, out + 2, w, xp + 2);
}

// F16 and F32 rows in the summation orders of ggml's CPU backend (AVX-512 build),
// whose F16 matmuls round their activations to F16: a sum that differs from ggml's in
// its last bit now and then puts an element on the other side of a rounding step
// downstream (also after an F32 matmul, e.g. MLA's k_b/v_b in an F16 file).
// vec_dot (ggml_vec_dot_f16/_f32): four 16-lane accumulators over 64-value steps,
// summed (0+2)+(1+3), then across lanes; the n % 64 tail added in double (F16) or
// in float, multiply then add (F32). Per row the same operations whatever NT is
// (x4 == single).
template <class T, __m512 (*Load)(const T*), int NT>
void dot_ggml(int64_t n, float* out, const void* w, const void* const* xp) {
  const T* a = static_cast<const T*>(w);
  const T* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const T*>(xp[t]);
  __m512 s[NT][4];
  DF_UNROLL
  for (int t = 0; t < NT; ++t)
    DF_UNROLL
    for (int u = 0; u < 4; ++u) s[t][u] = _mm512_setzero_ps();
  const int64_t np = n & ~int64_t(63);
  for (int64_t i = 0; i < np; i += 64) {
    DF_UNROLL
    for (int u = 0; u < 4; ++u) {
      const __m512 va = Load(a + i + 16 * u);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) s[t][u] = _mm512_fmadd_ps(va, Load(b[t] + i + 16 * u), s[t][u]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    const __m512 r = _mm512_add_ps(_mm512_add_ps(s[t][0], s[t][2]), _mm512_add_ps(s[t][1], s[t][3]));
    if constexpr (std::is_same_v<T, float>) {
      float sum = _mm512_reduce_add_ps(r);
      for (int64_t i = np; i < n; ++i) {
        float p = a[i] * b[t][i];
        __asm__("" : "+v"(p));  // a separate multiply and add, never contracted to an FMA
        sum += p;
      }
      out[t] = sum;
    } else {
      double sum = _mm512_reduce_add_ps(r);
      for (int64_t i = np; i < n; ++i) sum += double(h2f(a[i]) * h2f(b[t][i]));
      out[t] = float(sum);
    }
  }
}
template <class T, __m512 (*Load)(const T*)>
void dot_ggml_1(int64_t n, float* out, const void* w, const void* x) {
  dot_ggml<T, Load, 1>(n, out, w, &x);
}
template <class T, __m512 (*Load)(const T*)>
void dot_ggml_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_ggml<T, Load, 2>(n, out, w, xp);
  dot_ggml<T, Load, 2>(n, out + 2, w, xp + 2);
}
// vec_dot_gemm_x4 (tinyBLAS<16, __m512>): one 16-lane accumulator per row over all n
// (n % 16 == 0), then across lanes.
template <class T, __m512 (*Load)(const T*)>
void dot_gemm_4(int64_t n, float* out, const void* w, const void* const* xp) {
  const T* a = static_cast<const T*>(w);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 va = Load(a + i);
    DF_UNROLL
    for (int t = 0; t < 4; ++t) acc[t] = _mm512_fmadd_ps(va, Load(static_cast<const T*>(xp[t]) + i), acc[t]);
  }
  DF_UNROLL
  for (int t = 0; t < 4; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

// BF16 rows in the orders of ggml's CPU build on a CPU with AVX512_BF16, whose BF16
// matmuls round their activations to BF16 and sum with vdpbf16ps: per 32-value step
// each of 16 lanes adds its odd pair's product, then its even pair's. deltafin runs
// the same instruction (until session 21 it emulated it with two FMAs per step, exact
// but for denormals, which the instruction flushes; prefill of BF16 experts ran at
// 0.62x llama.cpp). vec_dot (ggml_vec_dot_bf16): two accumulators over 64-value steps,
// each summed across lanes into a double, the tail in double; vec_dot_gemm_x4
// (tinyBLAS<32, __m512bh>): one accumulator per row over all n (n % 32 == 0), then
// across lanes.
#define DF_BF16 __attribute__((target("avx512bf16")))
DF_BF16 inline __m512 dp_bf16(__m512 c, const uint16_t* a, const uint16_t* b) {
  return _mm512_dpbf16_ps(c, (__m512bh)_mm512_loadu_si512(a), (__m512bh)_mm512_loadu_si512(b));
}
template <int NT>
DF_BF16 void dot_bf16_ggml(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const uint16_t*>(w);
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    const auto* b = static_cast<const uint16_t*>(xp[t]);
    __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      c1 = dp_bf16(c1, a + i, b + i);
      c2 = dp_bf16(c2, a + i + 32, b + i + 32);
    }
    double sum = 0;
    sum += double(_mm512_reduce_add_ps(c1));
    sum += double(_mm512_reduce_add_ps(c2));
    for (; i < n; ++i) sum += double(bf16_to_f32(a[i]) * bf16_to_f32(b[i]));
    out[t] = float(sum);
  }
}
DF_BF16 void dot_bf16_ggml_1(int64_t n, float* out, const void* w, const void* x) { dot_bf16_ggml<1>(n, out, w, &x); }
DF_BF16 void dot_bf16_ggml_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_bf16_ggml<4>(n, out, w, xp);
}
DF_BF16 void dot_bf16_gemm_4(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const uint16_t*>(w);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t i = 0; i < n; i += 32) {
    DF_UNROLL
    for (int t = 0; t < 4; ++t) acc[t] = dp_bf16(acc[t], a + i, static_cast<const uint16_t*>(xp[t]) + i);
  }
  DF_UNROLL
  for (int t = 0; t < 4; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}
// Four rows by four tokens (types.h vec_dot_tile, with no prep: it reads the BF16
// activation rows as they are): each (row, token) is dot_bf16_ggml's, its two accumulators in two passes
// of 16 chains, so a step loads four rows and four tokens for 16 vdpbf16ps instead of
// a row and a token for each.
DF_BF16 void dot_bf16_tile(int64_t n, float* out, const void* w, size_t w_stride, const void* const* xp) {
  const uint16_t* a[4];
  row_ptrs<uint16_t, 4>(w, w_stride, a);
  const uint16_t* b[4];
  DF_UNROLL
  for (int t = 0; t < 4; ++t) b[t] = static_cast<const uint16_t*>(xp[t]);
  const int64_t n64 = n & ~int64_t(63);
  double sum[4][4] = {};
  for (int64_t half = 0; half < 64; half += 32) {
    __m512 c[4][4];
    DF_UNROLL
    for (int r = 0; r < 4; ++r)
      DF_UNROLL
      for (int t = 0; t < 4; ++t) c[r][t] = _mm512_setzero_ps();
    for (int64_t i = half; i < n64; i += 64) {
      __m512i wa[4];
      DF_UNROLL
      for (int r = 0; r < 4; ++r) wa[r] = _mm512_loadu_si512(a[r] + i);
      DF_UNROLL
      for (int t = 0; t < 4; ++t) {
        const __m512i x = _mm512_loadu_si512(b[t] + i);
        DF_UNROLL
        for (int r = 0; r < 4; ++r) c[r][t] = _mm512_dpbf16_ps(c[r][t], (__m512bh)wa[r], (__m512bh)x);
      }
    }
    DF_UNROLL
    for (int r = 0; r < 4; ++r)
      DF_UNROLL
      for (int t = 0; t < 4; ++t) sum[r][t] += double(_mm512_reduce_add_ps(c[r][t]));
  }
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < 4; ++t) {
      double s = sum[r][t];
      for (int64_t i = n64; i < n; ++i) s += double(bf16_to_f32(a[r][i]) * bf16_to_f32(b[t][i]));
      out[4 * r + t] = float(s);
    }
}
#undef DF_BF16

// ---- 32-value blocks, two per 512-bit vector -------------------------------------------

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Two blocks of 16 packed nibbles -> 64 bytes: block 0 low nibbles, block 0 high
// nibbles, block 1 low, block 1 high (each block's values in element order).
inline __m512i unpack_nibbles_pair(const uint8_t* p0, const uint8_t* p1) {
  __m256i raw = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0)));
  __m512i x = _mm512_shuffle_i64x2(_mm512_castsi256_si512(raw), _mm512_castsi256_si512(raw), 0x50);  // lanes 0 0 1 1
  x = _mm512_mask_srli_epi16(x, 0xff00ff00u, x, 4);  // 128-bit lanes 1 and 3: high nibbles
  return _mm512_and_si512(x, _mm512_set1_epi8(15));
}

// Two fp16 scales -> floats in lanes 0, 1.
inline __m128 h2f_pair(uint16_t a, uint16_t b) { return _mm_cvtph_ps(_mm_cvtsi32_si128(int(a | (uint32_t(b) << 16)))); }

// The fp16 scales of 16 consecutive blocks of `stride` bytes (d at offset 0), by
// scalar loads: vpgatherdd is slow on AMD (measured on an EPYC, Zen 5), where it
// stalled the decode matvec (perf put the time on the gathers and on the prefetches
// queued behind them).
inline __m512 fp16_scales16(const void* first, int stride) {
  alignas(32) uint16_t h[16];
  const auto* p = static_cast<const uint8_t*>(first);
  DF_UNROLL
  for (int k = 0; k < 16; ++k) std::memcpy(&h[k], p + k * stride, 2);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// Two blocks of nibble codes as the levels of `table` (unpack_nibbles_pair's order),
// for the tile kernels' unsigned weights.
template <class Block>
inline __m512i unsigned_levels(const Table16& table, const Block& a, const Block& b) {
  const __m512i lut = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(table.v)));
  return _mm512_shuffle_epi8(lut, unpack_nibbles_pair(a.qs, b.qs));
}

struct Pair8_0 {
  using Block = BlockQ8_0;
  // |values| of both blocks and the mask of negative ones.
  static __m512i q(const Block& a, const Block& b, __mmask64* neg) {
    __m512i v = join(loadu256(a.qs), loadu256(b.qs));
    *neg = _mm512_movepi8_mask(v);
    return _mm512_abs_epi8(v);
  }
  static __m512i u(const Block& a, const Block& b) {
    return _mm512_xor_si512(join(loadu256(a.qs), loadu256(b.qs)), _mm512_set1_epi8(int8_t(0x80)));
  }
  static __m128 d(const Block& a, const Block& b) { return h2f_pair(a.d, b.d); }
  static __m512 d16(const Block* a) { return fp16_scales16(a, sizeof(Block)); }
};
struct Pair4_0 {
  using Block = BlockQ4_0;
  // |code - 8| from a table; negative where code < 8 (bit 3 clear).
  static __m512i q(const Block& a, const Block& b, __mmask64* neg) {
    alignas(16) static constexpr int8_t kAbs[16] = {8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6, 7};
    const __m512i lut = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kAbs)));
    __m512i codes = unpack_nibbles_pair(a.qs, b.qs);
    *neg = _mm512_testn_epi8_mask(codes, _mm512_set1_epi8(8));
    return _mm512_shuffle_epi8(lut, codes);
  }
  // code - 8 + 128
  static __m512i u(const Block& a, const Block& b) {
    return _mm512_add_epi8(unpack_nibbles_pair(a.qs, b.qs), _mm512_set1_epi8(120));
  }
  static __m128 d(const Block& a, const Block& b) { return h2f_pair(a.d, b.d); }
  static __m512 d16(const Block* a) { return fp16_scales16(a, sizeof(Block)); }
};
struct PairIQ4_NL {
  using Block = BlockIQ4_NL;
  // |level| from a table; negative where code < 8 (the levels ascend through zero there).
  static __m512i q(const Block& a, const Block& b, __mmask64* neg) {
    static constexpr std::array<int8_t, 16> kAbs = [] {
      std::array<int8_t, 16> a{};
      for (int i = 0; i < 16; ++i) a[size_t(i)] = int8_t(kIq4nlValues[i] < 0 ? -kIq4nlValues[i] : kIq4nlValues[i]);
      return a;
    }();
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kAbs.data())));
    __m512i codes = unpack_nibbles_pair(a.qs, b.qs);
    *neg = _mm512_testn_epi8_mask(codes, _mm512_set1_epi8(8));
    return _mm512_shuffle_epi8(lut, codes);
  }
  static __m512i u(const Block& a, const Block& b) {
    static constexpr Table16 kU = offset_levels(kIq4nlValues, 128);
    return unsigned_levels(kU, a, b);
  }
  static __m128 d(const Block& a, const Block& b) { return h2f_pair(a.d, b.d); }
  static __m512 d16(const Block* a) { return fp16_scales16(a, sizeof(Block)); }
};
struct PairMXFP4 {
  using Block = BlockMXFP4;
  // Magnitudes from a table of |E2M1| (doubled); the sign is code bit 3.
  static __m512i q(const Block& a, const Block& b, __mmask64* neg) {
    alignas(16) static constexpr int8_t kAbs[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12};
    const __m512i lut = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kAbs)));
    __m512i codes = unpack_nibbles_pair(a.qs, b.qs);
    *neg = _mm512_test_epi8_mask(codes, _mm512_set1_epi8(8));
    return _mm512_shuffle_epi8(lut, codes);
  }
  static __m512i u(const Block& a, const Block& b) {
    static constexpr Table16 kU = offset_levels(kMxfp4Values, 128);
    return unsigned_levels(kU, a, b);
  }
  static __m128 d(const Block& a, const Block& b) { return _mm_setr_ps(e8m0_half_to_f32(a.e), e8m0_half_to_f32(b.e), 0, 0); }
  static __m512 d16(const Block* a) {  // 2^(e - 128), exact (scalef keeps the subnormals of e < 2)
    alignas(16) uint8_t eb[16];
    DF_UNROLL
    for (int k = 0; k < 16; ++k) eb[k] = a[k].e;
    const __m512i e = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(eb)));
    return _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
  }
};

// out[t] = dot(w, x_t) against NT rows of Q8_0. The weight's sign moves onto the
// activations (masked negate) so vpdpbusd's unsigned x signed form applies; lanes
// 0..7 of each product belong to the first block of the pair, 8..15 to the second.
// Scales are loaded 16 blocks at a time (one vector product for all of them), as
// per-block scalar scale handling would cost as much as the dot itself.
template <class Pair, int NT>
inline void pair_step(const typename Pair::Block* a, const BlockQ8_0* const* b, int64_t i, const __m512* d, __m512* acc) {
  __mmask64 neg;
  __m512i ua = Pair::q(a[i], a[i + 1], &neg);
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    __m512i y = join(loadu256(b[t][i].qs), loadu256(b[t][i + 1].qs));
    __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ua, sy);
    acc[t] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(p), acc[t]);
  }
}

template <class Pair, class Single, int NT>
void dot_q32_pairs(int64_t n, float* out, const void* w, const void* const* xp) {
  using Block = typename Pair::Block;
  const auto* a = static_cast<const Block*>(w);
  const BlockQ8_0* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8_0*>(xp[t]);
  const int64_t nb = n / kQ32;
  __m512 acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= nb; i += 16) {
    __m512 da = Pair::d16(a + i);
    __m512 d16[NT];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) d16[t] = _mm512_mul_ps(da, fp16_scales16(b[t] + i, sizeof(BlockQ8_0)));
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      const __m512i spread = _mm512_set_epi32(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                                              2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k);
      __m512 d[NT];
      DF_UNROLL
      for (int t = 0; t < NT; ++t) d[t] = _mm512_permutexvar_ps(spread, d16[t]);
      pair_step<Pair, NT>(a, b, i + 2 * k, d, acc);
    }
  }
  const __m512i spread01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  for (; i + 1 < nb; i += 2) {
    __m128 da = Pair::d(a[i], a[i + 1]);
    __m512 d[NT];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m128 dd = _mm_mul_ps(da, h2f_pair(b[t][i].d, b[t][i + 1].d));
      d[t] = _mm512_permutexvar_ps(spread01, _mm512_castps128_ps512(dd));
    }
    pair_step<Pair, NT>(a, b, i, d, acc);
  }
  float tail[NT] = {};
  if (i < nb) {
    const void* rest[NT];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) rest[t] = b[t] + i;
    dot_q32<Single, NT>(kQ32, tail, a + i, rest);
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]) + tail[t];
}

template <class Pair, class Single>
void dot_q32_pairs_1(int64_t n, float* out, const void* w, const void* x) {
  dot_q32_pairs<Pair, Single, 1>(n, out, w, &x);
}
template <class Pair, class Single>
void dot_q32_pairs_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_q32_pairs<Pair, Single, 4>(n, out, w, xp);
}

// out[r] = dot(w row r, x) for NR weight rows `w_stride` bytes apart against one Q8_0
// row: the decode matvec's kernel. Per row it performs exactly the operations of
// dot_q32_pairs<Pair, Single, 1> in the same order (so each result is bit-identical
// to vec_dot), but the activation's quants and scales are loaded once for all rows
// and the NR accumulator chains run side by side instead of one FMA chain waiting on
// the previous.
template <class Pair, class Single, int NR>
void dot_q32_pairs_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  using Block = typename Pair::Block;
  const Block* a[NR];
  row_ptrs<Block, NR>(w, w_stride, a);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  const int64_t nb = n / kQ32;
  __m512 acc[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  // One row's pair step (pair_step with NT = 1) against the shared activations y.
  auto step = [](const Block* ar, int64_t i, __m512i y, __m512 d, __m512& acc_r) {
    __mmask64 neg;
    __m512i ua = Pair::q(ar[i], ar[i + 1], &neg);
    __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ua, sy);
    acc_r = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc_r);
  };
  // Decode streams weights from DRAM and the scale loads stall on them: fetch the
  // same span of the next NR rows (the caller's next call) while this one computes.
  // Prefetches never fault, so running past the matrix's last row is harmless.
  const size_t ahead = NR * w_stride;
  auto prefetch_next = [&](int64_t first, int64_t count) {
    const int64_t bytes = count * int64_t(sizeof(Block));
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const char* p = reinterpret_cast<const char*>(a[r] + first) + ahead;
      for (int64_t o = 0; o < bytes; o += 64) prefetch_l1(p + o);
      prefetch_l1(p + bytes - 1);
    }
  };
  int64_t i = 0;
  for (; i + 16 <= nb; i += 16) {
    prefetch_next(i, 16);
    const __m512 db = fp16_scales16(b + i, sizeof(BlockQ8_0));
    __m512 d16[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) d16[r] = _mm512_mul_ps(Pair::d16(a[r] + i), db);
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      const __m512i spread = _mm512_set_epi32(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                                              2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k);
      const int64_t j = i + 2 * k;
      const __m512i y = join(loadu256(b[j].qs), loadu256(b[j + 1].qs));
      DF_UNROLL
      for (int r = 0; r < NR; ++r) step(a[r], j, y, _mm512_permutexvar_ps(spread, d16[r]), acc[r]);
    }
  }
  const __m512i spread01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  if (i < nb) prefetch_next(i, nb - i);
  for (; i + 1 < nb; i += 2) {
    const __m128 db = h2f_pair(b[i].d, b[i + 1].d);
    const __m512i y = join(loadu256(b[i].qs), loadu256(b[i + 1].qs));
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      __m128 dd = _mm_mul_ps(Pair::d(a[r][i], a[r][i + 1]), db);
      step(a[r], i, y, _mm512_permutexvar_ps(spread01, _mm512_castps128_ps512(dd)), acc[r]);
    }
  }
  float tail[NR] = {};
  if (i < nb) {
    const void* rest = b + i;
    DF_UNROLL
    for (int r = 0; r < NR; ++r) dot_q32<Single, 1>(kQ32, &tail[r], a[r] + i, &rest);
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = _mm512_reduce_add_ps(acc[r]) + tail[r];
}

// ---- Batches: four weight rows x four prepared activation rows ---------------------------
//
// Prefill multiplies each weight row by many tokens. Per pair of blocks the kernels
// above pay per token for joining its two 34-byte blocks, a sign mask and a masked
// negate (vpdpbusd multiplies unsigned by signed bytes). Here the weights carry the
// sign instead: u = level + 128 as an unsigned byte, and the lane starts from
// -128 * (its four activation bytes' sum), so that vpdpbusd leaves in every int32 lane
// exactly the sum of level x activation that the sign-trick kernels leave there. The
// activation's joined bytes, that start value and its scales spread over the lanes are
// prepared once per token (prep_q8_0_pairs) for the whole matrix. The float steps
// then run in the order of dot_q32_pairs per row and token (the scale product of a
// lane is the same two floats multiplied, whichever is spread first), so each result
// is vec_dot's bit for bit (test_kernels: KernelDot.TileEqualsVecDotBitForBit).

// A prepared row: per pair of blocks 64 activation bytes, 16 int32 start values and
// 16 scales (lanes 0..7 the first block's, 8..15 the second's); after them a last odd
// block as it was.
constexpr size_t kPrepStep = 192;
size_t prep_bytes_q8_0_pairs(int64_t n) {
  const int64_t nb = n / kQ32;
  return size_t(nb / 2) * kPrepStep + (nb % 2 != 0 ? sizeof(BlockQ8_0) : 0);
}

void prep_q8_0_pairs(int64_t n, void* dst, const void* x) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  auto* o = static_cast<uint8_t*>(dst);
  const int64_t nb = n / kQ32;
  const __m512i spread01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  int64_t i = 0;
  for (; i + 1 < nb; i += 2, o += kPrepStep) {
    const __m512i y = join(loadu256(b[i].qs), loadu256(b[i + 1].qs));
    const __m512i sum128 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(int8_t(0x80)), y);
    _mm512_storeu_si512(o, y);
    _mm512_storeu_si512(o + 64, _mm512_sub_epi32(_mm512_setzero_si512(), sum128));
    _mm512_storeu_ps(o + 128, _mm512_permutexvar_ps(spread01, _mm512_castps128_ps512(h2f_pair(b[i].d, b[i + 1].d))));
  }
  if (i < nb) std::memcpy(o, &b[i], sizeof(BlockQ8_0));
}

inline void tile_step(const __m512i* u, const __m512* da, const uint8_t* const* p, size_t off, __m512 (*acc)[4]) {
  DF_UNROLL
  for (int t = 0; t < 4; ++t) {
    const __m512i y = _mm512_loadu_si512(p[t] + off);
    const __m512i c = _mm512_loadu_si512(p[t] + off + 64);
    const __m512 db = _mm512_loadu_ps(p[t] + off + 128);
    DF_UNROLL
    for (int r = 0; r < 4; ++r) {
      const __m512i q = _mm512_dpbusd_epi32(c, u[r], y);
      acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(da[r], db), _mm512_cvtepi32_ps(q), acc[r][t]);
    }
  }
}

// out[4 * r + t] = dot(w + r * w_stride, x_t) for four rows and four prepared rows.
template <class Pair, class Single>
void dot_q32_tile(int64_t n, float* out, const void* w, size_t w_stride, const void* const* xp) {
  using Block = typename Pair::Block;
  const Block* a[4];
  row_ptrs<Block, 4>(w, w_stride, a);
  const uint8_t* p[4];
  DF_UNROLL
  for (int t = 0; t < 4; ++t) p[t] = static_cast<const uint8_t*>(xp[t]);
  const int64_t nb = n / kQ32;
  __m512 acc[4][4];
  DF_UNROLL
  for (int r = 0; r < 4; ++r)
    DF_UNROLL
    for (int t = 0; t < 4; ++t) acc[r][t] = _mm512_setzero_ps();
  size_t off = 0;
  int64_t i = 0;
  for (; i + 16 <= nb; i += 16) {
    __m512 da16[4];
    DF_UNROLL
    for (int r = 0; r < 4; ++r) da16[r] = Pair::d16(a[r] + i);
    DF_UNROLL
    for (int k = 0; k < 8; ++k, off += kPrepStep) {
      const __m512i spread = _mm512_set_epi32(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                                              2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k);
      __m512i u[4];
      __m512 da[4];
      DF_UNROLL
      for (int r = 0; r < 4; ++r) {
        u[r] = Pair::u(a[r][i + 2 * k], a[r][i + 2 * k + 1]);
        da[r] = _mm512_permutexvar_ps(spread, da16[r]);
      }
      tile_step(u, da, p, off, acc);
    }
  }
  const __m512i spread01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  for (; i + 1 < nb; i += 2, off += kPrepStep) {
    __m512i u[4];
    __m512 da[4];
    DF_UNROLL
    for (int r = 0; r < 4; ++r) {
      u[r] = Pair::u(a[r][i], a[r][i + 1]);
      da[r] = _mm512_permutexvar_ps(spread01, _mm512_castps128_ps512(Pair::d(a[r][i], a[r][i + 1])));
    }
    tile_step(u, da, p, off, acc);
  }
  float tail[4][4] = {};
  if (i < nb) {
    const void* rest[4];
    DF_UNROLL
    for (int t = 0; t < 4; ++t) rest[t] = p[t] + off;
    DF_UNROLL
    for (int r = 0; r < 4; ++r) dot_q32<Single, 4>(kQ32, tail[r], a[r] + i, rest);
  }
  DF_UNROLL
  for (int r = 0; r < 4; ++r)
    DF_UNROLL
    for (int t = 0; t < 4; ++t) out[4 * r + t] = _mm512_reduce_add_ps(acc[r][t]) + tail[r][t];
}

void to_f16_avx512(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void from_f16_avx512(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load16_f16(x + i));
  for (; i < n; ++i) y[i] = h2f(x[i]);
}

// Round to nearest even as f32_to_bf16; NaN lanes become quiet NaNs.
void to_bf16_avx512(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512i u = _mm512_castps_si512(v);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void from_bf16_avx512(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load16_bf16(x + i));
  for (; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

}  // namespace

void install_avx512(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4, VecDotR4Fn dot_r4 = nullptr) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = dot_r4;
    r.isa = Isa::AVX512;
  };
  set(DType::F32, dot_ggml_1<float, load16_f32>, dot_ggml_4<float, load16_f32>);
  t[uint32_t(DType::F32)].vec_dot_gemm_x4 = dot_gemm_4<float, load16_f32>;
  t[uint32_t(DType::F32)].gemm_k = 16;
  set(DType::F16, dot_ggml_1<uint16_t, load16_f16>, dot_ggml_4<uint16_t, load16_f16>);
  t[uint32_t(DType::F16)].vec_dot_gemm_x4 = dot_gemm_4<uint16_t, load16_f16>;
  t[uint32_t(DType::F16)].gemm_k = 16;
  if (__builtin_cpu_supports("avx512bf16")) {  // llama.cpp's build for this CPU sums with vdpbf16ps
    set(DType::BF16, dot_bf16_ggml_1, dot_bf16_ggml_4);
    t[uint32_t(DType::BF16)].vec_dot_gemm_x4 = dot_bf16_gemm_4;
    t[uint32_t(DType::BF16)].vec_dot_tile = dot_bf16_tile;
    t[uint32_t(DType::BF16)].gemm_k = 32;
  } else {
    set(DType::BF16, dot_float_1<uint16_t, load16_bf16, bf16_scalar>, dot_float_4<uint16_t, load16_bf16, bf16_scalar>);
  }
  // Single rows use the same kernel as groups of four, so a row's result does not
  // depend on how a batch was grouped (batch invariance). Measured (min over repeated
  // L2-resident runs): for single Q8_0 rows the 256-bit kernel would be faster (~29 vs
  // ~25 GB/s per core); the x4 kernels are faster as pairs.
  set(DType::Q8_0, dot_q32_pairs_1<Pair8_0, DecodeQ8_0>, dot_q32_pairs_4<Pair8_0, DecodeQ8_0>,
      dot_q32_pairs_rows<Pair8_0, DecodeQ8_0, 4>);
  set(DType::Q4_0, dot_q32_pairs_1<Pair4_0, DecodeQ4_0>, dot_q32_pairs_4<Pair4_0, DecodeQ4_0>,
      dot_q32_pairs_rows<Pair4_0, DecodeQ4_0, 4>);
  set(DType::MXFP4, dot_q32_pairs_1<PairMXFP4, DecodeMXFP4>, dot_q32_pairs_4<PairMXFP4, DecodeMXFP4>,
      dot_q32_pairs_rows<PairMXFP4, DecodeMXFP4, 4>);
  // No decode over a prepared row: the AVX2 kernels for it read AVX2's prep, not this one.
  auto tile = [&](DType type, VecDotTileFn f) {
    set_prepared(t[uint32_t(type)], prep_bytes_q8_0_pairs, prep_q8_0_pairs, f, nullptr, nullptr);
  };
  tile(DType::Q8_0, dot_q32_tile<Pair8_0, DecodeQ8_0>);
  tile(DType::Q4_0, dot_q32_tile<Pair4_0, DecodeQ4_0>);
  tile(DType::MXFP4, dot_q32_tile<PairMXFP4, DecodeMXFP4>);
  t[uint32_t(DType::F16)].from_float = to_f16_avx512;
  t[uint32_t(DType::F16)].to_float = from_f16_avx512;
  t[uint32_t(DType::BF16)].from_float = to_bf16_avx512;
  t[uint32_t(DType::BF16)].to_float = from_bf16_avx512;
  t[uint32_t(DType::Q8_0)].from_float = quantize_q8_0_x86;
  t[uint32_t(DType::Q8_K)].from_float = quantize_q8_k_x86;
  install_kquants_avx512(t);
}

// IQ4_NL as Q4_0's pair kernels with its levels' table (legacy_avx512.cpp calls it after
// legacy_x86.h's 256-bit rows): two blocks per 512-bit vector, 16 scales at a time.
void install_iq4_nl_avx512(TypeTraits* t) {
  TypeTraits& r = t[uint32_t(DType::IQ4_NL)];
  r.vec_dot = dot_q32_pairs_1<PairIQ4_NL, DecodeIQ4_NL>;
  r.vec_dot_x4 = dot_q32_pairs_4<PairIQ4_NL, DecodeIQ4_NL>;
  r.vec_dot_r4 = dot_q32_pairs_rows<PairIQ4_NL, DecodeIQ4_NL, 4>;
  r.prep_bytes = prep_bytes_q8_0_pairs;
  r.prep = prep_q8_0_pairs;
  r.vec_dot_tile = dot_q32_tile<PairIQ4_NL, DecodeIQ4_NL>;
  r.isa = Isa::AVX512;
}

}  // namespace deltafin::kern
