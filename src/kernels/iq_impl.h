// Internal: the i-quant kernels that types.cpp adds to the traits tables. IQ2_XXS,
// IQ2_XS, IQ3_XXS: scalar references in ref_iq.cpp, SIMD in iq_avx2.cpp/iq_avx512.cpp;
// IQ2_S, IQ3_S: ref_iq_s.cpp, iq_s_avx2.cpp/iq_s_avx512.cpp; those five quantize in
// iq_quantize.cpp. IQ1_S, IQ1_M: ref_iq1.cpp, iq1_quantize.cpp, iq1_avx2.cpp/
// iq1_avx512.cpp; the ternary TQ1_0: ref_tq1.cpp, tq1_avx2.cpp/tq1_avx512.cpp.
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
void to_float_iq2_s_ref(const void* src, float* dst, int64_t n);
void from_float_iq2_s_ref(const float* src, void* dst, int64_t n);
void vec_dot_iq2_s_ref(int64_t n, float* out, const void* w, const void* x);
void to_float_iq3_s_ref(const void* src, float* dst, int64_t n);
void from_float_iq3_s_ref(const float* src, void* dst, int64_t n);
void vec_dot_iq3_s_ref(int64_t n, float* out, const void* w, const void* x);
void to_float_iq1_s_ref(const void* src, float* dst, int64_t n);
void from_float_iq1_s_ref(const float* src, void* dst, int64_t n);
void vec_dot_iq1_s_ref(int64_t n, float* out, const void* w, const void* x);
void to_float_iq1_m_ref(const void* src, float* dst, int64_t n);
void from_float_iq1_m_ref(const float* src, void* dst, int64_t n);
void vec_dot_iq1_m_ref(int64_t n, float* out, const void* w, const void* x);

void install_iq_avx2(TypeTraits* table);
void install_iq_avx512(TypeTraits* table);
void to_float_tq1_0_ref(const void* src, float* dst, int64_t n);
void from_float_tq1_0_ref(const float* src, void* dst, int64_t n);
void vec_dot_tq1_0_ref(int64_t n, float* out, const void* w, const void* x);

void install_iq_s_avx2(TypeTraits* table);  // IQ2_S, IQ3_S (ref_iq_s.cpp, iq_s_avx2.cpp, iq_s_avx512.cpp)
void install_iq_s_avx512(TypeTraits* table);
void install_iq1_avx2(TypeTraits* table);  // IQ1_S, IQ1_M (iq1_avx2.cpp, iq1_avx512.cpp)
void install_iq1_avx512(TypeTraits* table);
void install_tq1_avx2(TypeTraits* table);  // TQ1_0 (ref_tq1.cpp, tq1_avx2.cpp, tq1_avx512.cpp)
void install_tq1_avx512(TypeTraits* table);

}  // namespace deltafin::kern
