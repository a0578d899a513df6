// Whether this AArch64 CPU has the dot-product extension (SDOT/UDOT), asked of the
// operating system: the HWCAP bits on Linux, the hw.optional sysctl on macOS (every
// Apple M-series chip has it). False on other CPUs and systems.
#include "kernels/kernels_impl.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace deltafin::kern {

bool cpu_has_arm_dotprod() {
#if defined(__aarch64__) && defined(__linux__)
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20;  // HWCAP_ASIMDDP (asm/hwcap.h)
  return (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
#elif defined(__aarch64__) && defined(__APPLE__)
  int v = 0;
  size_t size = sizeof(v);
  return sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &size, nullptr, 0) == 0 && v != 0;
#else
  return false;
#endif
}

}  // namespace deltafin::kern
