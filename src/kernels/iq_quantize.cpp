// Quantizers of the i-quants (from_float). IQ2_XXS: each run of eight values takes
// a codebook point and a sign pattern with an even count of negatives, each group of
// 32 an odd scale step. The search is exhaustive where it is cheap: for a run, the
// 256 products <target, point> and the points' squared norms do not depend on the
// scale, so every candidate scale costs one pass of 256 comparisons; the best scale
// per group is refined by least squares and its 4-bit code chosen by trying the
// neighbouring codes against the final fp16 super-scale. Without an importance
// matrix every value weighs the same (plain squared error).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {
namespace {

struct Iq2xxsFloatGrid {
  float g[256][8];
  Iq2xxsFloatGrid() {
    for (int p = 0; p < 256; ++p)
      for (int j = 0; j < 8; ++j) g[p][j] = float((kIq2xxsGrid[p] >> (8 * j)) & 255);
  }
};
const Iq2xxsFloatGrid& float_grid() {
  static const Iq2xxsFloatGrid g;
  return g;
}

// One run of eight: the signed targets' weighted products with every point.
struct Run {
  float dot[256], n2[256];  // sum w t g, sum w g^2
  uint8_t sign_bits;        // bit j: value j is stored negative (even count)
};

// Signs of x (flipping the least important value if the count of negatives is odd)
// and the scale-free search data of the run.
void prepare_run(const float* x, const float* w, Run* r) {
  int neg = 0, least = 0;
  float t[8];
  for (int j = 0; j < 8; ++j) {
    neg += x[j] < 0;
    if (w[j] * std::fabs(x[j]) < w[least] * std::fabs(x[least])) least = j;
  }
  uint8_t bits = 0;
  for (int j = 0; j < 8; ++j) bits |= uint8_t((x[j] < 0) << j);
  if (neg & 1) bits ^= uint8_t(1 << least);  // that value's target is now -|x|
  for (int j = 0; j < 8; ++j) t[j] = ((bits >> j) & 1 ? -x[j] : x[j]) * w[j];
  r->sign_bits = bits;
  const auto& fg = float_grid();
  for (int p = 0; p < 256; ++p) {
    float d = 0, n = 0;
    for (int j = 0; j < 8; ++j) d += t[j] * fg.g[p][j], n += w[j] * fg.g[p][j] * fg.g[p][j];
    r->dot[p] = d, r->n2[p] = n;
  }
}

// The point minimising s^2 n2 - 2 s dot (the weighted error up to a constant), s > 0.
int best_point(const Run& r, float s) {
  int best = 0;
  float e = s * r.n2[0] - 2 * r.dot[0];
  for (int p = 1; p < 256; ++p) {
    float v = s * r.n2[p] - 2 * r.dot[p];
    if (v < e) e = v, best = p;
  }
  return best;
}

// Weighted error (up to the constant sum w x^2) of a group of four runs at scale s.
float group_error(const Run* runs, float s, int* pts) {
  float e = 0;
  for (int l = 0; l < 4; ++l) {
    pts[l] = best_point(runs[l], s);
    e += s * s * runs[l].n2[pts[l]] - 2 * s * runs[l].dot[pts[l]];
  }
  return e;
}

// Best real scale of a group of four runs (0 if the group is all zero).
float fit_group(const Run* runs, const float* x) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 0;
  float best_s = 0, best_e = 0;
  int pts[4];
  for (int k = 0; k < 28; ++k) {
    // The largest value at each magnitude (8, 25, 43) and between them.
    float s = amax / (8.0f + 1.5f * float(k));
    group_error(runs, s, pts);
    float sd = 0, sn = 0;
    for (int l = 0; l < 4; ++l) sd += runs[l].dot[pts[l]], sn += runs[l].n2[pts[l]];
    if (sd > 0 && sn > 0) s = sd / sn;  // least squares for these points
    float e = group_error(runs, s, pts);
    if (best_s == 0 || e < best_e) best_s = s, best_e = e;
  }
  return best_s;
}

void quantize_block_iq2_xxs(const float* x, const float* weights, BlockIQ2_XXS* b) {
  float ones[kQK];
  if (weights == nullptr) std::fill(ones, ones + kQK, 1.0f), weights = ones;
  Run runs[32];
  float s[8], smax = 0;
  for (int ib = 0; ib < 8; ++ib) {
    for (int l = 0; l < 4; ++l) prepare_run(x + 32 * ib + 8 * l, weights + 32 * ib + 8 * l, &runs[4 * ib + l]);
    s[ib] = fit_group(runs + 4 * ib, x + 32 * ib);
    smax = std::max(smax, s[ib]);
  }
  std::memset(b, 0, sizeof *b);
  if (smax == 0) return;
  // Group scale = d (2 ls + 1) / 8, ls < 16: the largest group gets ls = 15.
  b->d = f32_to_fp16(smax * 8.0f / 31.0f);
  const float d = fp16_to_f32(b->d);
  if (d == 0) return;
  for (int ib = 0; ib < 8; ++ib) {
    int ls0 = std::clamp(int(std::nearbyint((8.0f * s[ib] / d - 1.0f) / 2.0f)), 0, 15);
    int best_ls = ls0, pts[4], best_pts[4] = {0, 0, 0, 0};
    float best_e = 0;
    bool have = false;
    for (int ls = std::max(0, ls0 - 1); ls <= std::min(15, ls0 + 1); ++ls) {
      float e = group_error(runs + 4 * ib, d * float(2 * ls + 1) / 8.0f, pts);
      if (!have || e < best_e) {
        have = true, best_e = e, best_ls = ls;
        std::copy(pts, pts + 4, best_pts);
      }
    }
    uint32_t w0 = 0, w1 = uint32_t(best_ls) << 28;
    for (int l = 0; l < 4; ++l) {
      w0 |= uint32_t(best_pts[l]) << (8 * l);
      w1 |= uint32_t(runs[4 * ib + l].sign_bits & 127) << (7 * l);
    }
    std::memcpy(b->qs + 4 * ib, &w0, 4);
    std::memcpy(b->qs + 4 * ib + 2, &w1, 4);
  }
}

}  // namespace

void from_float_iq2_xxs_ref(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ2_XXS*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) quantize_block_iq2_xxs(src + i * kQK, nullptr, b + i);
}

}  // namespace deltafin::kern
