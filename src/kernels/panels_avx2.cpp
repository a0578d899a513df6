// AVX2 kernels over row panels (panels_x86.h).
#include "kernels/kernels_impl.h"
#include "kernels/panels_q4k_x86.h"
#include "kernels/panels_x86.h"

namespace deltafin::kern {

void install_panels_avx2(TypeTraits* t) {
  install_panels_x86(t);
  install_panels_q4k_x86(t);
}

}  // namespace deltafin::kern
