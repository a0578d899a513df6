// AVX2 kernels: the float types, the 32-value block types (x86_common.h) and the
// activation quantizers; install_avx2 also pulls in the K-quants (kquants_avx2.cpp).
#include "kernels/kernels_impl.h"
#include "kernels/x86_common.h"

namespace deltafin::kern {

namespace {

// Loads eight values of each float type as f32.
inline __m256 load8_f32(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_bf16(const uint16_t* p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// out[t] = dot(w, x_t) over n values; 4 independent accumulators per row for NT == 1.
template <class T, __m256 (*Load)(const T*), float (*Scalar)(T), int NT>
void dot_float(int64_t n, float* out, const void* w, const void* const* xp) {
  const T* a = static_cast<const T*>(w);
  const T* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const T*>(xp[t]);
  // Four accumulators per row whatever NT is: a row's sum is then computed in
  // the same order alone or in a group (batch invariance, test_kernels X4EqualsSingle).
  constexpr int U = 4;
  __m256 acc[NT][U];
  DF_UNROLL
  for (int t = 0; t < NT; ++t)
    DF_UNROLL
    for (int u = 0; u < U; ++u) acc[t][u] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 * U <= n; i += 8 * U) {
    DF_UNROLL
    for (int u = 0; u < U; ++u) {
      __m256 va = Load(a + i + 8 * u);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) acc[t][u] = _mm256_fmadd_ps(va, Load(b[t] + i + 8 * u), acc[t][u]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    __m256 va = Load(a + i);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) acc[t][0] = _mm256_fmadd_ps(va, Load(b[t] + i), acc[t][0]);
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    for (int u = 1; u < U; ++u) acc[t][0] = _mm256_add_ps(acc[t][0], acc[t][u]);
    float s = hsum8(acc[t][0]);
    for (int64_t j = i; j < n; ++j) s += Scalar(a[j]) * Scalar(b[t][j]);
    out[t] = s;
  }
}

inline float id_f32(float v) { return v; }
inline float bf16_scalar(uint16_t v) { return bf16_to_f32(v); }

template <class T, __m256 (*Load)(const T*), float (*Scalar)(T)>
void dot_float_1(int64_t n, float* out, const void* w, const void* x) {
  dot_float<T, Load, Scalar, 1>(n, out, w, &x);
}
template <class T, __m256 (*Load)(const T*), float (*Scalar)(T)>
void dot_float_4(int64_t n, float* out, const void* w, const void* const* xp) {
  // Two rows at a time keeps the accumulators in registers (2 x 4).
  dot_float<T, Load, Scalar, 2>(n, out, w, xp);
  dot_float<T, Load, Scalar, 2>(n, out + 2, w, xp + 2);
}

// F16 rows in the summation orders of ggml's CPU backend (AVX2 build); see the AVX-512
// kernels. vec_dot (ggml_vec_dot_f16): four 8-lane accumulators over 32-value steps,
// summed (0+2)+(1+3), then the two 128-bit halves and two horizontal adds; the n % 32
// tail added in double.
template <int NT>
void dot_f16_ggml(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const uint16_t*>(w);
  const uint16_t* b[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) b[t] = static_cast<const uint16_t*>(xp[t]);
  __m256 s[NT][4];
  DF_UNROLL
  for (int t = 0; t < NT; ++t)
    DF_UNROLL
    for (int u = 0; u < 4; ++u) s[t][u] = _mm256_setzero_ps();
  const int64_t np = n & ~int64_t(31);
  for (int64_t i = 0; i < np; i += 32) {
    DF_UNROLL
    for (int u = 0; u < 4; ++u) {
      const __m256 va = load8_f16(a + i + 8 * u);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) s[t][u] = _mm256_fmadd_ps(va, load8_f16(b[t] + i + 8 * u), s[t][u]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) {
    const __m256 r = _mm256_add_ps(_mm256_add_ps(s[t][0], s[t][2]), _mm256_add_ps(s[t][1], s[t][3]));
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    double sum = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int64_t i = np; i < n; ++i) sum += double(h2f(a[i]) * h2f(b[t][i]));
    out[t] = float(sum);
  }
}
void dot_f16_ggml_1(int64_t n, float* out, const void* w, const void* x) { dot_f16_ggml<1>(n, out, w, &x); }
void dot_f16_ggml_4(int64_t n, float* out, const void* w, const void* const* xp) {
  dot_f16_ggml<2>(n, out, w, xp);
  dot_f16_ggml<2>(n, out + 2, w, xp + 2);
}
// vec_dot_gemm_x4 (tinyBLAS<8, __m256>): one 8-lane accumulator per row over all n
// (n % 8 == 0), then high + low half, and its hsum.
void dot_f16_gemm_4(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const uint16_t*>(w);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 va = load8_f16(a + i);
    DF_UNROLL
    for (int t = 0; t < 4; ++t) acc[t] = _mm256_fmadd_ps(va, load8_f16(static_cast<const uint16_t*>(xp[t]) + i), acc[t]);
  }
  DF_UNROLL
  for (int t = 0; t < 4; ++t) {
    __m128 x = _mm_add_ps(_mm256_extractf128_ps(acc[t], 1), _mm256_castps256_ps128(acc[t]));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    out[t] = _mm_cvtss_f32(x);
  }
}

void to_f16_avx2(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void from_f16_avx2(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8_f16(x + i));
  for (; i < n; ++i) y[i] = h2f(x[i]);
}

// Round to nearest even as f32_to_bf16; NaN lanes become quiet NaNs.
void to_bf16_avx2(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256i u = _mm256_castps_si256(v);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, qnan, nan);
    __m256i p = _mm256_packus_epi32(r, r);  // per lane: r0..3 r0..3 | r4..7 r4..7
    p = _mm256_permute4x64_epi64(p, 0x08);  // qwords 0, 2
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_castsi256_si128(p));
  }
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void from_bf16_avx2(const void* src, float* y, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8_bf16(x + i));
  for (; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

// ---- Batches over prepared activations (types.h vec_dot_tile) --------------------------
//
// The x4 kernel pays per block and token for moving the weight's sign onto the
// activation (two vpsignb) before vpmaddubsw. For the types whose levels fit an
// unsigned byte after an offset small enough that vpmaddubsw cannot saturate (Q4_0:
// code = level + 8; MXFP4: level + 12, levels doubled E2M1 in -12..12), the weight
// goes in unsigned and each int32 lane adds -K x the sum of its four activation bytes,
// which leaves exactly the integer the sign trick leaves. Per token and block the
// prepared row holds the 32 activation bytes and those eight start values, then the
// row's scales as floats; the float steps per row and token are dot_q32's in its
// order (bit-identical to vec_dot: KernelDot.TileEqualsVecDotBitForBit).
constexpr size_t kPrepBlock = 64;
size_t prep_bytes_q32u(int64_t n) {
  const size_t nb = size_t(n / kQ32);
  return nb * kPrepBlock + nb * sizeof(float);
}

template <int K>
void prep_q32u(int64_t n, void* dst, const void* x) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  auto* o = static_cast<uint8_t*>(dst);
  const int64_t nb = n / kQ32;
  auto* dbs = reinterpret_cast<float*>(o + size_t(nb) * kPrepBlock);
  for (int64_t i = 0; i < nb; ++i, o += kPrepBlock) {
    const __m256i y = loadu256(b[i].qs);
    const __m256i sum4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), y), _mm256_set1_epi16(1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), y);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32), _mm256_mullo_epi32(sum4, _mm256_set1_epi32(-K)));
    dbs[i] = h2f(b[i].d);
  }
}

