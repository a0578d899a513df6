// Row-tiled driver over the traits kernels: vec_dot for single tokens, vec_dot_x4 and
// vec_dot_x8 for groups of four and eight (the weight row is unpacked once per group).
#include "kernels/matmul.h"

#include <algorithm>
#include <cassert>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/types.h"

namespace deltafin {
namespace {

const TypeTraits& traits_or_die(DType t) {
  const TypeTraits* tt = type_traits(t);
  assert(tt != nullptr && "matmul: weight type has no kernels");
  return *tt;
}

// Rows per tile of the batched path (about 64 KiB of weights).
int64_t tile_rows(int64_t row_bytes) { return std::clamp<int64_t>((64 << 10) / std::max<int64_t>(1, row_bytes), 4, 256); }

}  // namespace

DType acts_type_for(DType wtype) { return traits_or_die(wtype).vec_dot_type; }

void quantize_acts(ThreadPool* pool, DType wtype, const float* X, int64_t n_tok, int64_t cols,
                   int64_t x_stride, QuantizedActs* out) {
  const TypeTraits& at = traits_or_die(acts_type_for(wtype));
  assert(cols % at.block_elems == 0);
  out->type = at.type;
  out->cols = cols;
  out->n_tok = n_tok;
  out->row_bytes = size_t(dtype_row_bytes(at.type, uint64_t(cols)));
  out->data.resize(out->row_bytes * size_t(n_tok));
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) at.from_float(X + t * x_stride, out->data.data() + size_t(t) * out->row_bytes, cols);
  };
  if (pool != nullptr && n_tok > 1) pool->parallel_for(n_tok, 1, body);
  else body(0, n_tok);
  // Decode: the one row prepared once here for every matrix product that reads it
  // (the experts of a layer share their activation row).
  const TypeTraits& wt = traits_or_die(wtype);
  out->prepared.clear();
  if (n_tok == 1 && wt.vec_dot_prep != nullptr && wt.prep != nullptr) {
    out->prep_for = wtype;
    out->prepared.resize(wt.prep_bytes(cols));
    wt.prep(cols, out->prepared.data(), out->data.data());
  }
}

