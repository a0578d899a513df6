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

// Super(block) is the block's d; U holds a super-block as its groups read it:
// U::unpack(block, &u) once per super-block, then u.group(ib, &scales) gives group
// ib's weights.
template <int NR, int NT, auto Super, class U, class Block>
void iq1_dot(int64_t n, float* out, const Block* const* a, const BlockQ8_K* const* y) {
  __m256 acc[NR][NT];
  DF_UNROLL
  for (int r = 0; r < NR; ++r) {
    DF_UNROLL
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  U u[NR];
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m256i sumi[NR][NT];
    DF_UNROLL
    for (int r = 0; r < NR; ++r) {
      U::unpack(a[r][i], &u[r]);
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
        const __m256i w = u[r].group(ib, &sc);
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

// IQ1_S's groups read the block as it is.
struct Iq1sView {
  const BlockIQ1_S* b = nullptr;
  static void unpack(const BlockIQ1_S& blk, Iq1sView* u) { u->b = &blk; }
  __m256i group(int ib, __m256i* sc) const { return iq1s_group(*b, ib, sc); }
};

// An IQ1_S super-block unpacked for its eight groups with vector operations once (as
// IQ1_M below), instead of scalar shifts and masks per run and group: the 32 runs'
// 11-bit grid indices (qs, and three bits of qh each), the groups' scales (2 ls + 1)
// as words and their delta signs as bytes (+1 / -1), a group's taken by one shuffle.
// For one token (decode): AVX2 on Zen 5 109 -> 135 tok/s. A batch's vector pipes are
// busy with its tokens' multiply-adds, and there the view's scalar work, on the
// integer ports, measured faster (pp64 253 against 234).
struct Iq1sUnpacked {
  alignas(32) uint32_t idx[32];
  __m128i sc, delta;
  static void unpack(const BlockIQ1_S& b, Iq1sUnpacked* u);
  __m256i group(int ib, __m256i* sc) const;
};

DF_ALWAYS_INLINE void Iq1sUnpacked::unpack(const BlockIQ1_S& b, Iq1sUnpacked* u) {
  const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
  const __m256i qh32 = _mm256_cvtepu16_epi32(qh);
  const __m256i shift = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
  DF_UNROLL
  for (int j = 0; j < 4; ++j) {  // runs 8j..8j+7: groups 2j, 2j + 1
    const __m256i h = _mm256_permutevar8x32_epi32(qh32, _mm256_setr_epi32(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1,
                                                                           2 * j + 1, 2 * j + 1, 2 * j + 1));
    const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(h, shift), _mm256_set1_epi32(7)), 8);
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * j)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(u->idx + 8 * j), _mm256_or_si256(lo, hi));
  }
  const __m128i ls = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
  u->sc = _mm_add_epi16(_mm_add_epi16(ls, ls), _mm_set1_epi16(1));
  u->delta = _mm_or_si128(_mm_srai_epi16(qh, 15), _mm_set1_epi16(1));  // low byte: 0x01 or 0xff
}

DF_ALWAYS_INLINE __m256i Iq1sUnpacked::group(int ib, __m256i* scv) const {
  const __m256i sc2 = _mm256_broadcastsi128_si256(sc), d2 = _mm256_broadcastsi128_si256(delta);
  *scv = _mm256_shuffle_epi8(sc2, _mm256_set1_epi16(short(2 * ib | (2 * ib + 1) << 8)));
  const __m256i dv = _mm256_shuffle_epi8(d2, _mm256_set1_epi8(char(2 * ib)));
  const uint32_t* i = idx + 4 * ib;
  return iq1_weights(int(i[0]), int(i[1]), int(i[2]), int(i[3]), dv);
}

template <int NR, int NT>
struct DotIq1s {
  static void run(int64_t n, float* out, const BlockIQ1_S* const* a, const BlockQ8_K* const* y) {
    iq1_dot<NR, NT, iq1s_super, std::conditional_t<NT == 1, Iq1sUnpacked, Iq1sView>>(n, out, a, y);
  }
};

