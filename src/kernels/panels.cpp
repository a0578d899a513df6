// Row panels (panels.h): the conversion from GGUF's row order, the scalar reference
// kernel and the matmul driver over the traits table's panel kernels.
#include "kernels/panels.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/panels_impl.h"
#include "kernels/types.h"

namespace deltafin {

using namespace kern;

namespace {

// The level table of a type kept in panels; null for the others.
const int8_t* q4_levels(DType type) {
  switch (type) {
    case DType::Q4_0: return kQ4_0Levels;
    case DType::IQ4_NL: return kIq4nlValues;
    case DType::MXFP4: return kMxfp4Values;
    default: return nullptr;
  }
}

// Whether the type has a panel layout here (and so maybe panel kernels in some set).
[[maybe_unused]] bool has_panel_layout(DType type) {  // asserts only
  return type == DType::Q8_0 || type == DType::Q4_K || type == DType::Q5_K || q4_levels(type) != nullptr;
}

// Eight rows (`row_bytes` apart, nb blocks each) -> nb panel blocks. Block: Q4_0's,
// IQ4_NL's or MXFP4's (a scale, then 16 bytes of nibbles: codes 0..15 low, 16..31
// high). Four bytes at a time: piece k's word of a row holds codes 8k..8k+3 below
// codes 8k+4..8k+7, that is the low (k < 2) or high (k >= 2) nibbles of bytes
// 8(k % 2)..+3 and 8(k % 2)+4..+7.
template <class Block, class Scale>
void pack_q4x8(const uint8_t* rows, size_t row_bytes, int64_t nb, PanelQ4x8T<Scale>* out) {
  static_assert(sizeof(Block) == sizeof(Scale) + 16);
  constexpr uint32_t kLo = 0x0f0f0f0fu;
  for (int64_t i = 0; i < nb; ++i) {
    PanelQ4x8T<Scale>& p = out[i];
    for (int r = 0; r < 8; ++r) {
      const uint8_t* b = rows + size_t(r) * row_bytes + size_t(i) * sizeof(Block);
      std::memcpy(&p.d[r], b, sizeof(Scale));
      uint32_t q[4];
      std::memcpy(q, b + sizeof(Scale), 16);
      const uint32_t piece[4] = {(q[0] & kLo) | (q[1] & kLo) << 4, (q[2] & kLo) | (q[3] & kLo) << 4,
                                 (q[0] >> 4 & kLo) | (q[1] & ~kLo), (q[2] >> 4 & kLo) | (q[3] & ~kLo)};
      for (int k = 0; k < 4; ++k) std::memcpy(p.qs + 32 * k + 4 * r, &piece[k], 4);
    }
  }
}

// The reference over one panel: `value(i, r, e)` is row r's value e (e < 32) of block
// i as an integer, `scale(i, r)` its block scale.
template <class Value, class ScaleOf>
void panel_ref(int64_t cols, float* out, const void* const* x, int n_x, Value value, ScaleOf scale) {
  const int64_t nb = cols / kQ32;
  for (int t = 0; t < n_x; ++t) {
    const auto* b = static_cast<const BlockQ8_0*>(x[t]);
    for (int r = 0; r < 8; ++r) {
      float acc = 0.0f;
      for (int64_t i = 0; i < nb; ++i) {
        int isum = 0;
        for (int e = 0; e < 32; ++e) isum += value(i, r, e) * b[i].qs[e];
        acc = std::fma(scale(i, r) * fp16_to_f32(b[i].d), float(isum), acc);
      }
      out[t * kPanelRows + r] = acc;
    }
  }
}

template <class Scale>
void panel_dot_ref_q4(const int8_t* levels, int64_t cols, float* out, const void* w, const void* const* x, int n_x) {
  const auto* a = static_cast<const PanelQ4x8T<Scale>*>(w);
  // Value e: piece e / 8, low nibble for e % 8 < 4, high for the rest.
  auto value = [&](int64_t i, int r, int e) {
    const int k = e / 8, j = e % 8;
    const uint8_t q = a[i].qs[32 * k + 4 * r + j % 4];
    return int(levels[j < 4 ? q & 15 : q >> 4]);
  };
  panel_ref(cols, out, x, n_x, value, [&](int64_t i, int r) { return panel_scale(a[i].d[r]); });
}

// Q8_0: eight rows -> nb panel blocks (PanelQ8x8).
void pack_q8x8(const uint8_t* rows, size_t row_bytes, int64_t nb, PanelQ8x8* out) {
  for (int64_t i = 0; i < nb; ++i)
    for (int r = 0; r < 8; ++r) {
      BlockQ8_0 b;
      std::memcpy(&b, rows + size_t(r) * row_bytes + size_t(i) * sizeof(b), sizeof(b));
      out[i].d[r] = b.d;
      for (int k = 0; k < 8; ++k) std::memcpy(out[i].qs + 32 * k + 4 * r, b.qs + 4 * k, 4);
    }
}

void panel_dot_ref_q8(int64_t cols, float* out, const void* w, const void* const* x, int n_x) {
  const auto* a = static_cast<const PanelQ8x8*>(w);
  auto value = [&](int64_t i, int r, int e) { return int(a[i].qs[32 * (e / 4) + 4 * r + e % 4]); };
  panel_ref(cols, out, x, n_x, value, [&](int64_t i, int r) { return fp16_to_f32(a[i].d[r]); });
}

// Q4_K (Bits 4) or Q5_K (5): eight rows -> nb panel blocks (PanelQ45Kx8).
template <int Bits>
void pack_q45kx8(const uint8_t* rows, size_t row_bytes, int64_t nb, PanelQ45Kx8<Bits>* out) {
  for (int64_t i = 0; i < nb; ++i) {
    PanelQ45Kx8<Bits>& p = out[i];
    for (int r = 0; r < 8; ++r) {
      BlockQ45K<Bits> b;
      std::memcpy(&b, rows + size_t(r) * row_bytes + size_t(i) * sizeof(b), sizeof(b));
      p.d[r] = b.d;
      p.dmin[r] = b.dmin;
      q45k_panel_put_scales(p, r, b.scales);
      for (int w = 0; w < 32; ++w) std::memcpy(p.qs + 32 * w + 4 * r, b.qs + 4 * w, 4);
      if constexpr (Bits == 5)
        for (int w = 0; w < 8; ++w) std::memcpy(p.qh + 32 * w + 4 * r, b.qh + 4 * w, 4);
    }
  }
}

// Row r's scale and min of sub-block j in a Q4_K / Q5_K panel block.
template <class Panel>
void q45k_panel_scale_min(const Panel& p, int r, int j, int* sc, int* m) {
  const int s = q4k_panel_slot(r, j), up = j < 4 ? 0 : 4, h = p.hi[s];
  *sc = (p.sclo[s] >> up & 15) | (h >> (j < 4 ? 0 : 2) & 3) << 4;
  *m = (p.mlo[s] >> up & 15) | (h >> (j < 4 ? 4 : 6) & 3) << 4;
}

// Q4_K's and Q5_K's bits (panels.h), over activation rows of Q8_K: per super-block the
// exact integers sum_j sc_j * (codes . y) and sum_j m_j * (sum of y over sub-block j),
// then acc = fma(d * d_x, isum, acc) and acc = fma(-(dmin * d_x), msum, acc).
template <int Bits>
void panel_dot_ref_q45k(int64_t cols, float* out, const void* w, const void* const* x, int n_x) {
  const auto* a = static_cast<const PanelQ45Kx8<Bits>*>(w);
  const int64_t nb = cols / kQK;
  for (int t = 0; t < n_x; ++t) {
    const auto* b = static_cast<const BlockQ8_K*>(x[t]);
    for (int r = 0; r < 8; ++r) {
      float acc = 0.0f;
      for (int64_t i = 0; i < nb; ++i) {
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          int sc, m, part = 0;
          q45k_panel_scale_min(a[i], r, j, &sc, &m);
          for (int e = 0; e < 32; ++e) {
            const int piece = 32 * (e / 4) + 4 * r + e % 4;
            const uint8_t q = a[i].qs[256 * (j / 2) + piece];
            int code = j % 2 == 0 ? q & 15 : q >> 4;
            if constexpr (Bits == 5) code |= (a[i].qh[piece] >> j & 1) << 4;
            part += code * b[i].qs[32 * j + e];
          }
          isum += sc * part;
          msum += m * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        }
        const float dx = b[i].d;
        acc = std::fma(fp16_to_f32(a[i].d[r]) * dx, float(isum), acc);
        acc = std::fma(-(fp16_to_f32(a[i].dmin[r]) * dx), float(msum), acc);
      }
      out[t * kPanelRows + r] = acc;
    }
  }
}

// Panels of rows[0 .. n_panels * 8) (`row_bytes` apart, the file's order) written to
// dst, which must not overlap them: the selected set's conversion, or the scalar one.
void pack_panels(DType type, const uint8_t* rows, size_t row_bytes, int64_t n_panels, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / int64_t(block_geometry(type).block_elems);
  const size_t panel_bytes = row_bytes * kPanelRows;
  const TypeTraits* tt = type_traits(type);
  const PanelPackFn pack = tt != nullptr ? tt->panel_pack : nullptr;
  for (int64_t g = 0; g < n_panels; ++g) {
    const uint8_t* src = rows + size_t(g) * panel_bytes;
    uint8_t* out = dst + size_t(g) * panel_bytes;
    if (pack != nullptr) pack(src, row_bytes, nb, out);
    else panel_pack_ref(type, src, row_bytes, nb, out);
  }
}

// Rows per tile of the batched loop: about 64 KiB of weights stay in L2 while every
// group of four tokens passes over them.
int64_t tile_panels(size_t panel_bytes) {
  return std::max<int64_t>(1, int64_t((64 << 10) / std::max<size_t>(1, panel_bytes)));
}

}  // namespace

