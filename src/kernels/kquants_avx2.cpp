// AVX2 dot products of the K-quants (kernels in kquants_x86.h).
#include "kernels/kernels_impl.h"
#include "kernels/kquants_x86.h"

namespace deltafin::kern {

namespace {

// NR Q4_K/Q5_K rows against one Q8_K row Y (Rows<1> or PreparedQ8KRows<1>): per row
// the operations of dot_q45k<Bits, 1> in the same order (bit-identical to vec_dot),
// the activation loaded once.
template <int Bits, int NR, class Y>
void dot_q45k_rows_over(int64_t n, float* out, const void* w, size_t w_stride, size_t ahead, const Y& y) {
  using Block = std::conditional_t<Bits == 4, BlockQ4_K, BlockQ5_K>;
  static_assert(kAcc<1> == 1, "AVX2 build: one accumulator per row");
  const Block* a[NR];
  row_ptrs<Block, NR>(w, w_stride, a);
  __m256 acc[NR];
  __m128 accm[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps(), accm[r] = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_next_rows<NR>(a, i, ahead);
    const BlockQ8_K& b = y.b[0][i];
    const __m128i pairs = y.pairs(0, i);
    __m256i scales[NR], sumi[NR], hb[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      const Block& blk = a[r][i];
      __m256i scm = _mm256_cvtepu8_epi16(k4_scales(blk.scales));
      __m128i mins = _mm256_extracti128_si256(scm, 1);
      scales[r] = _mm256_permute2x128_si256(scm, scm, 0x00);
      const float dm = h2f(blk.dmin);
      accm[r] = _mm_fmadd_ps(_mm_set1_ps(dm * b.d), _mm_cvtepi32_ps(_mm_madd_epi16(mins, pairs)), accm[r]);
      sumi[r] = _mm256_setzero_si256();
      if constexpr (Bits == 5) hb[r] = loadu256(blk.qh);
    }
    DF_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i ylo = loadu256(b.qs + 64 * c), yhi = loadu256(b.qs + 64 * c + 32);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i q = loadu256(a[r][i].qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, mask8(15));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask8(15));
        if constexpr (Bits == 5) {
          lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hb[r], 4), mask8(16)));
          hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hb[r], 3), mask8(16)));
          hb[r] = _mm256_srli_epi16(hb[r], 2);
        }
        sumi[r] = madd_acc(sumi[r], _mm256_maddubs_epi16(lo, ylo), _mm256_shuffle_epi8(scales[r], elem16_ctrl(2 * c)));
        sumi[r] = madd_acc(sumi[r], _mm256_maddubs_epi16(hi, yhi), _mm256_shuffle_epi8(scales[r], elem16_ctrl(2 * c + 1)));
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[r][i].d) * b.d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]) - hsum4(accm[r]);
}

template <int Bits, int NR>
void dot_q45k_rows(int64_t n, float* out, const void* w, size_t w_stride, size_t ahead, const void* x) {
  dot_q45k_rows_over<Bits, NR>(n, out, w, w_stride, ahead, Rows<1>(&x));
}
template <int Bits, int NR>
void dot_q45k_prep_rows(int64_t n, float* out, const void* w, size_t w_stride, size_t ahead, const void* xp) {
  dot_q45k_rows_over<Bits, NR>(n, out, w, w_stride, ahead, PreparedQ8KRows<1>(&xp, n));
}

// Over prepared rows (prep_q8k_pairs; types.h vec_dot_prep and vec_dot_tile): each
// result vec_dot's bits, the bsum pairs read rather than added up per weight row.
template <int Bits>
void dot_q45k_prep_1(int64_t n, float* out, const void* w, const void* xp) {
  dot_q45k_over<Bits, 1>(n, out, w, PreparedQ8KRows<1>(&xp, n));
}
template <int Bits>
void dot_q45k_tile(int64_t n, float* out, const void* w, size_t w_stride, const void* const* xp) {
  const PreparedQ8KRows<4> y(xp, n);
  for (int r = 0; r < 4; ++r) dot_q45k_over<Bits, 4>(n, out + 4 * r, static_cast<const uint8_t*>(w) + r * w_stride, y);
}

