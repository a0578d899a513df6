// Sizes as deltafin prints them: binary units with two decimals ("1.50 GiB"), the
// units --mem, --reserve and --disk-cache take.
#pragma once
#include <fmt/format.h>

#include <string>

namespace deltafin {

inline std::string format_bytes(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) {
    b /= 1024;
    ++i;
  }
  return fmt::format("{:.2f} {}", b, u[i]);
}

}  // namespace deltafin
