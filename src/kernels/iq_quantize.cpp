// Quantizers of the i-quants (from_float). IQ2_XXS and IQ3_XXS share one scheme:
// each group of 32 values gets an odd scale step, each run of eight values a sign
// pattern with an even count of negatives, and each cell (eight values for IQ2_XXS,
// four for IQ3_XXS) a codebook point. The search is exhaustive where it is cheap: for
// a cell, the products <target, point> and the points' squared norms do not depend
// on the scale, so every candidate scale costs one pass of comparisons over the
// codebook; the best scale per group is refined by least squares and its 4-bit code
// chosen by trying the neighbouring codes against the final fp16 super-scale.
// Without an importance matrix every value weighs the same (plain squared error).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {
namespace {

// A codebook of 256 points of Dim coordinates, as floats; Step: the group scale is
// d (2 ls + 1) / Step.
template <int Dim>
struct Codebook {
  static constexpr int kDim = Dim;
  float g[256][Dim];
  float gmin, gmax;
  float step;
};

const Codebook<8>& iq2xxs_book() {
  static const Codebook<8> b = [] {
    Codebook<8> c{};
    for (int p = 0; p < 256; ++p)
      for (int j = 0; j < 8; ++j) c.g[p][j] = float((kIq2xxsGrid[size_t(p)] >> (8 * j)) & 255);
    c.gmin = kIq2xxsMagnitudes[0], c.gmax = kIq2xxsMagnitudes[2], c.step = 8;
    return c;
  }();
  return b;
}

const Codebook<4>& iq3xxs_book() {
  static const Codebook<4> b = [] {
    Codebook<4> c{};
    for (int p = 0; p < 256; ++p)
      for (int j = 0; j < 4; ++j) c.g[p][j] = float((kIq3xxsGrid[size_t(p)] >> (8 * j)) & 255);
    c.gmin = kIq3xxsMagnitudes[0], c.gmax = kIq3xxsMagnitudes[7], c.step = 4;
    return c;
  }();
  return b;
}

// One cell: the signed targets' weighted products with every point.
struct Cell {
  float dot[256], n2[256];  // sum w t g, sum w g^2
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

template <int Dim>
void prepare_cell(const Codebook<Dim>& cb, const float* t, const float* w, Cell* c) {
  for (int p = 0; p < 256; ++p) {
    float d = 0, n = 0;
    for (int j = 0; j < Dim; ++j) d += w[j] * t[j] * cb.g[p][j], n += w[j] * cb.g[p][j] * cb.g[p][j];
    c->dot[p] = d, c->n2[p] = n;
  }
}

// The point minimising s^2 n2 - 2 s dot (the weighted error up to a constant), s > 0.
int best_point(const Cell& c, float s) {
  int best = 0;
  float e = s * c.n2[0] - 2 * c.dot[0];
  for (int p = 1; p < 256; ++p) {
    float v = s * c.n2[p] - 2 * c.dot[p];
    if (v < e) e = v, best = p;
  }
  return best;
}

// Weighted error (up to the constant sum w x^2) of a group's NC cells at scale s.
template <int NC>
float group_error(const Cell* cells, float s, int* pts) {
  float e = 0;
  for (int l = 0; l < NC; ++l) {
    pts[l] = best_point(cells[l], s);
    e += s * s * cells[l].n2[pts[l]] - 2 * s * cells[l].dot[pts[l]];
  }
  return e;
}

// Best real scale of a group (0 if the group is all zero).
template <int NC>
float fit_group(const Cell* cells, const float* x, float gmin, float gmax) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 0;
  float best_s = 0, best_e = 0;
  int pts[NC];
  constexpr int kCandidates = 32;
  for (int k = 0; k < kCandidates; ++k) {
    // The largest value at every magnitude of the codebook and between them.
    float s = amax / (gmin + (1.1f * gmax - gmin) * float(k) / float(kCandidates - 1));
    group_error<NC>(cells, s, pts);
    float sd = 0, sn = 0;
    for (int l = 0; l < NC; ++l) sd += cells[l].dot[pts[l]], sn += cells[l].n2[pts[l]];
    if (sd > 0 && sn > 0) s = sd / sn;  // least squares for these points
    float e = group_error<NC>(cells, s, pts);
    if (best_s == 0 || e < best_e) best_s = s, best_e = e;
  }
  return best_s;
}

// Quantizes one super-block: d (fp16) and, per group, the NC point indices, the
// four sign codes and the scale code.
template <int Dim>
void quantize_block(const Codebook<Dim>& cb, const float* x, const float* weights, uint16_t* d_out,
                    uint8_t (*pts_out)[32 / Dim], uint8_t (*signs_out)[4], uint8_t* ls_out) {
  constexpr int NC = 32 / Dim;
  float ones[kQK];
  if (weights == nullptr) std::fill(ones, ones + kQK, 1.0f), weights = ones;
  static thread_local Cell cells[8 * NC];
  float t[kQK], s[8], smax = 0;
  for (int ib = 0; ib < 8; ++ib) {
    for (int r = 0; r < 4; ++r) {
      const int o = 32 * ib + 8 * r;
      signs_out[ib][r] = even_signs(x + o, weights + o, t + o) & 127;
    }
    for (int c = 0; c < NC; ++c)
      prepare_cell<Dim>(cb, t + 32 * ib + Dim * c, weights + 32 * ib + Dim * c, &cells[NC * ib + c]);
    s[ib] = fit_group<NC>(cells + NC * ib, x + 32 * ib, cb.gmin, cb.gmax);
    smax = std::max(smax, s[ib]);
  }
  *d_out = 0;
  std::memset(ls_out, 0, 8);
  for (int ib = 0; ib < 8; ++ib) std::memset(pts_out[ib], 0, NC);
  if (smax == 0) return;
  // Group scale = d (2 ls + 1) / step, ls < 16: the largest group gets ls = 15.
  *d_out = f32_to_fp16(smax * cb.step / 31.0f);
  const float d = fp16_to_f32(*d_out);
  if (d == 0) return;
  for (int ib = 0; ib < 8; ++ib) {
    int ls0 = std::clamp(int(std::nearbyint((cb.step * s[ib] / d - 1.0f) / 2.0f)), 0, 15);
    int pts[NC];
    float best_e = 0;
    bool have = false;
    for (int ls = std::max(0, ls0 - 1); ls <= std::min(15, ls0 + 1); ++ls) {
      float e = group_error<NC>(cells + NC * ib, d * float(2 * ls + 1) / cb.step, pts);
      if (!have || e < best_e) {
        have = true, best_e = e, ls_out[ib] = uint8_t(ls);
        for (int c = 0; c < NC; ++c) pts_out[ib][c] = uint8_t(pts[c]);
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

}  // namespace

void from_float_iq2_xxs_ref(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ2_XXS*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint8_t pts[8][4], signs[8][4], ls[8];
    quantize_block<8>(iq2xxs_book(), src + i * kQK, nullptr, &b[i].d, pts, signs, ls);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t w0 = 0;
      for (int c = 0; c < 4; ++c) w0 |= uint32_t(pts[ib][c]) << (8 * c);
      const uint32_t w1 = signs_scale_word(signs[ib], ls[ib]);
      std::memcpy(b[i].qs + 4 * ib, &w0, 4);
      std::memcpy(b[i].qs + 4 * ib + 2, &w1, 4);
    }
  }
}

void from_float_iq3_xxs_ref(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ3_XXS*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint8_t pts[8][8], signs[8][4], ls[8];
    quantize_block<4>(iq3xxs_book(), src + i * kQK, nullptr, &b[i].d, pts, signs, ls);
    for (int ib = 0; ib < 8; ++ib) {
      std::memcpy(b[i].qs + 8 * ib, pts[ib], 8);
      const uint32_t w = signs_scale_word(signs[ib], ls[ib]);
      std::memcpy(b[i].qs + 64 + 4 * ib, &w, 4);
    }
  }
}

}  // namespace deltafin::kern
