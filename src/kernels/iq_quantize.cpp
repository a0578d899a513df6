// Quantizers of the grid i-quants (from_float). IQ2_XXS, IQ2_XS, IQ3_XXS, IQ2_S and
// IQ3_S share one scheme: each group of values (32; 16 for IQ2_XS and IQ2_S) gets an
// odd scale step, each run of eight values a sign pattern (with an even count of
// negatives, except IQ2_S and IQ3_S, whose eight sign bits are free), and each cell
// (eight values for IQ2_*, four for IQ3_*) a codebook point. The
// search is exhaustive where it is cheap: for a cell, the products <target, point>
// and the points' squared norms do not depend on the scale, so every candidate scale
// costs one pass of comparisons over the codebook; the best scale per group is
// refined by least squares and its 4-bit code chosen by trying the neighbouring codes
// against the final fp16 super-scale. Without an importance matrix every value
// weighs the same (plain squared error); with one (the *_imp quantizers), value j
// weighs importance_weights' w_j and every error above is sum_j w_j (x_j - q_j)^2.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/importance.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {

void importance_weights(const float* x, const float* imp, float sigma_mult, float* w) {
  float sumx2 = 0;
  for (int j = 0; j < kQK; ++j) sumx2 += x[j] * x[j];
  const float sigma2 = sigma_mult * sumx2 / float(kQK);
  for (int j = 0; j < kQK; ++j) w[j] = imp[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

namespace {

// A codebook of N points of Dim coordinates, as floats; a group of G values shares
// a scale d (2 ls + 1) / step.
template <int Dim, int N, int G>
struct Codebook {
  static constexpr int kDim = Dim, kN = N, kG = G;
  float g[N][Dim];
  float gmin, gmax, step;
};

template <int N>
Codebook<8, N, (N == 256 ? 32 : 16)> make_e8_book(const uint64_t* grid) {
  Codebook<8, N, (N == 256 ? 32 : 16)> c{};  // IQ2_XXS: groups of 32, IQ2_XS / IQ2_S: 16
  for (int p = 0; p < N; ++p)
    for (int j = 0; j < 8; ++j) c.g[p][j] = float((grid[p] >> (8 * j)) & 255);
  c.gmin = kIq2xxsMagnitudes[0], c.gmax = kIq2xxsMagnitudes[2], c.step = 8;
  return c;
}

const auto& iq2xxs_book() {
  static const auto b = make_e8_book<256>(kIq2xxsGrid.data());
  return b;
}

const auto& iq2xs_book() {
  static const auto b = make_e8_book<512>(kIq2xsGrid.data());
  return b;
}

const auto& iq2s_book() {
  static const auto b = make_e8_book<1024>(kIq2sGrid.data());
  return b;
}

const Codebook<4, 512, 32>& iq3s_book() {
  static const Codebook<4, 512, 32> b = [] {
    Codebook<4, 512, 32> c{};
    for (int p = 0; p < 512; ++p)
      for (int j = 0; j < 4; ++j) c.g[p][j] = float((kIq3sGrid[size_t(p)] >> (8 * j)) & 255);
    c.gmin = 1, c.gmax = 15, c.step = 1;
    return c;
  }();
  return b;
}

const Codebook<4, 256, 32>& iq3xxs_book() {
  static const Codebook<4, 256, 32> b = [] {
    Codebook<4, 256, 32> c{};
    for (int p = 0; p < 256; ++p)
      for (int j = 0; j < 4; ++j) c.g[p][j] = float((kIq3xxsGrid[size_t(p)] >> (8 * j)) & 255);
    c.gmin = kIq3xxsMagnitudes[0], c.gmax = kIq3xxsMagnitudes[7], c.step = 4;
    return c;
  }();
  return b;
}

// One cell: the signed targets' weighted products with every point.
template <int N>
struct Cell {
  float dot[N], n2[N];  // sum w t g, sum w g^2
};

// Sign bits of eight values (bit j: value j stored negative), flipping the least
// important value if the count of negatives is odd; t = the values with those signs
// taken off (the flipped one becomes -|x|).
uint8_t even_signs(const float* x, const float* w, float* t) {
  int neg = 0, least = 0;
  for (int j = 0; j < 8; ++j) {
    neg += x[j] < 0;
    if (w[j] * std::fabs(x[j]) < w[least] * std::fabs(x[least])) least = j;
  }
  uint8_t bits = 0;
  for (int j = 0; j < 8; ++j) bits |= uint8_t((x[j] < 0) << j);
  if (neg & 1) bits ^= uint8_t(1 << least);
  for (int j = 0; j < 8; ++j) t[j] = (bits >> j) & 1 ? -x[j] : x[j];
  return bits;
}

template <class Book>
void prepare_cell(const Book& cb, const float* t, const float* w, Cell<Book::kN>* c) {
  for (int p = 0; p < Book::kN; ++p) {
    float d = 0, n = 0;
    for (int j = 0; j < Book::kDim; ++j) d += w[j] * t[j] * cb.g[p][j], n += w[j] * cb.g[p][j] * cb.g[p][j];
    c->dot[p] = d, c->n2[p] = n;
  }
}

// The point minimising s^2 n2 - 2 s dot (the weighted error up to a constant), s > 0.
template <int N>
int best_point(const Cell<N>& c, float s) {
  int best = 0;
  float e = s * c.n2[0] - 2 * c.dot[0];
  for (int p = 1; p < N; ++p) {
    float v = s * c.n2[p] - 2 * c.dot[p];
    if (v < e) e = v, best = p;
  }
  return best;
}

// Weighted error (up to the constant sum w x^2) of a group's NC cells at scale s.
template <int NC, int N>
float group_error(const Cell<N>* cells, float s, int* pts) {
  float e = 0;
  for (int l = 0; l < NC; ++l) {
    pts[l] = best_point(cells[l], s);
    e += s * s * cells[l].n2[pts[l]] - 2 * s * cells[l].dot[pts[l]];
  }
  return e;
}

// Best real scale of a group of G values (0 if all are zero).
template <int NC, int G, int N>
float fit_group(const Cell<N>* cells, const float* x, float gmin, float gmax) {
  float amax = 0;
  for (int i = 0; i < G; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 0;
  float best_s = 0, best_e = 0;
  int pts[NC];
  constexpr int kCandidates = 16;
  for (int k = 0; k < kCandidates; ++k) {
    // The largest value at every magnitude of the codebook and between them.
    float s = amax / (gmin + (1.1f * gmax - gmin) * float(k) / float(kCandidates - 1));
    group_error<NC>(cells, s, pts);
    float sd = 0, sn = 0;
    for (int l = 0; l < NC; ++l) sd += cells[l].dot[pts[l]], sn += cells[l].n2[pts[l]];
    if (!(sd > 0 && sn > 0)) continue;
    s = sd / sn;  // least squares for these points; their error there is -sd^2 / sn
    float e = -sd * sd / sn;
    if (best_s == 0 || e < best_e) best_s = s, best_e = e;
  }
  return best_s;
}

// The sign bits of eight values as they are; t = |x|.
uint8_t free_signs(const float* x, float* t) {
  uint8_t bits = 0;
  for (int j = 0; j < 8; ++j) bits |= uint8_t((x[j] < 0) << j), t[j] = std::fabs(x[j]);
  return bits;
}

// Quantizes one super-block: d (fp16), the point of every cell (pts[kQK / Dim]), the
// sign code of every eight values (signs[32]: 7 bits, or all 8 if FreeSigns) and the
// scale code of every group (ls[kQK / G]).
template <bool FreeSigns = false, class Book>
void quantize_block(const Book& cb, const float* x, const float* weights, uint16_t* d_out, uint16_t* pts_out,
                    uint8_t* signs_out, uint8_t* ls_out) {
  constexpr int Dim = Book::kDim, N = Book::kN, G = Book::kG, NC = G / Dim, NG = kQK / G;
  float ones[kQK];
  if (weights == nullptr) std::fill(ones, ones + kQK, 1.0f), weights = ones;
  static thread_local Cell<N> cells[kQK / Dim];
  float t[kQK], s[NG], smax = 0;
  for (int r = 0; r < kQK / 8; ++r)
    signs_out[r] = FreeSigns ? free_signs(x + 8 * r, t + 8 * r) : even_signs(x + 8 * r, weights + 8 * r, t + 8 * r) & 127;
  for (int c = 0; c < kQK / Dim; ++c) prepare_cell(cb, t + Dim * c, weights + Dim * c, &cells[c]);
  for (int ig = 0; ig < NG; ++ig) {
    s[ig] = fit_group<NC, G>(cells + NC * ig, x + G * ig, cb.gmin, cb.gmax);
    smax = std::max(smax, s[ig]);
  }
  *d_out = 0;
  std::fill(ls_out, ls_out + NG, uint8_t(0));
  std::fill(pts_out, pts_out + kQK / Dim, uint16_t(0));
  if (smax == 0) return;
  // Group scale = d (2 ls + 1) / step, ls < 16: the largest group gets ls = 15.
  *d_out = f32_to_fp16(smax * cb.step / 31.0f);
  const float d = fp16_to_f32(*d_out);
  if (d == 0) return;
  for (int ig = 0; ig < NG; ++ig) {
    int ls0 = std::clamp(int(std::nearbyint((cb.step * s[ig] / d - 1.0f) / 2.0f)), 0, 15);
    int pts[NC];
    float best_e = 0;
    bool have = false;
    for (int ls = std::max(0, ls0 - 1); ls <= std::min(15, ls0 + 1); ++ls) {
      float e = group_error<NC>(cells + NC * ig, d * float(2 * ls + 1) / cb.step, pts);
      if (!have || e < best_e) {
        have = true, best_e = e, ls_out[ig] = uint8_t(ls);
        for (int c = 0; c < NC; ++c) pts_out[NC * ig + c] = uint16_t(pts[c]);
      }
    }
  }
}

// Sign codes and scale code as one word: code r in bits 7r..7r+6, ls in 28..31.
uint32_t signs_scale_word(const uint8_t* signs, uint8_t ls) {
  uint32_t w = uint32_t(ls) << 28;
  for (int r = 0; r < 4; ++r) w |= uint32_t(signs[r]) << (7 * r);
  return w;
}

// The weights of super-block i of a row (nullptr without an importance vector),
// in w[kQK].
const float* block_weights(const float* x, const float* imp, int64_t i, float sigma_mult, float* w) {
  if (imp == nullptr) return nullptr;
  importance_weights(x, imp + i * kQK, sigma_mult, w);
  return w;
}

// sigma2 = k * (the super-block's mean square) in w_j = imp_j sqrt(sigma2 + x_j^2),
// with llama.cpp's k per type (ggml-quants.c's quantize_row_*_impl): 1 for IQ2_XXS
// and IQ2_XS, 2 for IQ3_XXS, IQ2_S and IQ3_S.
constexpr float kSigmaIq2xxs = 1, kSigmaIq2xs = 1, kSigmaIq3xxs = 2, kSigmaIq2s = 2, kSigmaIq3s = 2;

void iq2_xxs_rows(const float* src, void* dst, int64_t n, const float* imp) {
  auto* b = static_cast<BlockIQ2_XXS*>(dst);
  float wt[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint16_t pts[32];
    uint8_t signs[32], ls[8];
    const float* wb = block_weights(src + i * kQK, imp, i, kSigmaIq2xxs, wt);
    quantize_block(iq2xxs_book(), src + i * kQK, wb, &b[i].d, pts, signs, ls);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t w0 = 0;
      for (int c = 0; c < 4; ++c) w0 |= uint32_t(pts[4 * ib + c]) << (8 * c);
      const uint32_t w1 = signs_scale_word(signs + 4 * ib, ls[ib]);
      std::memcpy(b[i].qs + 4 * ib, &w0, 4);
      std::memcpy(b[i].qs + 4 * ib + 2, &w1, 4);
    }
  }
}

void iq2_xs_rows(const float* src, void* dst, int64_t n, const float* imp) {
  auto* b = static_cast<BlockIQ2_XS*>(dst);
  float wt[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint16_t pts[32];
    uint8_t signs[32], ls[16];
    const float* wb = block_weights(src + i * kQK, imp, i, kSigmaIq2xs, wt);
    quantize_block(iq2xs_book(), src + i * kQK, wb, &b[i].d, pts, signs, ls);
    for (int c = 0; c < 32; ++c) b[i].qs[c] = uint16_t(pts[c] | (signs[c] << 9));
    for (int ib = 0; ib < 8; ++ib) b[i].scales[ib] = uint8_t(ls[2 * ib] | (ls[2 * ib + 1] << 4));
  }
}

void iq3_xxs_rows(const float* src, void* dst, int64_t n, const float* imp) {
  auto* b = static_cast<BlockIQ3_XXS*>(dst);
  float wt[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint16_t pts[64];
    uint8_t signs[32], ls[8];
    const float* wb = block_weights(src + i * kQK, imp, i, kSigmaIq3xxs, wt);
    quantize_block(iq3xxs_book(), src + i * kQK, wb, &b[i].d, pts, signs, ls);
    for (int c = 0; c < 64; ++c) b[i].qs[c] = uint8_t(pts[c]);
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t w = signs_scale_word(signs + 4 * ib, ls[ib]);
      std::memcpy(b[i].qs + 64 + 4 * ib, &w, 4);
    }
  }
}


void iq2_s_rows(const float* src, void* dst, int64_t n, const float* imp) {
  auto* b = static_cast<BlockIQ2_S*>(dst);
  float wt[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint16_t pts[32];
    uint8_t signs[32], ls[16];
    const float* wb = block_weights(src + i * kQK, imp, i, kSigmaIq2s, wt);
    quantize_block<true>(iq2s_book(), src + i * kQK, wb, &b[i].d, pts, signs, ls);
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int r = 0; r < 32; ++r) {
      b[i].qs[r] = uint8_t(pts[r] & 255), b[i].qs[32 + r] = signs[r];
      b[i].qh[r / 4] = uint8_t(b[i].qh[r / 4] | (pts[r] >> 8) << (2 * (r % 4)));
    }
    for (int ib = 0; ib < 8; ++ib) b[i].scales[ib] = uint8_t(ls[2 * ib] | (ls[2 * ib + 1] << 4));
  }
}

void iq3_s_rows(const float* src, void* dst, int64_t n, const float* imp) {
  auto* b = static_cast<BlockIQ3_S*>(dst);
  float wt[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint16_t pts[64];
    uint8_t ls[8];
    const float* wb = block_weights(src + i * kQK, imp, i, kSigmaIq3s, wt);
    quantize_block<true>(iq3s_book(), src + i * kQK, wb, &b[i].d, pts, b[i].signs, ls);
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int c = 0; c < 64; ++c) {
      b[i].qs[c] = uint8_t(pts[c] & 255);
      b[i].qh[c / 8] = uint8_t(b[i].qh[c / 8] | (pts[c] >> 8) << (c % 8));
    }
    for (int ib = 0; ib < 4; ++ib) b[i].scales[ib] = uint8_t(ls[2 * ib] | (ls[2 * ib + 1] << 4));
  }
}

}  // namespace

