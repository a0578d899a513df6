// AVX2 dot products of IQ2_S and IQ3_S against Q8_K (the body is iq256_dot, iq_x86.h).
// Per group of 32 values the codebook points (four of eight bytes, IQ2_S; eight of
// four, IQ3_S) are loaded from indices made in scalar code (see iq3s_points for why
// not in a vector); the group's 32 free sign bits become a byte mask (each byte picks
// its bit), which negates the activations (vpsignb); maddubs forms the pair products
// (at most 43 * 127 * 2, or 15 * 127 * 2) and madd multiplies them by the odd scales
// (per 16 for IQ2_S, per 32 for IQ3_S) into int32 lanes. One float FMA per
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

DF_ALWAYS_INLINE __m256i iq3s_group(const BlockIQ3_S& b, int ib, __m256i* s) {
  uint32_t sb;
  std::memcpy(&sb, b.signs + 4 * ib, 4);
  *s = sign_bytes(sb);
  return iq3s_points(b, ib);
}

DF_ALWAYS_INLINE __m256i iq2s_scales(const BlockIQ2_S& b) { return odd_scale_bytes_of_nibbles8(b.scales); }
DF_ALWAYS_INLINE float iq2s_d(const BlockIQ2_S& b) { return h2f(b.d); }
DF_ALWAYS_INLINE float iq3s_d(const BlockIQ3_S& b) { return h2f(b.d); }

template <int NR, int NT>
struct DotIq2s {
  static void run(int64_t n, float* out, const BlockIQ2_S* const* a, const BlockQ8_K* const* y) {
    iq256_dot<NR, NT, false, __m256i, iq2s_d, iq2s_scales, iq2s_group, add_group>(n, out, a, y, 0.125f);
  }
};

template <int NR, int NT>
struct DotIq3s {
  static void run(int64_t n, float* out, const BlockIQ3_S* const* a, const BlockQ8_K* const* y) {
    iq256_dot<NR, NT, true, __m256i, iq3s_d, iq3s_scales, iq3s_group, add_group>(n, out, a, y, 1.0f);
  }
};

}  // namespace

void install_iq_s_avx2(TypeTraits* t) {
  install_iq_row<BlockIQ2_S, DotIq2s>(t[uint32_t(DType::IQ2_S)], Isa::AVX2);
  install_iq_row<BlockIQ3_S, DotIq3s>(t[uint32_t(DType::IQ3_S)], Isa::AVX2);
}

}  // namespace deltafin::kern
