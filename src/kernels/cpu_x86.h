// x86 CPU features the compilers' __builtin_cpu_supports does not name everywhere
// (clang 14 refuses "f16c"): read from CPUID. Only for x86 translation units.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

namespace deltafin {

// F16C (CPUID.1:ECX bit 29). Callers also ask for AVX (__builtin_cpu_supports("avx")),
// which says the OS saves the YMM registers.
inline bool cpu_x86_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

}  // namespace deltafin
#endif
