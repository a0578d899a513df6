// The type-traits table: one row per tensor element type that deltafin computes
// with, holding the block geometry, conversions and the dot-product kernel.
//
// vec_dot(n, out, w, x): *out = dot(w, x) over n values, where w is a row of `type`
// and x a row of `vec_dot_type` (the type activations are quantized to before a
// matmul, as ggml's CPU backend does: Q8_0 for Q4_0/Q5_0/Q8_0/MXFP4/IQ4_NL, Q8_1
// for Q4_1/Q5_1, Q8_K for the K-quants, IQ4_XS and TQ2_0, F16 for F16, BF16 for
// BF16, F32 for F32). n must be a multiple of the block size of both types. Results
// match ggml's up to float summation order.
//
// vec_dot_x4(n, out, w, x): out[k] = dot(w, x[k]) for k < 4, one weight row against
// four activation rows anywhere in memory (the batched matmul's inner kernel; the
// weight is unpacked once for all four). Never null: rows without a dedicated kernel
// call vec_dot four times.
//
// vec_dot_x8(n, out, w, x): as vec_dot_x4 for eight activation rows, bit-identical to
// vec_dot for each. Set only where unpacking the weights costs more than a token's
// multiply-adds (the codebook i-quants and IQ4_XS, AVX-512 and AVX2), so that eight tokens
// per unpacked row beat two groups of four; null elsewhere. Where it is set the batched matmul also pads a
// remainder of two or three tokens into one x4 call rather than calling vec_dot for each.
//
// vec_dot_r4(n, out, w, w_stride, x): out[k] = dot(w + k * w_stride, x) for k < 4,
// four weight rows against one activation row (the decode matvec's inner kernel: the
// activation row and its scales are loaded once for four rows, and four independent
// accumulator chains hide the FMA latency that bounds a single row). Each row's
// result is bit-identical to vec_dot of that row. May be null: callers then call
// vec_dot four times. An installer that sets vec_dot must set vec_dot_r4 with it (or
// null), never leave a lower instruction set's r4 beside its own vec_dot.
//
// vec_dot_gemm_x4(n, out, w, x): as vec_dot_x4, in the summation order of the GEMM
// that ggml's CPU backend (llamafile's tinyBLAS) runs for a mul_mat of two or more
// activation rows when n % gemm_k == 0 and the matrix has a multiple of 4 rows; its
// vec_dot covers the other cases (one row, and mul_mat_id). Only where the activations
// are rounded after such a sum (F16), so that the rounding steps downstream see the
// same sums as llama.cpp's; null elsewhere.
//
// prep(n, dst, x), prep_bytes(n), vec_dot_tile(n, out, w, w_stride, xp): batches over
// activation rows prepared once per matrix. prep writes a vec_dot_type row of n values
// as the tile kernel reads it (prep_bytes(n) bytes); vec_dot_tile computes
// out[4 * r + t] = dot(w + r * w_stride, x_t) for four weight rows and four prepared
// rows, each bit-identical to vec_dot. Set where the per-token work of vec_dot_x4
// costs as much as the multiply-adds (AVX-512 Q8_0, Q4_0, IQ4_NL, MXFP4, BF16; AVX2
// Q4_0, MXFP4, and Q4_K, Q5_K, whose prepared rows carry the activation's bsum pairs);
// null elsewhere. prep and prep_bytes are null where the tile kernel
// reads the activation rows as they are (BF16).
//
// vec_dot_prep(n, out, w, xp), vec_dot_prep_r4(n, out, w, w_stride, xp): decode (one
// activation row) over that row prepared once per matrix by prep: vec_dot's result
// bit for bit, one row or four (decode_r4 picks as for vec_dot_r4). Set where
// prepared rows save per-block work in the decode matvec too (AVX2 Q4_0, MXFP4:
// unsigned weights, no sign moves; AVX2 Q4_K, Q5_K: the bsum pairs); null elsewhere.
//
// panel_dot(n, out, w, x), panel_dot_x4(n, out, w, x): a matrix kept in row panels
// (panels.h: eight rows interleaved block by block) against one or four activation
// rows: out[t * 8 + r] for the panel's eight rows, in the reference's order bit for bit
// (panels.h). panel_rows(n, out, w, x), panel_rows_x4(n, out, w, x): the same bits
// for one row in the file's order against one or four activation rows (out[t]), as
// vec_dot and vec_dot_x4 take it (the experts in a RAM cache slot). All four read
// activation rows of vec_dot_type prepared once per matrix by panel_prep
// (panel_prep_bytes(n) bytes each). Set for Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K and Q5_K
// on x86 (where panels beat the row kernels; the AVX-512 set keeps AVX2's for the
// K-quants) and NEON; null elsewhere, and then routed experts take the row kernels.
//
// panel_pack(rows, row_bytes, nb, out): eight rows in the file's order (row_bytes
// apart, nb blocks each) written as nb panel blocks, the bytes of the scalar
// conversion (panels.h panel_pack_ref); set with the panel kernels where a SIMD form
// exists (x86, NEON), null where the scalar one serves.
//
// from_float is a valid quantizer (round to nearest with simple scale selection, no
// importance matrix); to_float dequantizes. All functions are thread-safe and
// allocate nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace deltafin {