void panel_pack_ref(DType type, const void* rows, size_t row_bytes, int64_t nb, void* out) {
  assert(has_panel_layout(type));
  const auto* src = static_cast<const uint8_t*>(rows);
  if (type == DType::Q4_K) pack_q45kx8<4>(src, row_bytes, nb, static_cast<PanelQ4Kx8*>(out));
  else if (type == DType::Q5_K) pack_q45kx8<5>(src, row_bytes, nb, static_cast<PanelQ5Kx8*>(out));
  else if (type == DType::Q8_0) pack_q8x8(src, row_bytes, nb, static_cast<PanelQ8x8*>(out));
  else if (type == DType::MXFP4) pack_q4x8<BlockMXFP4>(src, row_bytes, nb, static_cast<PanelMXx8*>(out));
  else pack_q4x8<BlockQ4_0>(src, row_bytes, nb, static_cast<PanelQ4x8*>(out));
}

bool panels_wanted(DType type, int64_t rows, int64_t cols) {
  const TypeTraits* tt = type_traits(type);
  return tt != nullptr && tt->panel_dot != nullptr && tt->panel_dot_x4 != nullptr && tt->panel_rows != nullptr &&
         tt->panel_rows_x4 != nullptr && rows % kPanelRows == 0 && cols % tt->block_elems == 0;
}

