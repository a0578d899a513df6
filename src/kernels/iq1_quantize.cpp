// Quantizers of IQ1_S and IQ1_M. Without an importance matrix (from_float) every
// value weighs the same (plain squared error); with one (from_float_imp) value j
// weighs w_j = imp_j sqrt(sigma2 + x_j^2) (importance_weights) and every error below
// is sum_j w_j (x_j - q_j)^2. A value is s (g + delta) with s the
// group's scale d (2 ls + 1), g a coordinate of a codebook point (iq_grids.h) and
// delta = +-1/8, shared by a group of 32 (IQ1_S) or chosen per run of eight (IQ1_M,
// whose scale groups are 16 values). The search is exhaustive over the codebook: for
// a run x of eight, sum (x - s (g + delta))^2 depends on the point only through
// sum x g, sum g and sum g^2, so one pass over the 2048 points per candidate scale
// and delta finds the best (weighted: sum w x g, sum w g, sum w g^2 per point, the
// last two now per run). Each group's real scale is fitted (candidates, then least
// squares for the chosen points), the fp16 super-scale gives the largest group ls = 7,
// and each group's code is chosen by trying the neighbouring codes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/importance.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {
namespace {

constexpr int kPoints = 2048;

// Per point: sum g, sum g^2.
struct PointSums {
  float sg[kPoints], n2[kPoints];
};

const PointSums& point_sums() {
  static const PointSums p = [] {
    PointSums s{};
    for (int i = 0; i < kPoints; ++i)
      for (int j = 0; j < 8; ++j) {
        const float g = float(int8_t((kIq1sGrid[size_t(i)] >> (8 * j)) & 255));
        s.sg[i] += g, s.n2[i] += g * g;
      }
    return s;
  }();
  return p;
}

float grid_coord(int point, int j) { return float(int8_t((kIq1sGrid[size_t(point)] >> (8 * j)) & 255)); }

// One run of eight with its weights w: sum w x g per point, sum w x, sum w, and the
// per-point sum w g and sum w g^2 (sg, n2: point_sums' when the weights are all one,
// else this run's own wsg, wn2).
struct Run {
  float dx[kPoints];
  float wsg[kPoints], wn2[kPoints];
  const float *sg, *n2;
  float sx, sw;
  const float* w;
};

// w == nullptr: every weight is one (the same sums, bit for bit, as before weights).
void prepare_run(const float* x, const float* w, Run* r) {
  r->sx = 0, r->sw = 0, r->w = w;
  for (int j = 0; j < 8; ++j) r->sx += w ? w[j] * x[j] : x[j], r->sw += w ? w[j] : 1.0f;
  for (int i = 0; i < kPoints; ++i) {
    float d = 0;
    for (int j = 0; j < 8; ++j) d += (w ? w[j] * x[j] : x[j]) * grid_coord(i, j);
    r->dx[i] = d;
  }
  if (w == nullptr) {
    r->sg = point_sums().sg, r->n2 = point_sums().n2;
    return;
  }
  for (int i = 0; i < kPoints; ++i) {
    float sg = 0, n2 = 0;
    for (int j = 0; j < 8; ++j) {
      const float g = grid_coord(i, j);
      sg += w[j] * g, n2 += w[j] * g * g;
    }
    r->wsg[i] = sg, r->wn2[i] = n2;
  }
  r->sg = r->wsg, r->n2 = r->wn2;
}

// The best point of a run at scale s and delta (+-1/8): its index and the error up to
// the constant sum x^2.
struct Choice {
  int point = 0;
  float err = 0;
};

Choice best_point(const Run& r, float s, float delta) {
  // s^2 sum w (g + delta)^2 - 2 s sum w x (g + delta), less the terms every point shares.
  Choice c;
  float best = 0;
  for (int i = 0; i < kPoints; ++i) {
    const float e = s * (r.n2[i] + 2 * delta * r.sg[i]) - 2 * r.dx[i];
    if (i == 0 || e < best) best = e, c.point = i;
  }
  c.err = s * best + s * s * r.sw * delta * delta - 2 * s * delta * r.sx;
  return c;
}

// A group of NR runs at scale s: the points, deltas (+1 / -1) and total error. With
// a shared delta both signs are tried for the whole group, else per run.
template <int NR>
float choose_group(const Run* runs, float s, bool shared_delta, int* pts, int* deltas) {
  float total = 0;
  if (shared_delta) {
    float best = 0;
    for (int sign : {1, -1}) {
      Choice c[NR];
      float e = 0;
      for (int l = 0; l < NR; ++l) c[l] = best_point(runs[l], s, 0.125f * float(sign)), e += c[l].err;
      if (sign == 1 || e < best) {
        best = e;
        for (int l = 0; l < NR; ++l) pts[l] = c[l].point, deltas[l] = sign;
      }
    }
    return best;
  }
  for (int l = 0; l < NR; ++l) {
    const Choice p = best_point(runs[l], s, 0.125f), m = best_point(runs[l], s, -0.125f);
    const bool neg = m.err < p.err;
    pts[l] = neg ? m.point : p.point, deltas[l] = neg ? -1 : 1;
    total += neg ? m.err : p.err;
  }
  return total;
}

// Best real scale of a group of NR runs (0 if all values are zero).
template <int NR>
float fit_group(const Run* runs, const float* x, bool shared_delta) {
  float amax = 0;
  for (int i = 0; i < 8 * NR; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 0;
  float best_s = 0, best_e = 0;
  constexpr int kCandidates = 12;
  for (int k = 0; k < kCandidates; ++k) {
    // The largest value at the magnitudes 0.875 and 1.125 of (g + delta) and below.
    float s = amax / (0.8f + 1.6f * float(k) / float(kCandidates - 1));
    int pts[NR], deltas[NR];
    choose_group<NR>(runs, s, shared_delta, pts, deltas);
    // Least squares for these points: s = sum w x v / sum w v^2, error -(sum w x v)^2 / sum w v^2.
    float xv = 0, vv = 0;
    for (int l = 0; l < NR; ++l)
      for (int j = 0; j < 8; ++j) {
        const float v = grid_coord(pts[l], j) + 0.125f * float(deltas[l]);
        const float* w = runs[l].w;
        if (w) xv += w[j] * x[8 * l + j] * v, vv += w[j] * v * v;
        else xv += x[8 * l + j] * v, vv += v * v;
      }
    if (!(xv > 0 && vv > 0)) continue;
    const float e = -xv * xv / vv;
    if (best_s == 0 || e < best_e) best_s = xv / vv, best_e = e;
  }
  return best_s;
}

// One super-block: the fp16 d, and per run its point and delta sign, per group of
// 8 NR values its 3-bit scale code.
// w: the block's weights (w[kQK]), or nullptr: all one.
template <int NR>
void quantize_block(const float* x, const float* w, bool shared_delta, uint16_t* d_out, int* pts, int* deltas,
                    int* ls) {
  constexpr int NG = kQK / (8 * NR);
  static thread_local std::array<Run, kQK / 8> runs;
  for (int r = 0; r < kQK / 8; ++r) prepare_run(x + 8 * r, w ? w + 8 * r : nullptr, &runs[size_t(r)]);
  float s[NG], smax = 0;
  for (int g = 0; g < NG; ++g) smax = std::max(smax, s[g] = fit_group<NR>(&runs[size_t(NR * g)], x + 8 * NR * g, shared_delta));
  *d_out = 0;
  std::fill(pts, pts + kQK / 8, 0);
  std::fill(deltas, deltas + kQK / 8, 1);
  std::fill(ls, ls + NG, 0);
  if (smax == 0) return;
  *d_out = f32_to_fp16(smax / 15.0f);
  const float d = fp16_to_f32(*d_out);
  if (d == 0) return;
  for (int g = 0; g < NG; ++g) {
    const int ls0 = std::clamp(int(std::nearbyint((s[g] / d - 1.0f) / 2.0f)), 0, 7);
    float best = 0;
    for (int l = std::max(0, ls0 - 1); l <= std::min(7, ls0 + 1); ++l) {
      int p[NR], dl[NR];
      const float e = choose_group<NR>(&runs[size_t(NR * g)], d * float(2 * l + 1), shared_delta, p, dl);
      if (l == std::max(0, ls0 - 1) || e < best) {
        best = e, ls[g] = l;
        std::copy(p, p + NR, pts + NR * g);
        std::copy(dl, dl + NR, deltas + NR * g);
      }
    }
  }
}

// The weights of super-block i of a row (nullptr without an importance vector), in
// w[kQK]. sigma2 = 2 * (the super-block's mean square), as llama.cpp's
// quantize_row_iq1_s_impl and quantize_row_iq1_m_impl take it.
const float* block_weights(const float* x, const float* imp, int64_t i, float* w) {
  if (imp == nullptr) return nullptr;
  importance_weights(x, imp + i * kQK, 2.0f, w);
  return w;
}

void iq1_s_rows(const float* src, void* dst, int64_t n, const float* imp) {
  auto* b = static_cast<BlockIQ1_S*>(dst);
  float wt[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    int pts[32], deltas[32], ls[8];
    quantize_block<4>(src + i * kQK, block_weights(src + i * kQK, imp, i, wt), true, &b[i].d, pts, deltas, ls);
    for (int ib = 0; ib < 8; ++ib) {
      uint16_t h = uint16_t(ls[ib] << 12 | (deltas[4 * ib] < 0 ? 0x8000 : 0));
      for (int l = 0; l < 4; ++l) {
        b[i].qs[4 * ib + l] = uint8_t(pts[4 * ib + l] & 255);
        h = uint16_t(h | (pts[4 * ib + l] >> 8) << (3 * l));
      }
      b[i].qh[ib] = h;
    }
  }
}

void iq1_m_rows(const float* src, void* dst, int64_t n, const float* imp) {
  auto* b = static_cast<BlockIQ1_M*>(dst);
  float wt[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    int pts[32], deltas[32], ls[16];
    uint16_t d;
    quantize_block<2>(src + i * kQK, block_weights(src + i * kQK, imp, i, wt), false, &d, pts, deltas, ls);
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int r = 0; r < 32; ++r) {
      b[i].qs[r] = uint8_t(pts[r] & 255);
      b[i].qh[r / 2] = uint8_t(b[i].qh[r / 2] | ((pts[r] >> 8) | (deltas[r] < 0 ? 8 : 0)) << (4 * (r % 2)));
    }
    for (int w = 0; w < 4; ++w) {
      uint16_t v = uint16_t(((d >> (4 * w)) & 15) << 12);
      for (int h = 0; h < 4; ++h) v = uint16_t(v | ls[4 * w + h] << (3 * h));
      std::memcpy(b[i].scales + 2 * w, &v, 2);
    }
  }
}

}  // namespace

void from_float_iq1_s_ref(const float* src, void* dst, int64_t n) { iq1_s_rows(src, dst, n, nullptr); }
void from_float_iq1_m_ref(const float* src, void* dst, int64_t n) { iq1_m_rows(src, dst, n, nullptr); }
void from_float_imp_iq1_s_ref(const float* src, void* dst, int64_t n, const float* imp) {
  iq1_s_rows(src, dst, n, imp);
}
void from_float_imp_iq1_m_ref(const float* src, void* dst, int64_t n, const float* imp) {
  iq1_m_rows(src, dst, n, imp);
}

}  // namespace deltafin::kern
