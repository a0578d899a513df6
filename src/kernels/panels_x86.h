// x86 kernels over row panels (panels.h) of Q8_0 and the 4-bit types (Q4_0, IQ4_NL,
// MXFP4), included by panels_avx2.cpp and panels_avx512.cpp (internal linkage, as
// x86_common.h).
//
// Panels, per block and token: the activation's 32 values as eight broadcast 4-byte
// pieces; each multiplies a vector of one piece of all eight rows, and the eight int32
// lanes, one per row, sum the block exactly; one convert and one FMA then serve eight
// rows. The row kernels pay a convert and an FMA per row and block.
//
// The weights go in unsigned: each level plus an offset K (Q4_0 8, MXFP4 12 with
// vpmaddubsw; with AVX512-VNNI's vpdpbusd, which cannot saturate, Q8_0 and IQ4_NL 128
// too), and the activation row, prepared once per matrix (panel_prep), carries each
// block's -K x (sum of its values) to add. Where K would saturate vpmaddubsw (Q8_0 and
// IQ4_NL on AVX2, K = 0) the weight's sign moves onto the activation instead. Either
// way the integer is exact, so every build gives the reference's bits.
#pragma once
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/panels_impl.h"
#include "kernels/x86_common.h"

namespace deltafin::kern {

namespace {

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

// The weight levels as the kernels multiply them: plus K (unsigned), or as they are
// for the sign moves (K = 0).
template <const int8_t (&Levels)[16], int K>
struct Lut {
  static constexpr Table16 kTable = offset_levels(Levels, K);
  static __m256i vec() {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable.v)));
  }
};

// acc + the int32 sums of four products w x y (w: the kernel's weight bytes, y: signed
// activation bytes): unsigned weights straight, signed ones with the sign moved.
template <int K>
inline __m256i dot_acc(__m256i acc, __m256i w, __m256i y) {
  __m256i u = w, v = y;
  if constexpr (K == 0) u = _mm256_sign_epi8(w, w), v = _mm256_sign_epi8(y, w);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, v);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, v), _mm256_set1_epi16(1)));
#endif
}

// The eight scales of a panel block as floats: fp16, or MXFP4's 2^(e - 128) as
// DecodeMXFP4::d8 (exponent field e - 1, subnormal below e = 2).
inline __m256 panel_scales8(const uint16_t* d) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d)));
}
inline __m256 panel_scales8(const uint8_t* e) {
  const __m256i ev = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(ev, _mm256_set1_epi32(1)), 23);
  const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), ev);
  const __m256i is_tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), ev);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, is_tiny));
}

// How a type's weights become the kernels' bytes: Nibbles (Q4_0, IQ4_NL, MXFP4: a
// level table, plus K) or Bytes (Q8_0: the values, plus K). pair(p, k, w) gives the
// panel block's vectors 2k and 2k + 1 (vector v: values 4v..4v+3 of every row);
// row(qs) a file block's 32 values in element order.
template <const int8_t (&Levels)[16], int K, class S>
struct Nibbles {
  using Scale = S;
  using Panel = PanelQ4x8T<S>;
  static constexpr int kOffset = K;
  static constexpr size_t kBlockBytes = sizeof(S) + 16;
  __m256i lut = Lut<Levels, K>::vec();
  void pair(const Panel& p, int k, __m256i* w) const {
    const __m256i m4 = _mm256_set1_epi8(15), raw = loadu256(p.qs + 32 * k);
    w[0] = _mm256_shuffle_epi8(lut, _mm256_and_si256(raw, m4));
    w[1] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
  }
  __m256i row(const uint8_t* qs) const { return _mm256_shuffle_epi8(lut, unpack_nibbles16(qs)); }
};
template <int K>
struct Bytes {
  static_assert(K == 0 || K == 128);
  using Scale = uint16_t;
  using Panel = PanelQ8x8;
  static constexpr int kOffset = K;
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  static __m256i offset(__m256i v) { return K != 0 ? _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80))) : v; }
  void pair(const Panel& p, int k, __m256i* w) const {
    w[0] = offset(loadu256(p.qs + 64 * k));
    w[1] = offset(loadu256(p.qs + 64 * k + 32));
  }
  __m256i row(const uint8_t* qs) const { return offset(loadu256(qs)); }
};