void to_panels(DType type, void* data, int64_t rows, int64_t cols) {
  assert(has_panel_layout(type) && rows % kPanelRows == 0 && cols % block_geometry(type).block_elems == 0);
  const size_t row_bytes = size_t(dtype_row_bytes(type, uint64_t(cols)));
  std::vector<uint8_t> group(row_bytes * kPanelRows);  // a panel's rows, while its bytes are rewritten
  auto* p = static_cast<uint8_t*>(data);
  for (int64_t g = 0; g < rows / kPanelRows; ++g, p += group.size()) {
    std::memcpy(group.data(), p, group.size());
    pack_panels(type, group.data(), row_bytes, 1, cols, p);
  }
}

void panel_dot_ref(DType type, int64_t cols, float* out, const void* w, const void* const* x, int n_x) {
  if (type == DType::Q8_0) return panel_dot_ref_q8(cols, out, w, x, n_x);
  if (type == DType::Q4_K) return panel_dot_ref_q45k<4>(cols, out, w, x, n_x);
  if (type == DType::Q5_K) return panel_dot_ref_q45k<5>(cols, out, w, x, n_x);
  const int8_t* levels = q4_levels(type);
  assert(levels != nullptr);
  if (type == DType::MXFP4) panel_dot_ref_q4<uint8_t>(levels, cols, out, w, x, n_x);
  else panel_dot_ref_q4<uint16_t>(levels, cols, out, w, x, n_x);
}