namespace {

// Up to this many activation row pointers live on the stack.
constexpr int64_t kStackRows = 64;

// Rows [r_begin, r_end) against one activation row: four weight rows per call where
// the type has a vec_dot_r4 kernel that this CPU runs faster (decode_r4; bit-identical
// to vec_dot per row).
void rows_one(const TypeTraits& tt, const uint8_t* w, size_t wrow, int64_t cols, int64_t r_begin, int64_t r_end,
              const void* x, float* y, const void* xp = nullptr) {
  int64_t r = r_begin;
  if (xp != nullptr) {  // x prepared (vec_dot_prep): the same bits
    if (tt.vec_dot_prep_r4 != nullptr && tt.decode_r4)
      for (; r + 4 <= r_end; r += 4) tt.vec_dot_prep_r4(cols, y + r, w + size_t(r) * wrow, wrow, xp);
    for (; r < r_end; ++r) tt.vec_dot_prep(cols, y + r, w + size_t(r) * wrow, xp);
    return;
  }
  if (tt.vec_dot_r4 != nullptr && tt.decode_r4)
    for (; r + 4 <= r_end; r += 4) tt.vec_dot_r4(cols, y + r, w + size_t(r) * wrow, wrow, x);
  for (; r < r_end; ++r) tt.vec_dot(cols, y + r, w + size_t(r) * wrow, x);
}

// The kernel loop over rows [r0, r1) for the activation rows x[0..n): a tile of rows
// (about 64 KiB of weights) stays in L2 while every group of tokens passes over
// it, so each weight byte comes from memory once per call.
void rows_kernel(const TypeTraits& tt, const uint8_t* w, size_t wrow, int64_t cols, int64_t r_begin, int64_t r_end,
                 const void* const* x, int64_t n, float* Y, int64_t y_stride, const void* xp1 = nullptr) {
  if (n == 1) {
    rows_one(tt, w, wrow, cols, r_begin, r_end, x[0], Y, xp1);
    return;
  }
  const int64_t R = tile_rows(int64_t(wrow));
  // Padded groups repeat their last real row; only the real rows' results are kept.
  auto group = [&](VecDotX4Fn f, int width, int64_t t, int64_t real, int64_t r0, int64_t r1) {
    const void* xs[8];
    for (int k = 0; k < width; ++k) xs[k] = x[t + std::min<int64_t>(k, real - 1)];
    for (int64_t r = r0; r < r1; ++r) {
      float o[8];
      f(cols, o, w + size_t(r) * wrow, xs);
      for (int64_t k = 0; k < real; ++k) Y[(t + k) * y_stride + r] = o[k];
    }
  };
  for (int64_t r0 = r_begin; r0 < r_end; r0 += R) {
    const int64_t r1 = std::min(r_end, r0 + R);
    int64_t t = 0;
    if (tt.vec_dot_x8 != nullptr) {
      // Unpacking dominates (types.h): eight tokens per unpacked row, five to seven
      // left over padded to eight, two to four to four; one alone below.
      for (int64_t real; (real = std::min<int64_t>(8, n - t)) >= 5; t += real) group(tt.vec_dot_x8, 8, t, real, r0, r1);
      if (n - t >= 2) {
        group(tt.vec_dot_x4, 4, t, n - t, r0, r1);
        t = n;
      }
    } else {
      for (; t + 4 <= n; t += 4) group(tt.vec_dot_x4, 4, t, 4, r0, r1);
      if (n - t == 3) {  // a padded x4 call is cheaper than three single rows
        group(tt.vec_dot_x4, 4, t, 3, r0, r1);
        t += 3;
      }
    }
    for (; t < n; ++t) rows_one(tt, w, wrow, cols, r0, r1, x[t], Y + t * y_stride);
  }
}

// The rows [r_begin, r_end) of a batch (n >= 2) in the type's gemm order: four
// activation rows per call (the last group padded by repeating its last row).
void rows_gemm(const TypeTraits& tt, const uint8_t* w, size_t wrow, int64_t cols, int64_t r_begin, int64_t r_end,
               const void* const* x, int64_t n, float* Y, int64_t y_stride) {
  const int64_t R = tile_rows(int64_t(wrow));
  for (int64_t r0 = r_begin; r0 < r_end; r0 += R) {
    const int64_t r1 = std::min(r_end, r0 + R);
    for (int64_t t = 0; t < n; t += 4) {
      const int64_t k_n = std::min<int64_t>(4, n - t);
      const void* xs[4];
      for (int64_t k = 0; k < 4; ++k) xs[k] = x[t + std::min(k, k_n - 1)];
      for (int64_t r = r0; r < r1; ++r) {
        float o[4];
        tt.vec_dot_gemm_x4(cols, o, w + size_t(r) * wrow, xs);
        for (int64_t k = 0; k < k_n; ++k) Y[(t + k) * y_stride + r] = o[k];
      }
    }
  }
}

// The tile path (types.h vec_dot_tile): four rows by four prepared activation rows
// per call over a tile of rows (a multiple of four) that stays in L2; a last group of
// three tokens is padded, one or two left over go through rows_one, and so do the
// last rows of a matrix whose row count is not a multiple of four (x4 kernels).
void rows_tile(const TypeTraits& tt, const uint8_t* w, size_t wrow, int64_t cols, int64_t r_begin, int64_t r_end,
               const void* const* x, const void* const* xp, int64_t n, float* Y, int64_t y_stride) {
  const int64_t R = tile_rows(int64_t(wrow)) & ~int64_t(3);
  for (int64_t r0 = r_begin; r0 < r_end; r0 += R) {
    const int64_t r1 = std::min(r_end, r0 + R), r4 = r0 + ((r1 - r0) & ~int64_t(3));
    int64_t t = 0;
    for (; n - t >= 3; t += 4) {
      const int64_t real = std::min<int64_t>(4, n - t);
      const void* ps[4];
      const void* xs[4];
      for (int64_t k = 0; k < 4; ++k) {
        ps[k] = xp[t + std::min(k, real - 1)];
        xs[k] = x[t + std::min(k, real - 1)];
      }
      for (int64_t r = r0; r < r4; r += 4) {
        float o[16];
        tt.vec_dot_tile(cols, o, w + size_t(r) * wrow, wrow, ps);
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t k = 0; k < real; ++k) Y[(t + k) * y_stride + r + i] = o[4 * i + k];
      }
      for (int64_t r = r4; r < r1; ++r) {
        float o[4];
        tt.vec_dot_x4(cols, o, w + size_t(r) * wrow, xs);
        for (int64_t k = 0; k < real; ++k) Y[(t + k) * y_stride + r] = o[k];
      }
    }
    // Already prepared, a token left over takes the prepared decode kernels (the same
    // bits as vec_dot) where the type has them.
    const bool prepared = tt.prep != nullptr && tt.vec_dot_prep != nullptr;
    for (; t < n; ++t) rows_one(tt, w, wrow, cols, r0, r1, x[t], Y + t * y_stride, prepared ? xp[t] : nullptr);
  }
}