// A prepared row (prep_q32u) for dot_q32_rows_over and the tile: a block's lane sums
// from the unsigned weight and its start values, the scales as floats.
struct PreparedRow {
  const uint8_t* p;
  const float* d;
  PreparedRow(const void* xp, int64_t n)
      : p(static_cast<const uint8_t*>(xp)), d(reinterpret_cast<const float*>(p + size_t(n / kQ32) * kPrepBlock)) {}
  template <class Dec>
  static __m256i weight(const typename Dec::Block& a) { return Dec::u(a); }
  __m256i sums(__m256i u, int64_t i) const {
    const uint8_t* q = p + size_t(i) * kPrepBlock;
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, loadu256(q)), _mm256_set1_epi16(1)),
                            loadu256(q + 32));
  }
  __m256 scales8(int64_t i) const { return _mm256_loadu_ps(d + i); }
  float scale(int64_t i) const { return d[i]; }
};

// Unsigned weight bytes: Q4_0's codes, MXFP4's doubled E2M1 levels + 12.
struct UnsignedQ4_0 : DecodeQ4_0 {
  static constexpr int kOffset = 8;
  static __m256i u(const Block& b) { return unpack_nibbles16(b.qs); }
};
struct UnsignedMXFP4 : DecodeMXFP4 {
  static constexpr int kOffset = 12;
  static __m256i u(const Block& b) {
    static constexpr Table16 kU = offset_levels(kMxfp4Values, kOffset);
    return lookup_nibbles16(kU.v, b.qs);
  }
};

