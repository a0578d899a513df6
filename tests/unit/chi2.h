// Chi-square helpers for the statistical tests of the samplers.
#pragma once
#include <array>
#include <vector>

namespace deltafin {

// Upper 0.1% points of chi-square with df = 1..30 (huge beyond: no test).
inline double chi2_crit_001(int df) {
  static const double t[] = {10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59,
                             31.26, 32.91, 34.53, 36.12, 37.70, 39.25, 40.79, 42.31, 43.82, 45.31,
                             46.80, 48.27, 49.73, 51.18, 52.62, 54.05, 55.48, 56.89, 58.30, 59.70};
  return df >= 1 && df <= 30 ? t[df - 1] : 1e300;
}

// Homogeneity of two equal-sized samples over categories: counts[i] = {side 0, side 1}.
// Categories with fewer than 10 draws in all are pooled, so that every cell expects at
// least 5. Returns the statistic; *cells_out: the cells after pooling (df = cells - 1).
template <class Map>
double chi2_two_samples(const Map& counts, int* cells_out) {
  std::vector<std::array<int, 2>> cells;
  std::array<int, 2> rare{0, 0};
  for (const auto& [key, c] : counts) {
    if (c[0] + c[1] >= 10) cells.push_back(c);
    else rare[0] += c[0], rare[1] += c[1];
  }
  if (rare[0] + rare[1] > 0) cells.push_back(rare);
  double x = 0;
  for (const auto& c : cells) {
    const double e = (c[0] + c[1]) / 2.0;
    x += (c[0] - e) * (c[0] - e) / e + (c[1] - e) * (c[1] - e) / e;
  }
  *cells_out = int(cells.size());
  return x;
}

}  // namespace deltafin
