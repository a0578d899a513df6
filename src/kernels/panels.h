// Weights in row panels: a matrix's rows in groups of eight whose blocks are
// interleaved (block i of the eight rows together, then block i + 1), so that one
// vector multiply takes four values of each of the eight rows against four values of
// a token broadcast to every lane, and each row's integer sum of a block lands in a
// lane of its own. A block then costs one float step for eight rows instead of one
// per row (llama.cpp's CPU backend repacks Q4_0, IQ4_NL and Q4_K likewise at load).
// Q4_K's panels also let one multiply by a sub-block's scale serve 32 values of eight
// rows, where the row kernels multiply per row and 32 values.
//
// Panels exist only in memory: the resident expert store converts the experts at load
// where the selected kernel set has panel kernels for the type, and the streaming
// store's RAM cache converts the experts that prove hot in their slots. Files, the disk
// cache and freshly read slots keep GGUF's row order, which the panel kernels also
// read (eight rows at a time, their lane sums folded into one vector per block) with
// the same bits, so an expert's results do not depend on where its bytes came from,
// and a read costs no conversion.
//
// Bits: per row and token, each block's dot product as an exact integer, then
// acc = fma(d_w * d_x, float(isum), acc) block after block; Q4_K per super-block the
// scaled sub-block sums and the mins' sum as two exact integers, then that step and
// acc = fma(-(dmin_w * d_x), float(msum), acc). The scalar reference here computes
// exactly that, so the SIMD panel kernels (types.h panel_dot) agree with it and with
// each other bit for bit at any batch size; against the row kernels of the same type
// they differ in the last bits of a sum (another order).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace deltafin {

class ThreadPool;

// Rows per panel.
constexpr int64_t kPanelRows = 8;

// Whether a `rows` x `cols` matrix of `type` is kept in panels under the selected
// kernel set: it has panel kernels for the type and rows is a multiple of kPanelRows.
bool panels_wanted(DType type, int64_t rows, int64_t cols);

// Rewrites a row-major matrix (rows % kPanelRows == 0, GGUF's bytes) as panels, in
// place; the size is unchanged. Only for types with panel kernels in some set.
void to_panels(DType type, void* data, int64_t rows, int64_t cols);

// Y[t * y_stride + r] = dot(W row r, X row t) in the panel kernels' bits, for W in
// panels (in_panels: to_panels' bytes) or in the file's row order (then the selected
// set must have panel kernels for the type: panels_wanted). X is n_tok rows of cols
// floats, x_stride apart. Panels take the selected set's kernels, or the scalar
// reference (the same bits) where it has none.
void matmul_panels(ThreadPool* pool, DType type, const void* W, int64_t rows, int64_t cols, const float* X,
                   int64_t n_tok, int64_t x_stride, float* Y, int64_t y_stride, bool in_panels);

// The scalar conversion of one panel: eight rows in the file's order (`row_bytes`
// apart, nb blocks each) -> nb panel blocks at `out` (not overlapping them). The SIMD
// conversions (types.h panel_pack) give the same bytes.
void panel_pack_ref(DType type, const void* rows, size_t row_bytes, int64_t nb, void* out);

// The scalar reference of one panel (kPanelRows rows starting at `w`) against n_x
// activation rows of the type's vec_dot_type: out[t * kPanelRows + r].
void panel_dot_ref(DType type, int64_t cols, float* out, const void* w, const void* const* x, int n_x);

}  // namespace deltafin
