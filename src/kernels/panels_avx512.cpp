// AVX-512 (VNNI) kernels over row panels (panels_x86.h): 256-bit vectors, each piece
// one vpdpbusd.
#include "kernels/kernels_impl.h"
#include "kernels/panels_x86.h"

namespace deltafin::kern {

void install_panels_avx512(TypeTraits* t) { install_panels_x86(t); }

}  // namespace deltafin::kern