using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);
using VecDotFn = void (*)(int64_t n, float* out, const void* w, const void* x);
using VecDotX4Fn = void (*)(int64_t n, float* out, const void* w, const void* const* x);
using PanelPackFn = void (*)(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out);
using VecDotR4Fn = void (*)(int64_t n, float* out, const void* w, size_t w_stride, const void* x);
using PrepFn = void (*)(int64_t n, void* dst, const void* x);
using PrepBytesFn = size_t (*)(int64_t n);
using VecDotTileFn = void (*)(int64_t n, float* out, const void* w, size_t w_stride, const void* const* xp);

// Instruction sets a kernel can be built for; each table row records the best one
// among its kernels.
enum class Isa : uint8_t { Scalar = 0, AVX2 = 1, AVX512 = 2, NEON = 3 };

struct TypeTraits {
  DType type;
  uint32_t block_elems, block_bytes;
  DType vec_dot_type;
  ToFloatFn to_float;
  FromFloatFn from_float;
  VecDotFn vec_dot;
  VecDotX4Fn vec_dot_x4;
  Isa isa;
  VecDotR4Fn vec_dot_r4 = nullptr;
  // Whether the decode matvec takes vec_dot_r4 (where set) or vec_dot row by row: false
  // for the types whose four interleaved row streams measured slower than one
  // sequential stream on this CPU (types.cpp). Either gives the same bits.
  bool decode_r4 = true;
  VecDotX4Fn vec_dot_gemm_x4 = nullptr;
  uint32_t gemm_k = 0;
  VecDotX4Fn vec_dot_x8 = nullptr;  // eight activation rows (the pointer array holds eight)
  PrepBytesFn prep_bytes = nullptr;
  PrepFn prep = nullptr;
  VecDotTileFn vec_dot_tile = nullptr;
  VecDotFn vec_dot_prep = nullptr;
  VecDotR4Fn vec_dot_prep_r4 = nullptr;
  VecDotFn panel_dot = nullptr;
  VecDotX4Fn panel_dot_x4 = nullptr;
  VecDotFn panel_rows = nullptr;
  VecDotX4Fn panel_rows_x4 = nullptr;
  PrepBytesFn panel_prep_bytes = nullptr;
  PrepFn panel_prep = nullptr;
  PanelPackFn panel_pack = nullptr;
};

// Kernels for the selected instruction set (select_isa; by default the best this CPU
// has); nullptr if `t` has no kernels.
const TypeTraits* type_traits(DType t);
// Scalar reference kernels (the definition of every other row).
const TypeTraits* type_traits_ref(DType t);
// Kernels for one instruction set (rows fall back to the next lower set where that
// set has no kernel of its own); nullptr if the set was not built or this CPU lacks it.
const TypeTraits* type_traits_isa(DType t, Isa isa);

// The types deltafin computes with, comma-separated ("F32, F16, Q4_0, ...").
std::string computed_type_names();

bool isa_supported(Isa isa);
// The best instruction set this CPU runs.
Isa best_isa();
// The set type_traits() uses: best_isa() until select_isa() picks another.
Isa selected_isa();
// Makes type_traits() use `isa` (to measure or check a lesser kernel set); false, and
// nothing changes, if this CPU or build lacks it. Programs call it once at startup
// (deltafin: $DELTAFIN_ISA, tools/environment.cpp), before any kernel runs.
bool select_isa(Isa isa);
const char* isa_name(Isa isa);
// "scalar", "avx2", "avx512", "neon" -> the set; false if unknown.
bool isa_from_name(std::string_view name, Isa* out);

}  // namespace deltafin
