// Assembles the NEON traits table (types.cpp calls it on aarch64): the installers of
// the *_neon.cpp files, from their plain build or from the one with the dot-product
// extension (neon_common.h), whichever the CPU runs.
#include "kernels/iq_impl.h"
#include "kernels/kernels_impl.h"

namespace deltafin::kern {

#if defined(DELTAFIN_ARM)
void install_neon_all(TypeTraits* t, bool sdot) {
  if (sdot) {
    install_neon_sdot(t);
    install_legacy_neon_sdot(t);
    install_kquants_neon_sdot(t);
    install_iq_neon_sdot(t);
    install_iq_s_neon_sdot(t);
    install_iq1_neon_sdot(t);
    install_tq1_neon_sdot(t);
    install_panels_neon_sdot(t);
    install_panels_q4k_neon_sdot(t);
  } else {
    install_neon(t);
    install_legacy_neon(t);
    install_kquants_neon(t);
    install_iq_neon(t);
    install_iq_s_neon(t);
    install_iq1_neon(t);
    install_tq1_neon(t);
    install_panels_neon(t);
    install_panels_q4k_neon(t);
  }
}
#endif

}  // namespace deltafin::kern