// The tile path over a batch: tokens prepared (types.h prep) in chunks of at most
// kTileChunk, each chunk then passing over every row. The buffer lives for the call
// only, so a long prompt leaves no scratch behind that the memory plan does not count
// (tests/unit/test_state_memory.cpp); per chunk the weights are read once more, which
// 256 tokens of multiply-adds per weight byte hide. A type without prep reads its
// activation rows as they are.
constexpr int64_t kTileChunk = 256;
void run_tiles(ThreadPool* pool, const TypeTraits& tt, const uint8_t* w, size_t wrow, int64_t rows, int64_t cols,
               const void* const* x, int64_t n, float* Y, int64_t y_stride) {
  const size_t bytes = tt.prep != nullptr ? tt.prep_bytes(cols) : 0;
  const int64_t chunk = std::min(n, kTileChunk);
  std::unique_ptr<uint8_t[]> buf(bytes > 0 ? new uint8_t[bytes * size_t(chunk)] : nullptr);
  const void* prepared[kTileChunk];
  const int64_t grain = tile_rows(int64_t(wrow)) & ~int64_t(3);
  const bool threaded = pool != nullptr && pool->size() > 1;
  for (int64_t t0 = 0; t0 < n; t0 += chunk) {
    const int64_t m = std::min(chunk, n - t0);
    const void* const* xp = x + t0;
    if (tt.prep != nullptr) {
      auto prep = [&](int64_t a, int64_t b) {
        for (int64_t t = a; t < b; ++t) tt.prep(cols, buf.get() + size_t(t) * bytes, x[t0 + t]);
      };
      if (threaded && m >= 16) pool->parallel_for(m, 8, prep);
      else prep(0, m);
      for (int64_t t = 0; t < m; ++t) prepared[t] = buf.get() + size_t(t) * bytes;
      xp = prepared;
    }
    float* Yc = Y + t0 * y_stride;
    if (!threaded) {
      rows_tile(tt, w, wrow, cols, 0, rows, x + t0, xp, m, Yc, y_stride);
      continue;
    }
    pool->parallel_for((rows + grain - 1) / grain, 1, [&](int64_t b, int64_t e) {
      rows_tile(tt, w, wrow, cols, b * grain, std::min(rows, e * grain), x + t0, xp, m, Yc, y_stride);
    });
  }
}

// The activation's one row as prepared for wtype's vec_dot_prep (QuantizedActs), or
// null: when the product reads exactly that row.
const void* prepared_one(const QuantizedActs& acts, DType wtype, int64_t n) {
  if (n != 1 || acts.n_tok != 1 || acts.prep_for != wtype || acts.prepared.empty()) return nullptr;
  return acts.prepared.data();
}

// Pointers to the selected activation rows (stack storage for small batches).
struct RowPtrs {
  const void* small[kStackRows];
  std::vector<const void*> big;
  const void* const* p;
  RowPtrs(const QuantizedActs& acts, const int32_t* tokens, int64_t n) {
    const void** dst = small;
    if (n > kStackRows) {
      big.resize(size_t(n));
      dst = big.data();
    }
    for (int64_t i = 0; i < n; ++i) {
      int64_t t = tokens != nullptr ? tokens[i] : i;
      assert(t >= 0 && t < acts.n_tok);
      dst[i] = acts.row(t);
    }
    p = dst;
  }
};

