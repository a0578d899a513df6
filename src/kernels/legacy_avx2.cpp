// AVX2 kernels of Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, TQ2_0 and the Q8_1 quantizer (legacy_x86.h).
#include "kernels/kernels_impl.h"
#include "kernels/legacy_x86.h"

namespace deltafin::kern {

void install_legacy_avx2(TypeTraits* t) { install_legacy_x86(t, Isa::AVX2); }

}  // namespace deltafin::kern
