#include "kernels/importance.h"

namespace deltafin {

FromFloatImpFn from_float_imp(DType t) {
  using namespace kern;
  switch (t) {
    case DType::IQ2_XXS: return from_float_imp_iq2_xxs_ref;
    case DType::IQ2_XS: return from_float_imp_iq2_xs_ref;
    case DType::IQ3_XXS: return from_float_imp_iq3_xxs_ref;
    case DType::IQ2_S: return from_float_imp_iq2_s_ref;
    case DType::IQ3_S: return from_float_imp_iq3_s_ref;
    case DType::IQ1_S: return from_float_imp_iq1_s_ref;
    case DType::IQ1_M: return from_float_imp_iq1_m_ref;
    default: return nullptr;
  }
}

}  // namespace deltafin