void run(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols, const QuantizedActs& acts,
         const int32_t* tokens, int64_t n, float* Y, int64_t y_stride, bool mul_mat = false,
         bool f32_gemm = false) {
  const TypeTraits& tt = traits_or_die(wtype);
  assert(acts.type == tt.vec_dot_type && acts.cols == cols);
  if (n <= 0 || rows <= 0) return;
  RowPtrs x(acts, tokens, n);
  const auto* w = static_cast<const uint8_t*>(W);
  const size_t wrow = size_t(dtype_row_bytes(wtype, uint64_t(cols)));
  // ggml's mul_mat hands batches to tinyBLAS where it takes them (types.h).
  const bool gemm = mul_mat && (wtype != DType::F32 || f32_gemm) && n >= 2 && tt.vec_dot_gemm_x4 != nullptr &&
                    cols % tt.gemm_k == 0 && rows % 4 == 0;
  if (!gemm && n >= 4 && rows >= 4 && tt.vec_dot_tile != nullptr) {
    run_tiles(pool, tt, w, wrow, rows, cols, x.p, n, Y, y_stride);
    return;
  }
  const void* xp1 = prepared_one(acts, wtype, n);
  auto kernel = [&](int64_t r0, int64_t r1) {
    if (gemm) rows_gemm(tt, w, wrow, cols, r0, r1, x.p, n, Y, y_stride);
    else rows_kernel(tt, w, wrow, cols, r0, r1, x.p, n, Y, y_stride, xp1);
  };
  if (pool == nullptr || pool->size() == 1) {
    kernel(0, rows);
    return;
  }
  // Whole tiles per task; at least 16 rows so decode tasks are not tiny.
  const int64_t grain = n == 1 ? 16 : tile_rows(int64_t(wrow));
  const int64_t n_tasks = (rows + grain - 1) / grain;
  pool->parallel_for(n_tasks, 1, [&](int64_t b, int64_t e) { kernel(b * grain, std::min(rows, e * grain)); });
}

}  // namespace

void matmul_q(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols,
              const QuantizedActs& acts, float* Y, int64_t y_stride, bool mul_mat, bool f32_gemm) {
  run(pool, wtype, W, rows, cols, acts, nullptr, acts.n_tok, Y, y_stride, mul_mat, f32_gemm);
}

void matmul_q_tokens(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols,
                     const QuantizedActs& acts, const int32_t* tokens, int64_t n_tokens, float* Y,
                     int64_t y_stride) {
  run(pool, wtype, W, rows, cols, acts, tokens, n_tokens, Y, y_stride);
}

void matmul_q_rows(DType wtype, const void* W, int64_t cols, int64_t row_begin, int64_t row_end,
                   const QuantizedActs& acts, const int32_t* tokens, int64_t n_tokens, float* Y,
                   int64_t y_stride) {
  const TypeTraits& tt = traits_or_die(wtype);
  assert(acts.type == tt.vec_dot_type && acts.cols == cols);
  const int64_t n = tokens != nullptr ? n_tokens : acts.n_tok;
  if (n <= 0 || row_end <= row_begin) return;
  RowPtrs x(acts, tokens, n);
  rows_kernel(tt, static_cast<const uint8_t*>(W), size_t(dtype_row_bytes(wtype, uint64_t(cols))), cols, row_begin,
              row_end, x.p, n, Y, y_stride, prepared_one(acts, wtype, n));
}

void matvec(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols, const float* x,
            float* y) {
  QuantizedActs acts;
  quantize_acts(nullptr, wtype, x, 1, cols, cols, &acts);
  matmul_q(pool, wtype, W, rows, cols, acts, y, rows);
}

void matmul(ThreadPool* pool, DType wtype, const void* W, int64_t rows, int64_t cols, const float* X,
            int64_t n_tok, int64_t x_stride, float* Y, int64_t y_stride, bool mul_mat, bool f32_gemm) {
  QuantizedActs acts;
  quantize_acts(pool, wtype, X, n_tok, cols, x_stride, &acts);
  matmul_q(pool, wtype, W, rows, cols, acts, Y, y_stride, mul_mat, f32_gemm);
}

}  // namespace deltafin
