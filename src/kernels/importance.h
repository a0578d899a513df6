// Importance-weighted quantizers: as a type's from_float (types.h), minimising
// sum_j w_j (x_j - q_j)^2 rather than the plain squared error, with llama.cpp's
// weights w_j = imp_j sqrt(sigma2 + x_j^2) for the importance imp_j of value j (an
// imatrix's mean squared activation of its column, quant/imatrix.h) and sigma2 a
// multiple of the 256-value super-block's mean square (the term keeps small values
// from weighing nothing). Only the types whose quantizers search weighted errors
// have one: the i-quants IQ2_XXS, IQ2_XS, IQ3_XXS, IQ2_S, IQ3_S (iq_quantize.cpp) and
// IQ1_S, IQ1_M (iq1_quantize.cpp). Scalar only (quantizing is not on a hot path);
// thread-safe; allocate nothing.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace deltafin {

// from_float_imp(src, dst, n, imp): quantizes n values (whole blocks), imp[j] >= 0
// the importance of src[j] (n values: a caller quantizing one row passes that row's
// importance vector). imp all equal is a valid, not identical, quantization.
using FromFloatImpFn = void (*)(const float* src, void* dst, int64_t n, const float* imp);

// The weighted quantizer of `t`, or nullptr where it has none.
FromFloatImpFn from_float_imp(DType t);

namespace kern {

void from_float_imp_iq2_xxs_ref(const float* src, void* dst, int64_t n, const float* imp);
void from_float_imp_iq2_xs_ref(const float* src, void* dst, int64_t n, const float* imp);
void from_float_imp_iq3_xxs_ref(const float* src, void* dst, int64_t n, const float* imp);
void from_float_imp_iq2_s_ref(const float* src, void* dst, int64_t n, const float* imp);
void from_float_imp_iq3_s_ref(const float* src, void* dst, int64_t n, const float* imp);
void from_float_imp_iq1_s_ref(const float* src, void* dst, int64_t n, const float* imp);
void from_float_imp_iq1_m_ref(const float* src, void* dst, int64_t n, const float* imp);

// The weights of one 256-value super-block x for the importances imp[256]:
// w[j] = imp[j] sqrt(sigma2 + x[j]^2), sigma2 = sigma_mult * mean(x^2).
void importance_weights(const float* x, const float* imp, float sigma_mult, float* w);

}  // namespace kern
}  // namespace deltafin