// Each of four rows against four prepared rows in turn (eight accumulators live).
template <class Dec>
void dot_q32u_tile(int64_t n, float* out, const void* w, size_t w_stride, const void* const* xp) {
  using Block = typename Dec::Block;
  const int64_t nb = n / kQ32;
  const PreparedRow x[4] = {{xp[0], n}, {xp[1], n}, {xp[2], n}, {xp[3], n}};
  for (int r = 0; r < 4; ++r) {
    const auto* a = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + size_t(r) * w_stride);
    __m256 acc[4][2];
    DF_UNROLL
    for (int t = 0; t < 4; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    auto lane_sums = [&](__m256i u, int t, int64_t blk) { return _mm256_cvtepi32_ps(x[t].sums(u, blk)); };
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
      alignas(32) float d[4][8];
      const __m256 da = Dec::d8(a + i);
      DF_UNROLL
      for (int t = 0; t < 4; ++t) _mm256_store_ps(d[t], _mm256_mul_ps(da, x[t].scales8(i)));
      DF_UNROLL
      for (int k = 0; k < 8; ++k) {
        const __m256i u = Dec::u(a[i + k]);
        DF_UNROLL
        for (int t = 0; t < 4; ++t)
          acc[t][k & 1] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[t][k]), lane_sums(u, t, i + k), acc[t][k & 1]);
      }
    }
    for (; i < nb; ++i) {
      const __m256i u = Dec::u(a[i]);
      const float da = Dec::d(a[i]);
      DF_UNROLL
      for (int t = 0; t < 4; ++t)
        acc[t][0] = _mm256_fmadd_ps(_mm256_set1_ps(da * x[t].scale(i)), lane_sums(u, t, i), acc[t][0]);
    }
    DF_UNROLL
    for (int t = 0; t < 4; ++t) out[4 * r + t] = hsum8(_mm256_add_ps(acc[t][0], acc[t][1]));
  }
}

// Decode over one prepared row (types.h vec_dot_prep): dot_q32_rows' loop, each row
// with vec_dot's bits, its integer per block from the unsigned weight and the
// prepared start values as in the tile (no sign moves per block and row), the
// activation's scales read as floats.
template <class Dec, int NR>
void dot_q32u_rows(int64_t n, float* out, const void* w, size_t w_stride, const void* xp) {
  dot_q32_rows_over<Dec, NR>(n, out, w, w_stride, PreparedRow(xp, n));
}
template <class Dec>
void dot_q32u_1(int64_t n, float* out, const void* w, const void* xp) {
  dot_q32u_rows<Dec, 1>(n, out, w, 0, xp);
}

}  // namespace

void install_avx2(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4, VecDotR4Fn dot_r4 = nullptr) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = dot_r4;  // null: decode takes vec_dot row by row (see types.h)
    r.isa = Isa::AVX2;
  };
  set(DType::F32, dot_float_1<float, load8_f32, id_f32>, dot_float_4<float, load8_f32, id_f32>);
  set(DType::F16, dot_f16_ggml_1, dot_f16_ggml_4);
  t[uint32_t(DType::F16)].vec_dot_gemm_x4 = dot_f16_gemm_4;
  t[uint32_t(DType::F16)].gemm_k = 8;
  set(DType::BF16, dot_float_1<uint16_t, load8_bf16, bf16_scalar>, dot_float_4<uint16_t, load8_bf16, bf16_scalar>);
  set(DType::Q8_0, dot_q32_1<DecodeQ8_0>, dot_q32_4<DecodeQ8_0>, dot_q32_rows<DecodeQ8_0, 4>);
  set(DType::Q4_0, dot_q32_1<DecodeQ4_0>, dot_q32_4<DecodeQ4_0>, dot_q32_rows<DecodeQ4_0, 4>);
  set(DType::MXFP4, dot_q32_1<DecodeMXFP4>, dot_q32_4<DecodeMXFP4>, dot_q32_rows<DecodeMXFP4, 4>);
  set_prepared(t[uint32_t(DType::Q4_0)], prep_bytes_q32u, prep_q32u<UnsignedQ4_0::kOffset>, dot_q32u_tile<UnsignedQ4_0>,
               dot_q32u_1<UnsignedQ4_0>, dot_q32u_rows<UnsignedQ4_0, 4>);
  set_prepared(t[uint32_t(DType::MXFP4)], prep_bytes_q32u, prep_q32u<UnsignedMXFP4::kOffset>,
               dot_q32u_tile<UnsignedMXFP4>, dot_q32u_1<UnsignedMXFP4>, dot_q32u_rows<UnsignedMXFP4, 4>);
  t[uint32_t(DType::F16)].from_float = to_f16_avx2;
  t[uint32_t(DType::F16)].to_float = from_f16_avx2;
  t[uint32_t(DType::BF16)].from_float = to_bf16_avx2;
  t[uint32_t(DType::BF16)].to_float = from_bf16_avx2;
  t[uint32_t(DType::Q8_0)].from_float = quantize_q8_0_x86;
  t[uint32_t(DType::Q8_K)].from_float = quantize_q8_k_x86;
  install_kquants_avx2(t);
}

}  // namespace deltafin::kern