void from_float_iq2_xxs_ref(const float* src, void* dst, int64_t n) { iq2_xxs_rows(src, dst, n, nullptr); }
void from_float_iq2_xs_ref(const float* src, void* dst, int64_t n) { iq2_xs_rows(src, dst, n, nullptr); }
void from_float_iq3_xxs_ref(const float* src, void* dst, int64_t n) { iq3_xxs_rows(src, dst, n, nullptr); }
void from_float_iq2_s_ref(const float* src, void* dst, int64_t n) { iq2_s_rows(src, dst, n, nullptr); }
void from_float_iq3_s_ref(const float* src, void* dst, int64_t n) { iq3_s_rows(src, dst, n, nullptr); }
void from_float_imp_iq2_xxs_ref(const float* src, void* dst, int64_t n, const float* imp) {
  iq2_xxs_rows(src, dst, n, imp);
}
void from_float_imp_iq2_xs_ref(const float* src, void* dst, int64_t n, const float* imp) {
  iq2_xs_rows(src, dst, n, imp);
}
void from_float_imp_iq3_xxs_ref(const float* src, void* dst, int64_t n, const float* imp) {
  iq3_xxs_rows(src, dst, n, imp);
}
void from_float_imp_iq2_s_ref(const float* src, void* dst, int64_t n, const float* imp) {
  iq2_s_rows(src, dst, n, imp);
}
void from_float_imp_iq3_s_ref(const float* src, void* dst, int64_t n, const float* imp) {
  iq3_s_rows(src, dst, n, imp);
}

}  // namespace deltafin::kern