// An IQ1_M super-block's fields unpacked for its eight groups with vector operations
// once, instead of with scalar shifts per group (which bound the kernel: decode 74 ->
// 100 tok/s on qwen3-moe-mini): the 32 runs' 11-bit grid indices (qs, and qh's nibble
// bits 0-2), their delta-sign nibbles (bit 3), and the sixteen half scales (2 s + 1)
// as bytes, a group's two taken by one shuffle (group_scales; stored as words per
// group before, eight scalar extractions and broadcasts: decode 103 -> 125 tok/s).
struct Iq1mUnpacked {
  alignas(32) uint16_t idx[32];
  alignas(32) uint8_t nib[32];
  __m256i scale_bytes;  // group_scales's bytes: half m's 2 s + 1 at byte m
  static void unpack(const BlockIQ1_M& b, Iq1mUnpacked* u);
  __m256i group(int ib, __m256i* sc) const;
};

DF_ALWAYS_INLINE void Iq1mUnpacked::unpack(const BlockIQ1_M& b, Iq1mUnpacked* u) {
  const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(qh, m4), hi = _mm_and_si128(_mm_srli_epi16(qh, 4), m4);
  const __m128i n0 = _mm_unpacklo_epi8(lo, hi), n1 = _mm_unpackhi_epi8(lo, hi);  // runs 0..15, 16..31
  _mm_store_si128(reinterpret_cast<__m128i*>(u->nib), n0);
  _mm_store_si128(reinterpret_cast<__m128i*>(u->nib + 16), n1);
  const __m128i m7 = _mm_set1_epi8(7);
  const __m256i q0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
  const __m256i q1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)));
  const __m256i h0 = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(n0, m7)), 8);
  const __m256i h1 = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(n1, m7)), 8);
  _mm256_store_si256(reinterpret_cast<__m256i*>(u->idx), _mm256_or_si256(q0, h0));
  _mm256_store_si256(reinterpret_cast<__m256i*>(u->idx + 16), _mm256_or_si256(q1, h1));
  // Scale m (half m of 16 values) is bits 3 (m % 4)..+2 of word m / 4: two words' twelve
  // scale bits deposited into eight bytes at a time.
  uint16_t w[4];
  std::memcpy(w, b.scales, 8);
  const auto bytes8 = [](uint32_t w0, uint32_t w1) {
    return int64_t(_pdep_u64((w0 & 0xfff) | (w1 & 0xfff) << 12, 0x0707070707070707ULL));
  };
  u->scale_bytes = odd_scale_bytes(_mm_set_epi64x(bytes8(w[2], w[3]), bytes8(w[0], w[1])));
}

// Group ib of an unpacked IQ1_M block: runs 4ib..4ib+3, halves 2ib (low lane) and
// 2ib + 1; the weights as iq1_weights makes them, and the two half scales.
DF_ALWAYS_INLINE __m256i Iq1mUnpacked::group(int ib, __m256i* scv) const {
  *scv = group_scales(scale_bytes, ib);
  // Each run's nibble in its eight bytes; bit 3 set: delta -1 (0xff), else +1.
  uint32_t n4;
  std::memcpy(&n4, nib + 4 * ib, 4);
  const __m256i run = _mm256_shuffle_epi8(_mm256_set1_epi32(int(n4)),
                                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                                           2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i eight = _mm256_set1_epi8(8);
  const __m256i delta = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(run, eight), eight), _mm256_set1_epi8(1));
  const uint16_t* i = idx + 4 * ib;
  return iq1_weights(i[0], i[1], i[2], i[3], delta);
}

template <int NR, int NT>
struct DotIq1m {
  static void run(int64_t n, float* out, const BlockIQ1_M* const* a, const BlockQ8_K* const* y) {
    iq1_dot<NR, NT, iq1m_super, Iq1mUnpacked>(n, out, a, y);
  }
};

}  // namespace

void install_iq1_avx2(TypeTraits* t) {
  install_iq_row<BlockIQ1_S, DotIq1s>(t[uint32_t(DType::IQ1_S)], Isa::AVX2);
  install_iq_row<BlockIQ1_M, DotIq1m>(t[uint32_t(DType::IQ1_M)], Isa::AVX2);
}

}  // namespace deltafin::kern
