// x86 kernels over Q4_K and Q5_K row panels (panels_impl.h PanelQ4Kx8, PanelQ5Kx8),
// included by panels_avx2.cpp (internal linkage, as x86_common.h).
//
// Per super-block, sub-block and token: eight pieces, each one vpmaddubsw of four codes
// of all eight rows against four activation bytes broadcast to every lane, summed as
// int16 (Q4_K: eight pairs of at most 15 x 128 x 2 stay within 30720; Q5_K's codes to
// 31: four), then one vpmaddwd by the eight rows' scales of that sub-block (Q5_K two).
// The row kernels multiply by a scale per row and 32 values; here one multiply serves
// eight rows. The mins: four vpmaddwd per token and super-block, each two sub-blocks of
// eight rows against the activation's sums.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels/kquants_x86.h"
#include "kernels/panels_x86.h"

namespace deltafin::kern {

namespace {

// vpshufb controls over a scale field in slot order (q4k_panel_slot: byte 4r' + j of
// each 128-bit lane for lane row r' and sub-block j < 4): int16 element e of a lane
// takes byte 4(e / 2) + j0 + (e % 2) * step, its high byte zero.
struct Q4kCtrl {
  alignas(32) int8_t b[32];
  constexpr Q4kCtrl(int j0, int step) : b{} {
    for (int i = 0; i < 32; ++i) {
      const int e = (i % 16) / 2;
      b[i] = i % 2 == 1 ? int8_t(-128) : int8_t(4 * (e / 2) + j0 + (e % 2) * step);
    }
  }
  __m256i vec() const { return _mm256_load_si256(reinterpret_cast<const __m256i*>(b)); }
};
// Sub-block j's scale of each row, twice (int16 elements 2r', 2r' + 1): j = 0..3.
inline constexpr Q4kCtrl kQ4kScaleCtrl[4] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}};
// The mins of sub-blocks j0 and j0 + 1 of each row: j0 = 0, 2.
inline constexpr Q4kCtrl kQ4kMinCtrl[2] = {{0, 1}, {2, 1}};

// A panel block's 6-bit scales and mins as bytes in slot order: sc[0] sub-blocks 0-3,
// sc[1] 4-7, m[0] and m[1] alike.
struct Q4kPanelScales {
  __m256i sc[2], m[2];
  template <class Panel>
  explicit Q4kPanelScales(const Panel& p) {
    const __m256i lo = loadu256(p.sclo), ml = loadu256(p.mlo), hi = loadu256(p.hi);
    const __m256i m15 = mask8(15), m30 = mask8(0x30);
    sc[0] = _mm256_or_si256(_mm256_and_si256(lo, m15), _mm256_and_si256(_mm256_slli_epi16(hi, 4), m30));
    sc[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m15),
                            _mm256_and_si256(_mm256_slli_epi16(hi, 2), m30));
    m[0] = _mm256_or_si256(_mm256_and_si256(ml, m15), _mm256_and_si256(hi, m30));
    m[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ml, 4), m15),
                           _mm256_and_si256(_mm256_srli_epi16(hi, 2), m30));
  }
  // Sub-block j's scale of every row as int16, twice (elements 2r, 2r + 1).
  __m256i scale16(int j) const { return _mm256_shuffle_epi8(sc[j / 4], kQ4kScaleCtrl[j % 4].vec()); }
  // The mins of sub-blocks 2q and 2q + 1 of every row as int16 pairs.
  __m256i mins16(int q) const { return _mm256_shuffle_epi8(m[q / 2], kQ4kMinCtrl[q % 2].vec()); }
};

// The activation's sub-block sums 2q, 2q + 1 (an int16 pair) in every 32-bit lane.
inline void q4k_sum_pairs(__m128i pairs, __m256i* out) {
  const __m256i p = _mm256_broadcastsi128_si256(pairs);
  out[0] = _mm256_shuffle_epi32(p, 0x00);
  out[1] = _mm256_shuffle_epi32(p, 0x55);
  out[2] = _mm256_shuffle_epi32(p, 0xaa);
  out[3] = _mm256_shuffle_epi32(p, 0xff);
}