// out[t * 8 + r] = dot(panel row r, x[t]) for NT prepared tokens (panels.h's order).
template <class W, int NT>
void panel_dot(int64_t n, float* out, const void* w, const void* const* xp) {
  constexpr int K = W::kOffset;
  const W fmt;
  const auto* a = static_cast<const typename W::Panel*>(w);
  const int64_t nb = n / kQ32;
  const PanelActs<NT> x(xp, nb);
  __m256 acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i isum[NT];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) isum[t] = K != 0 ? _mm256_set1_epi32(x[t].s[i]) : _mm256_setzero_si256();
    DF_UNROLL
    for (int k = 0; k < 4; ++k) {
      __m256i wv[2];
      fmt.pair(a[i], k, wv);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) {
        int32_t y0, y1;
        std::memcpy(&y0, x[t].y + 32 * i + 8 * k, 4);
        std::memcpy(&y1, x[t].y + 32 * i + 8 * k + 4, 4);
        isum[t] = dot_acc<K>(dot_acc<K>(isum[t], wv[0], _mm256_set1_epi32(y0)), wv[1], _mm256_set1_epi32(y1));
      }
    }
    const __m256 dw = panel_scales8(a[i].d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(x[t].d[i])), _mm256_cvtepi32_ps(isum[t]), acc[t]);
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// Eight int32 vectors folded into one whose lane k is the sum of p[k]'s lanes.
// Integer adds, so exact in any order.
inline __m256i sum_rows8(const __m256i* p) {
  const __m256i ab = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i cd = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

// One row in the file's order with panel_dot's bits, for experts read into the RAM
// cache (which keeps the file's bytes): eight blocks at a time, each block's products
// with a token as the row kernels form them, their lane sums folded so that lane k
// holds block k's exact integer (sum_rows8), then panel_dot's float steps block after
// block (a scalar FMA chain per token). One row streams from memory at a time: eight
// rows read side by side measured slower here than the row kernels.
template <class W, int NT>
void row_dot(int64_t n, float* out, const void* w, const void* const* xp) {
  constexpr int K = W::kOffset;
  constexpr size_t kBlock = W::kBlockBytes;
  using Scale = typename W::Scale;
  const W fmt;
  const auto* a = static_cast<const uint8_t*>(w);
  const int64_t nb = n / kQ32;
  const PanelActs<NT> x(xp, nb);
  float acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    __m256i q[8];
    Scale d[8];
    DF_UNROLL
    for (int k = 0; k < 8; ++k) {
      const uint8_t* blk = a + size_t(i + k) * kBlock;
      std::memcpy(&d[k], blk, sizeof(Scale));
      q[k] = fmt.row(blk + sizeof(Scale));
    }
    const __m256 dw = panel_scales8(d);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m256i p[8];
      DF_UNROLL
      for (int k = 0; k < 8; ++k) p[k] = dot_acc<K>(_mm256_setzero_si256(), q[k], loadu256(x[t].y + 32 * (i + k)));
      __m256i isum = sum_rows8(p);
      if constexpr (K != 0) isum = _mm256_add_epi32(isum, loadu256(x[t].s + i));
      alignas(32) float m[8], f[8];
      _mm256_store_ps(m, _mm256_mul_ps(dw, _mm256_loadu_ps(x[t].d + i)));
      _mm256_store_ps(f, _mm256_cvtepi32_ps(isum));
      DF_UNROLL
      for (int k = 0; k < 8; ++k) acc[t] = std::fma(m[k], f[k], acc[t]);
    }
  }
  for (; i < nb; ++i) {
    const uint8_t* blk = a + size_t(i) * kBlock;
    Scale d;
    std::memcpy(&d, blk, sizeof(Scale));
    const __m256i q = fmt.row(blk + sizeof(Scale));
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const int isum = hsum8_i32(dot_acc<K>(_mm256_setzero_si256(), q, loadu256(x[t].y + 32 * i))) + x[t].s[i];
      acc[t] = std::fma(panel_scale(d) * x[t].d[i], float(isum), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// The conversion to panels (types.h panel_pack; panels.cpp pack_q4x8 and pack_q8x8
// give the bytes). One 4-byte word of every row makes a panel piece: the rows' words
// transposed into vectors, eight rows per 256-bit vector (rows 0-3 in the low lane,
// 4-7 in the high one).
inline __m256i rows_pair(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}
// v[j]: rows j (low lane) and j + 4 (high lane), four words each -> v[w]: word w of
// rows 0-3 (low lane) and 4-7 (high lane).
inline void transpose_words(__m256i* v) {
  const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  v[0] = _mm256_unpacklo_epi64(t0, t2);
  v[1] = _mm256_unpackhi_epi64(t0, t2);
  v[2] = _mm256_unpacklo_epi64(t1, t3);
  v[3] = _mm256_unpackhi_epi64(t1, t3);
}
template <class Scale>
void pack_q4x8_x86(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  constexpr size_t kBlock = sizeof(Scale) + 16;
  auto* p = reinterpret_cast<PanelQ4x8T<Scale>*>(out);
  const __m256i lo = _mm256_set1_epi8(15);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = rows + size_t(i) * kBlock;
    __m256i w[4];
    DF_UNROLL
    for (int j = 0; j < 4; ++j) {
      const uint8_t* r = b + size_t(j) * row_bytes;
      std::memcpy(&p[i].d[j], r, sizeof(Scale));
      std::memcpy(&p[i].d[j + 4], r + 4 * row_bytes, sizeof(Scale));
      w[j] = rows_pair(r + sizeof(Scale), r + 4 * row_bytes + sizeof(Scale));
    }
    transpose_words(w);
    auto* q = reinterpret_cast<__m256i*>(p[i].qs);
    const auto lo_of = [&](__m256i v) { return _mm256_and_si256(v, lo); };
    _mm256_storeu_si256(q, _mm256_or_si256(lo_of(w[0]), _mm256_slli_epi32(lo_of(w[1]), 4)));
    _mm256_storeu_si256(q + 1, _mm256_or_si256(lo_of(w[2]), _mm256_slli_epi32(lo_of(w[3]), 4)));
    _mm256_storeu_si256(q + 2, _mm256_or_si256(lo_of(_mm256_srli_epi32(w[0], 4)), _mm256_andnot_si256(lo, w[1])));
    _mm256_storeu_si256(q + 3, _mm256_or_si256(lo_of(_mm256_srli_epi32(w[2], 4)), _mm256_andnot_si256(lo, w[3])));
  }
}
inline void pack_q8x8_x86(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  auto* p = reinterpret_cast<PanelQ8x8*>(out);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = rows + size_t(i) * sizeof(BlockQ8_0);
    auto* q = reinterpret_cast<__m256i*>(p[i].qs);
    DF_UNROLL
    for (int h = 0; h < 2; ++h) {  // words 4h..4h+3 of each row: pieces 4h..4h+3
      __m256i w[4];
      DF_UNROLL
      for (int j = 0; j < 4; ++j) {
        const uint8_t* r = b + size_t(j) * row_bytes + 2 + 16 * h;
        w[j] = rows_pair(r, r + 4 * row_bytes);
      }
      transpose_words(w);
      DF_UNROLL
      for (int k = 0; k < 4; ++k) _mm256_storeu_si256(q + 4 * h + k, w[k]);
    }
    DF_UNROLL
    for (int r = 0; r < 8; ++r) std::memcpy(&p[i].d[r], b + size_t(r) * row_bytes, sizeof(uint16_t));
  }
}

