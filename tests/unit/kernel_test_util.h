// Helpers shared by the kernel tests: Gaussian test data and a guard that restores
// the selected kernel set.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/types.h"

namespace deltafin {

// n values from N(0, sd^2), the same for the same seed.
inline std::vector<float> gaussian(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Puts back the kernel set selected when it was made (tests that select_isa).
struct RestoreIsa {
  Isa was = selected_isa();
  ~RestoreIsa() { select_isa(was); }
};

}  // namespace deltafin