// out[t * 8 + r] = dot(panel row r, x[t]) for NT tokens prepared by prep_q8k_pairs.
template <int Bits, int NT>
void panel_dot_q45k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const PanelQ45Kx8<Bits>*>(w);
  constexpr int kRun = Bits == 4 ? 8 : 4;  // pieces summed as int16 before a vpmaddwd
  const PreparedQ8KRows<NT> y(xp, n);
  const __m256i m15 = mask8(15);
  __m256 acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const PanelQ45Kx8<Bits>& p = a[i];
    const Q4kPanelScales s(p);
    __m256i isum[NT], msum[NT];
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m256i ys[4];
      q4k_sum_pairs(y.pairs(t, i), ys);
      msum[t] = _mm256_madd_epi16(s.mins16(0), ys[0]);
      DF_UNROLL
      for (int q = 1; q < 4; ++q) msum[t] = madd_acc(msum[t], s.mins16(q), ys[q]);
      isum[t] = _mm256_setzero_si256();
    }
    for (int q = 0; q < 4; ++q) {  // sub-blocks 2q (low nibbles) and 2q + 1 (high)
      const uint8_t* qs = p.qs + 256 * q;
      const __m128i qh_shift = _mm_cvtsi32_si128(2 * q);  // Q5_K: bit 2q of a qh byte to bit 0
      DF_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * q + h;
        const __m256i sv = s.scale16(j);
        __m256i part[NT];
        DF_UNROLL
        for (int k = 0; k < 8; ++k) {
          const __m256i raw = loadu256(qs + 32 * k);
          __m256i wv = _mm256_and_si256(h == 0 ? raw : _mm256_srli_epi16(raw, 4), m15);
          if constexpr (Bits == 5) {
            const __m256i qh = _mm256_srl_epi16(loadu256(p.qh + 32 * k), qh_shift);
            wv = _mm256_or_si256(wv, _mm256_and_si256(_mm256_slli_epi16(qh, 4 - h), mask8(16)));
          }
          DF_UNROLL
          for (int t = 0; t < NT; ++t) {
            int32_t v;
            std::memcpy(&v, y.b[t][i].qs + 32 * j + 4 * k, 4);
            const __m256i prod = _mm256_maddubs_epi16(wv, _mm256_set1_epi32(v));
            part[t] = k % kRun == 0 ? prod : _mm256_add_epi16(part[t], prod);
          }
          if (k % kRun == kRun - 1) {
            DF_UNROLL
            for (int t = 0; t < NT; ++t) isum[t] = madd_acc(isum[t], part[t], sv);
          }
        }
      }
    }
    const __m256 dv = panel_scales8(p.d), dm = panel_scales8(p.dmin);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(y.b[t][i].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dv, dx), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dx), _mm256_cvtepi32_ps(msum[t]), acc[t]);
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// One row in the file's order with panel_dot_q45k's bits: per super-block the row
// kernels' integer work (q45k_block_sums: int32 lanes whose sum is exact), eight
// super-blocks' lanes folded into one vector (sum_rows8), then the reference's two
// float steps per super-block as a scalar chain per token.
template <int Bits, int NT>
void row_dot_q45k(int64_t n, float* out, const void* w, const void* const* xp) {
  const auto* a = static_cast<const BlockQ45K<Bits>*>(w);
  const int64_t nb = n / kQK;
  const PreparedQ8KRows<NT> y(xp, n);
  float acc[NT];
  DF_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  for (int64_t i0 = 0; i0 < nb; i0 += 8) {
    const int m = int(std::min<int64_t>(8, nb - i0));
    __m256i is[NT][8], ms[NT][8];
    alignas(16) uint16_t d[8] = {}, dmin[8] = {};
    for (int k = 0; k < 8; ++k) {
      if (k >= m) {
        DF_UNROLL
        for (int t = 0; t < NT; ++t) is[t][k] = ms[t][k] = _mm256_setzero_si256();
        continue;
      }
      const BlockQ45K<Bits>& blk = a[i0 + k];
      d[k] = blk.d;
      dmin[k] = blk.dmin;
      __m256i sumi[NT][1];
      __m128i msum[NT];
      q45k_block_sums<Bits, NT, 1>(blk, y, i0 + k, sumi, msum);
      DF_UNROLL
      for (int t = 0; t < NT; ++t) is[t][k] = sumi[t][0], ms[t][k] = _mm256_zextsi128_si256(msum[t]);
    }
    const __m256 dv = panel_scales8(d), dm = panel_scales8(dmin);
    DF_UNROLL
    for (int t = 0; t < NT; ++t) {
      alignas(32) float dx[8] = {}, fd[8], fm[8], fi[8], fs[8];
      for (int k = 0; k < m; ++k) dx[k] = y.b[t][i0 + k].d;
      const __m256 dxv = _mm256_load_ps(dx);
      _mm256_store_ps(fd, _mm256_mul_ps(dv, dxv));
      _mm256_store_ps(fm, _mm256_mul_ps(dm, dxv));
      _mm256_store_ps(fi, _mm256_cvtepi32_ps(sum_rows8(is[t])));
      _mm256_store_ps(fs, _mm256_cvtepi32_ps(sum_rows8(ms[t])));
      for (int k = 0; k < m; ++k) {
        acc[t] = std::fma(fd[k], fi[k], acc[t]);
        acc[t] = std::fma(-fm[k], fs[k], acc[t]);
      }
    }
  }
  DF_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// Words [4 * n_groups) of eight rows (`row_bytes` apart, from `src`) transposed into
// 32-byte pieces: piece w holds word w of row r at byte 4r.
inline void transpose_row_words(const uint8_t* src, size_t row_bytes, int n_groups, uint8_t* out) {
  auto* q = reinterpret_cast<__m256i*>(out);
  for (int h = 0; h < n_groups; ++h) {  // words 4h..4h+3 of each row
    __m256i v[4];
    DF_UNROLL
    for (int j = 0; j < 4; ++j) {
      const uint8_t* r = src + size_t(j) * row_bytes + 16 * h;
      v[j] = rows_pair(r, r + 4 * row_bytes);
    }
    transpose_words(v);
    DF_UNROLL
    for (int k = 0; k < 4; ++k) _mm256_storeu_si256(q + 4 * h + k, v[k]);
  }
}

// The conversion (panels.cpp pack_q45kx8 gives the bytes): the codes (and Q5_K's
// fifth bits) are the rows' 4-byte words transposed; the scales and mins of each row
// unpacked to bytes (k4_scales: sc[0..7] | m[0..7], four words), the same transpose
// putting word w of rows 0-3 and 4-7 in one vector, then packed into the low-nibble
// and top-bit fields.
template <int Bits>
void pack_q45kx8_x86(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  using Block = BlockQ45K<Bits>;
  auto* p = reinterpret_cast<PanelQ45Kx8<Bits>*>(out);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = rows + size_t(i) * sizeof(Block);
    transpose_row_words(b + offsetof(Block, qs), row_bytes, 8, p[i].qs);
    if constexpr (Bits == 5) transpose_row_words(b + offsetof(Block, qh), row_bytes, 2, p[i].qh);
    __m256i s[4];
    DF_UNROLL
    for (int j = 0; j < 4; ++j) {
      const uint8_t* r = b + size_t(j) * row_bytes;
      const uint8_t* r4 = r + 4 * row_bytes;
      s[j] = _mm256_inserti128_si256(_mm256_castsi128_si256(k4_scales(r + offsetof(Block, scales))),
                                     k4_scales(r4 + offsetof(Block, scales)), 1);
      std::memcpy(&p[i].d[j], r, 2);
      std::memcpy(&p[i].d[j + 4], r4, 2);
      std::memcpy(&p[i].dmin[j], r + 2, 2);
      std::memcpy(&p[i].dmin[j + 4], r4 + 2, 2);
    }
    transpose_words(s);  // s[0]: scales 0-3, s[1]: scales 4-7, s[2], s[3]: the mins
    const __m256i m15 = mask8(15);
    const auto nibbles = [&](__m256i lo, __m256i up) {
      return _mm256_or_si256(_mm256_and_si256(lo, m15), _mm256_slli_epi16(_mm256_and_si256(up, m15), 4));
    };
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[i].sclo), nibbles(s[0], s[1]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[i].mlo), nibbles(s[2], s[3]));
    const __m256i top =
        _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(s[0], 4), mask8(0x03)),
                                        _mm256_and_si256(_mm256_srli_epi16(s[1], 2), mask8(0x0c))),
                        _mm256_or_si256(_mm256_and_si256(s[2], mask8(0x30)),
                                        _mm256_and_si256(_mm256_slli_epi16(s[3], 2), mask8(0xc0))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[i].hi), top);
  }
}

// Q4_K's and Q5_K's panel kernels, activation preparation (the Q8_K rows with their
// sum pairs, as the prepared row kernels read them) and conversion.
template <int Bits>
void set_panels_q45k(TypeTraits& r) {
  r.panel_prep_bytes = prep_bytes_q8k_pairs;
  r.panel_prep = prep_q8k_pairs;
  r.panel_dot = one_token<panel_dot_q45k<Bits, 1>>;
  r.panel_dot_x4 = panel_dot_q45k<Bits, 4>;
  r.panel_rows = one_token<row_dot_q45k<Bits, 1>>;
  r.panel_rows_x4 = row_dot_q45k<Bits, 4>;
  r.panel_pack = pack_q45kx8_x86<Bits>;
}
inline void install_panels_q4k_x86(TypeTraits* t) {
  set_panels_q45k<4>(t[uint32_t(DType::Q4_K)]);
  set_panels_q45k<5>(t[uint32_t(DType::Q5_K)]);
}

}  // namespace
}  // namespace deltafin::kern
