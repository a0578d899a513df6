// AVX2 dot products of IQ2_S and IQ3_S against Q8_K. Per group of 32 values the
// codebook points (four of eight bytes, IQ2_S; eight of four, IQ3_S) are loaded from
// indices made in scalar code (see iq3s_group for why not in a vector); the group's 32
// free sign bits become a byte mask (each byte picks its bit), which negates the
// activations (vpsignb); maddubs forms the pair
// products (at most 43 * 127 * 2, or 15 * 127 * 2) and madd multiplies them by the
// odd scales (per 16 for IQ2_S, per 32 for IQ3_S) into int32 lanes. One float FMA per
// super-block, 1/8 (IQ2_S) at the end, as the scalar reference (ref_iq_s.cpp).
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"
#include "kernels/iq_x86.h"

namespace deltafin::kern {
namespace {

// +1 / -1 bytes from 32 sign bits (bit k: byte k negative).
DF_ALWAYS_INLINE __m256i sign_bytes(uint32_t bits) {
  const __m256i v = _mm256_set1_epi32(int(bits));
  const __m256i bytes = _mm256_shuffle_epi8(
      v, _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ULL));
  return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(1));
}

DF_ALWAYS_INLINE __m256i iq2s_group(const BlockIQ2_S& b, int ib, __m256i* s) {
  const uint64_t* grid = kIq2sGrid.data();
  const uint8_t* q = b.qs + 4 * ib;
  const int h = b.qh[ib];
  uint32_t sb;
  std::memcpy(&sb, b.qs + 32 + 4 * ib, 4);
  *s = sign_bytes(sb);
  return _mm256_set_epi64x(int64_t(grid[q[3] | (h << 2 & 0x300)]), int64_t(grid[q[2] | (h << 4 & 0x300)]),
                           int64_t(grid[q[1] | (h << 6 & 0x300)]), int64_t(grid[q[0] | (h << 8 & 0x300)]));
}

// The eight indices q[k] | bit k of qh[ib] as bit 8 are made and used in scalar code:
// the kernel is bound by the vector ports, which a vector of indices (and a
// vpgatherdd, or extracts to eight loads) kept busy. Zen 5, AVX2, against the indices
// in a vector: decode tg64 76 -> 81 tok/s through eight extracts, pp64 210 -> 225
// through a gather.
DF_ALWAYS_INLINE __m256i iq3s_group(const BlockIQ3_S& b, int ib, __m256i* s) {
  const uint32_t* grid = kIq3sGrid.data();
  const uint8_t* q = b.qs + 8 * ib;
  uint32_t sb;
  std::memcpy(&sb, b.signs + 4 * ib, 4);
  *s = sign_bytes(sb);
  const uint32_t h = b.qh[ib];
  auto k = [&](int j) { return q[j] | ((h << (8 - j)) & 256); };
  return _mm256_setr_epi32(int(grid[k(0)]), int(grid[k(1)]), int(grid[k(2)]), int(grid[k(3)]), int(grid[k(4)]),
                           int(grid[k(5)]), int(grid[k(6)]), int(grid[k(7)]));
}

DF_ALWAYS_INLINE __m256i iq2s_scales(const BlockIQ2_S& b) { return odd_scale_bytes_of_nibbles8(b.scales); }
DF_ALWAYS_INLINE __m256i iq3s_scales(const BlockIQ3_S& b) {
  uint32_t raw;
  std::memcpy(&raw, b.scales, 4);
  const __m128i e = nibbles_to_bytes(_mm_cvtsi32_si128(int(raw)));
  return odd_scale_bytes(_mm_unpacklo_epi8(e, e));
}
DF_ALWAYS_INLINE float iq2s_d(const BlockIQ2_S& b) { return h2f(b.d); }
DF_ALWAYS_INLINE float iq3s_d(const BlockIQ3_S& b) { return h2f(b.d); }

// Group(block, ib, &signs) gives group ib's points, Scales(block) the block's scale
// bytes (group_scales); `scale` is the final factor. Unroll: the eight groups unrolled,
// which keeps their scale shuffles constant (Zen 5, AVX2: IQ3_S pp64 187 -> 197 tok/s;
// IQ2_S measured slower so, pp64 245 -> 217, and keeps the loop).
template <int NR, int NT, bool Unroll, auto Super, auto Scales, auto Group, class Block>
void iq_s_dot(int64_t n, float* out, const Block* const* a, const BlockQ8_K* const* y, float scale) {
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
    __m256i scale_bytes[NR];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) scale_bytes[r] = Scales(a[r][i]);
    auto group = [&](int ib) DF_ALWAYS_INLINE_LAMBDA {
      __m256i q8[NT];
      DF_UNROLL
      for (int t = 0; t < NT; ++t) q8[t] = loadu256(y[t][i].qs + 32 * ib);
      DF_UNROLL
      for (int r = 0; r < NR; ++r) {
        __m256i s;
        const __m256i g = Group(a[r][i], ib, &s);
        const __m256i sc = group_scales(scale_bytes[r], ib);
        DF_UNROLL
        for (int t = 0; t < NT; ++t) {
          const __m256i p = _mm256_maddubs_epi16(g, _mm256_sign_epi8(q8[t], s));
          sumi[r][t] = _mm256_add_epi32(sumi[r][t], _mm256_madd_epi16(p, sc));
        }
      }
    };
    if constexpr (Unroll) {
      DF_UNROLL
      for (int ib = 0; ib < 8; ++ib) group(ib);
    } else {
      for (int ib = 0; ib < 8; ++ib) group(ib);
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
    for (int t = 0; t < NT; ++t) out[r * NT + t] = scale * hsum8(acc[r][t]);
  }
}

template <int NR, int NT>
struct DotIq2s {
  static void run(int64_t n, float* out, const BlockIQ2_S* const* a, const BlockQ8_K* const* y) {
    iq_s_dot<NR, NT, false, iq2s_d, iq2s_scales, iq2s_group>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq3s {
  static void run(int64_t n, float* out, const BlockIQ3_S* const* a, const BlockQ8_K* const* y) {
    iq_s_dot<NR, NT, true, iq3s_d, iq3s_scales, iq3s_group>(n, out, a, y, 1.0f);
  }
};

}  // namespace

void install_iq_s_avx2(TypeTraits* t) {
  install_iq_row<BlockIQ2_S, DotIq2s>(t[uint32_t(DType::IQ2_S)], Isa::AVX2);
  install_iq_row<BlockIQ3_S, DotIq3s>(t[uint32_t(DType::IQ3_S)], Isa::AVX2);
}

}  // namespace deltafin::kern