// Sets one type's panel kernels (over panels and over the file's rows) and their
// activation preparation and conversion.
template <class W>
void set_panels(TypeTraits& r) {
  set_panel_kernels<W::kOffset, panel_dot<W, 1>, panel_dot<W, 4>, row_dot<W, 1>, row_dot<W, 4>>(r);
  if constexpr (std::is_same_v<typename W::Panel, PanelQ8x8>) r.panel_pack = pack_q8x8_x86;
  else r.panel_pack = pack_q4x8_x86<typename W::Scale>;
}

// The panel kernels of Q8_0, Q4_0, IQ4_NL and MXFP4 (one build's). Offsets: what keeps
// vpmaddubsw from saturating (none for Q8_0 and IQ4_NL), anything with vpdpbusd.
inline void install_panels_x86(TypeTraits* t) {
  set_panels<Bytes<kVnni ? 128 : 0>>(t[uint32_t(DType::Q8_0)]);
  set_panels<Nibbles<kQ4_0Levels, 8, uint16_t>>(t[uint32_t(DType::Q4_0)]);
  set_panels<Nibbles<kIq4nlValues, kVnni ? 128 : 0, uint16_t>>(t[uint32_t(DType::IQ4_NL)]);
  set_panels<Nibbles<kMxfp4Values, 12, uint8_t>>(t[uint32_t(DType::MXFP4)]);
}

}  // namespace
}  // namespace deltafin::kern