void matmul_panels(ThreadPool* pool, DType type, const void* W, int64_t rows, int64_t cols, const float* X,
                   int64_t n_tok, int64_t x_stride, float* Y, int64_t y_stride, bool in_panels) {
  const TypeTraits& tt = *type_traits(type);
  const TypeTraits& at = *type_traits(tt.vec_dot_type);
  assert(rows % kPanelRows == 0 && cols % at.block_elems == 0);
  if (n_tok <= 0 || rows <= 0) return;
  const size_t row_bytes = size_t(dtype_row_bytes(type, uint64_t(cols))), panel_bytes = row_bytes * kPanelRows;
  const auto* w = static_cast<const uint8_t*>(W);
  const bool simd = tt.panel_dot != nullptr && tt.panel_dot_x4 != nullptr;
  assert(in_panels || (tt.panel_rows != nullptr && tt.panel_rows_x4 != nullptr));
  // The activation rows as the vec_dot_type (Q8_0), then as the kernels read them
  // (panel_prep), or as they are for the reference.
  const size_t qrow = size_t(dtype_row_bytes(at.type, uint64_t(cols)));
  const bool prep = simd || !in_panels;
  assert(!prep || tt.panel_prep != nullptr);
  const size_t xrow = prep ? tt.panel_prep_bytes(cols) : qrow;
  std::vector<uint8_t> xq(xrow * size_t(n_tok));
  auto quantize = [&](int64_t a, int64_t b) {
    std::vector<uint8_t> q(prep ? qrow : 0);
    for (int64_t t = a; t < b; ++t) {
      uint8_t* dst = xq.data() + size_t(t) * xrow;
      at.from_float(X + t * x_stride, prep ? q.data() : dst, cols);
      if (prep) tt.panel_prep(cols, dst, q.data());
    }
  };
  const bool threaded = pool != nullptr && pool->size() > 1;
  if (threaded && n_tok >= 16) pool->parallel_for(n_tok, 8, quantize);
  else quantize(0, n_tok);

  // Panels [g0, g1): per tile of panels, every group of four tokens (the last padded
  // by repeating its last row; a single token alone), then the next tile. Rows in the
  // file's order are converted a tile at a time where four tokens or more pass over
  // them (the conversion costs less than the row kernels' extra work per token), and
  // read as they are otherwise: the same bits either way.
  const bool convert = !in_panels && n_tok >= 4;
  auto body = [&](int64_t g0, int64_t g1) {
    const int64_t G = tile_panels(panel_bytes);
    std::vector<uint8_t> tile(convert ? size_t(G) * panel_bytes : 0);
    for (int64_t ga = g0; ga < g1; ga += G) {
      const int64_t gb = std::min(g1, ga + G);
      const uint8_t* base = w;
      if (convert) {
        pack_panels(type, w + size_t(ga) * panel_bytes, row_bytes, gb - ga, cols, tile.data());
        base = tile.data() - size_t(ga) * panel_bytes;
      }
      for (int64_t t = 0; t < n_tok; t += 4) {
        const int64_t real = std::min<int64_t>(4, n_tok - t);
        const void* xs[4];
        for (int64_t k = 0; k < 4; ++k) xs[k] = xq.data() + size_t(t + std::min(k, real - 1)) * xrow;
        for (int64_t g = ga; g < gb; ++g) {
          float o[4 * kPanelRows];
          const uint8_t* p = base + size_t(g) * panel_bytes;
          if (!in_panels && !convert) {
            for (int64_t r = 0; r < kPanelRows; ++r) {
              float y[4];
              if (real == 1) tt.panel_rows(cols, y, p + size_t(r) * row_bytes, xs[0]);
              else tt.panel_rows_x4(cols, y, p + size_t(r) * row_bytes, xs);
              for (int64_t k = 0; k < real; ++k) o[k * kPanelRows + r] = y[k];
            }
          } else if (!simd) {
            panel_dot_ref(type, cols, o, p, xs, int(real));
          } else if (real == 1) {
            tt.panel_dot(cols, o, p, xs[0]);
          } else {
            tt.panel_dot_x4(cols, o, p, xs);
          }
          for (int64_t k = 0; k < real; ++k)
            std::copy_n(o + k * kPanelRows, kPanelRows, Y + (t + k) * y_stride + g * kPanelRows);
        }
      }
    }
  };
  const int64_t n_panels = rows / kPanelRows;
  if (!threaded) {
    body(0, n_panels);
    return;
  }
  // Decode: two panels (16 rows) per task at least; batches: whole tiles.
  const int64_t grain = n_tok == 1 ? 2 : tile_panels(panel_bytes);
  pool->parallel_for((n_panels + grain - 1) / grain, 1,
                     [&](int64_t b, int64_t e) { body(b * grain, std::min(n_panels, e * grain)); });
}

}  // namespace deltafin
