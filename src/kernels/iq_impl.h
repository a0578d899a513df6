// Internal: the i-quant kernels (IQ2_XXS, IQ2_XS, IQ3_XXS) that types.cpp adds to the traits
// tables: scalar references (ref_iq.cpp, quantizers in iq_quantize.cpp) and the
// per-ISA installers (iq_avx2.cpp, iq_avx512.cpp).
#pragma once
#include <cstdint>

#include "kernels/types.h"

namespace deltafin::kern {

void to_float_iq2_xxs_ref(const void* src, float* dst, int64_t n);
void from_float_iq2_xxs_ref(const float* src, void* dst, int64_t n);
void vec_dot_iq2_xxs_ref(int64_t n, float* out, const void* w, const void* x);
void to_float_iq2_xs_ref(const void* src, float* dst, int64_t n);
void from_float_iq2_xs_ref(const float* src, void* dst, int64_t n);
void vec_dot_iq2_xs_ref(int64_t n, float* out, const void* w, const void* x);
void to_float_iq3_xxs_ref(const void* src, float* dst, int64_t n);
void from_float_iq3_xxs_ref(const float* src, void* dst, int64_t n);
void vec_dot_iq3_xxs_ref(int64_t n, float* out, const void* w, const void* x);

void install_iq_avx2(TypeTraits* table);
void install_iq_avx512(TypeTraits* table);

}  // namespace deltafin::kern
