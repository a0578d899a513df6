// Internal: the scalar reference kernels and the per-ISA installers that
// types.cpp assembles into the traits tables.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/types.h"

// Fully unrolls the small fixed loops over rows (t < NT), chunks and accumulators of
// the SIMD kernels: GCC at -O2 would otherwise keep the accumulator arrays in memory.
#define DF_UNROLL _Pragma("GCC unroll 16")

namespace deltafin::kern {

#define DF_DECLARE_REF(name)                                                   \
  void to_float_##name##_ref(const void* src, float* dst, int64_t n);          \
  void from_float_##name##_ref(const float* src, void* dst, int64_t n);        \
  void vec_dot_##name##_ref(int64_t n, float* out, const void* w, const void* x);

DF_DECLARE_REF(f32)
DF_DECLARE_REF(f16)
DF_DECLARE_REF(bf16)
DF_DECLARE_REF(q8_0)
DF_DECLARE_REF(q4_0)
DF_DECLARE_REF(mxfp4)
DF_DECLARE_REF(q8_k)
DF_DECLARE_REF(q2_k)
DF_DECLARE_REF(q3_k)
DF_DECLARE_REF(q4_k)
DF_DECLARE_REF(q5_k)
DF_DECLARE_REF(q6_k)
DF_DECLARE_REF(q8_1)
DF_DECLARE_REF(q4_1)
DF_DECLARE_REF(q5_0)
DF_DECLARE_REF(q5_1)
DF_DECLARE_REF(iq4_nl)
DF_DECLARE_REF(iq4_xs)
DF_DECLARE_REF(tq2_0)
#undef DF_DECLARE_REF

// A table indexed by DType id (kDTypeCount rows; rows with block_elems == 0 unused).
// Each installer overwrites the kernels it has and sets the row's isa.
void install_avx2(TypeTraits* table);
void install_avx512(TypeTraits* table);
void install_neon(TypeTraits* table);
// The K-quant halves of install_avx2 / install_avx512 (kquants_avx*.cpp).
void install_kquants_avx2(TypeTraits* table);
void install_kquants_avx512(TypeTraits* table);
// Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, TQ2_0 (legacy_avx2.cpp / legacy_avx512.cpp /
// legacy_neon.cpp), called by types.cpp after the set's main installer.
void install_legacy_avx2(TypeTraits* table);
void install_legacy_avx512(TypeTraits* table);
// IQ4_NL on q32_avx512.cpp's pair kernels (called by install_legacy_avx512).
void install_iq4_nl_avx512(TypeTraits* table);
void install_legacy_neon(TypeTraits* table);
// The row-panel kernels (panels.h) of panels_avx2.cpp, panels_avx512.cpp and
// panels_neon.cpp.
void install_panels_avx2(TypeTraits* table);
void install_panels_avx512(TypeTraits* table);
void install_panels_neon(TypeTraits* table);
void install_panels_neon_sdot(TypeTraits* table);
void install_panels_q4k_neon(TypeTraits* table);
void install_panels_q4k_neon_sdot(TypeTraits* table);
// The NEON sets: the *_neon.cpp installers, built plain and (suffix _sdot) with the
// dot-product extension (neon_common.h); install_neon_all (neon_install.cpp) runs one
// build's installers, the _sdot ones if `sdot`.
void install_neon_sdot(TypeTraits* table);
void install_legacy_neon_sdot(TypeTraits* table);
void install_kquants_neon(TypeTraits* table);
void install_kquants_neon_sdot(TypeTraits* table);
void install_iq_neon(TypeTraits* table);
void install_iq_neon_sdot(TypeTraits* table);
void install_neon_all(TypeTraits* table, bool sdot);

// Sets a row's forms over activation rows prepared once per matrix (types.h prep,
// vec_dot_tile, vec_dot_prep); null clears what a lower set's installer left.
inline void set_prepared(TypeTraits& r, PrepBytesFn bytes, PrepFn prep, VecDotTileFn tile, VecDotFn dot,
                         VecDotR4Fn dot_r4) {
  r.prep_bytes = bytes;
  r.prep = prep;
  r.vec_dot_tile = tile;
  r.vec_dot_prep = dot;
  r.vec_dot_prep_r4 = dot_r4;
}

// Helper for rows without a dedicated x4 kernel.
template <VecDotFn F>
void vec_dot_x4_by_one(int64_t n, float* out, const void* w, const void* const* x) {
  for (int k = 0; k < 4; ++k) F(n, out + k, w, x[k]);
}

}  // namespace deltafin::kern