// NR Q6_K rows against one Q8_K row, as dot_q6k<1> per row.
template <int NR>
void dot_q6k_rows(int64_t n, float* out, const void* w, size_t w_stride, size_t ahead, const void* x) {
  const BlockQ6_K* a[NR];
  row_ptrs<BlockQ6_K, NR>(w, w_stride, a);
  const auto* by = static_cast<const BlockQ8_K*>(x);
  __m256 acc[NR];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_next_rows<NR>(a, i, ahead);
    const BlockQ8_K& b = by[i];
    const __m256i bs = loadu256(b.bsums);
    __m128i sc8[NR];
    __m256i sumi[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      sc8[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[r][i].scales));
      __m256i corr = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8[r]), bs);
      sumi[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
    }
    DF_UNROLL
    for (int h = 0; h < 2; ++h) {
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i q[4];
        q6k_codes(a[r][i], h, q);
        DF_UNROLL
        for (int k = 0; k < 4; ++k) {
          __m256i p = _mm256_maddubs_epi16(q[k], loadu256(b.qs + 128 * h + 32 * k));
          sumi[r] = madd_acc(sumi[r], p, scale_pair_i8(sc8[r], 8 * h + 2 * k));
        }
      }
    }
    DF_UNROLL
    for (int r = 0; r < NR; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[r][i].d) * b.d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
  }
  DF_UNROLL
  for (int r = 0; r < NR; ++r) out[r] = hsum8(acc[r]);
}

// vec_dot_r4 from two-row passes (four rows' state does not fit AVX2's 16 registers);
// both prefetch the caller's next four rows.
template <void (*F)(int64_t, float*, const void*, size_t, size_t, const void*)>
void r4_from_pairs(int64_t n, float* out, const void* w, size_t w_stride, const void* x) {
  F(n, out, w, w_stride, 4 * w_stride, x);
  F(n, out + 2, static_cast<const uint8_t*>(w) + 2 * w_stride, w_stride, 2 * w_stride, x);
}

}  // namespace

void install_kquants_avx2(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4, VecDotR4Fn dot_r4 = nullptr) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = dot_r4;  // null: decode takes vec_dot row by row (see types.h)
    r.isa = Isa::AVX2;
  };
  set(DType::Q4_K, one<dot_q45k<4, 1>>, dot_q45k<4, 4>, r4_from_pairs<dot_q45k_rows<4, 2>>);
  set(DType::Q5_K, one<dot_q45k<5, 1>>, dot_q45k<5, 4>, r4_from_pairs<dot_q45k_rows<5, 2>>);
  // Batches and decode over rows prepared once per matrix: Zen 5, avx2, alternating,
  // -p 64 -n 32 -t 1: qwen3-moe-mini Q4_K pp64 301 -> 316, Q5_K 287 -> 309, kimi-k2-mini
  // Q4_K 253 -> 263 tok/s; decode unchanged or better (kimi-k2-mini Q4_K 194 -> 196).
  set_prepared(t[uint32_t(DType::Q4_K)], prep_bytes_q8k_pairs, prep_q8k_pairs, dot_q45k_tile<4>, dot_q45k_prep_1<4>,
               r4_from_pairs<dot_q45k_prep_rows<4, 2>>);
  set_prepared(t[uint32_t(DType::Q5_K)], prep_bytes_q8k_pairs, prep_q8k_pairs, dot_q45k_tile<5>, dot_q45k_prep_1<5>,
               r4_from_pairs<dot_q45k_prep_rows<5, 2>>);
  set(DType::Q6_K, one<dot_q6k<1>>, dot_q6k<4>, r4_from_pairs<dot_q6k_rows<2>>);
  set(DType::Q2_K, one<dot_q2k<1>>, dot_q2k<4>);
  set(DType::Q3_K, one<dot_q3k<1>>, dot_q3k<4>);
}

}  // namespace deltafin::kern
