// Scalar reference kernels of the i-quants (layouts and tables in iq_grids.h): the
// definition the SIMD kernels are tested against. Dot products are against Q8_K, as
// ggml pairs them: exact integer sums per group of 32 times the group's odd scale
// 2 ls + 1, one float product per super-block, and the common factor 1/8 at the end.
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/iq_grids.h"
#include "kernels/iq_impl.h"

namespace deltafin::kern {

// ---- IQ2_XXS -------------------------------------------------------------------------

namespace {
// Words 0 and 1 of group ib (layout in iq_grids.h).
inline void iq2xxs_words(const BlockIQ2_XXS& b, int ib, uint32_t* w) { std::memcpy(w, b.qs + 4 * ib, 8); }
}  // namespace

void to_float_iq2_xxs_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_XXS*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t w[2];
      iq2xxs_words(b[i], ib, w);
      const float db = d * (0.5f + float(w[1] >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = kIq2xxsGrid[(w[0] >> (8 * l)) & 255];
        const uint8_t s = kEvenSigns[(w[1] >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j) {
          const float v = db * float((g >> (8 * j)) & 255);
          *dst++ = (s >> j) & 1 ? -v : v;
        }
      }
    }
  }
}

void vec_dot_iq2_xxs_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ2_XXS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int8_t* q8 = y[i].qs;
    int bsum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t aw[2];
      iq2xxs_words(a[i], ib, aw);
      int sumi = 0;
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = kIq2xxsGrid[(aw[0] >> (8 * l)) & 255];
        const uint8_t s = kEvenSigns[(aw[1] >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j, ++q8) {
          const int v = int((g >> (8 * j)) & 255) * *q8;
          sumi += (s >> j) & 1 ? -v : v;
        }
      }
      bsum += sumi * int(2 * (aw[1] >> 28) + 1);
    }
    sum += fp16_to_f32(a[i].d) * y[i].d * float(bsum);
  }
  *out = 0.125f * sum;
}

// ---- IQ2_XS --------------------------------------------------------------------------

void to_float_iq2_xs_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_XS*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int c = 0; c < 32; ++c) {
      const int ls = (b[i].scales[c / 4] >> (4 * ((c / 2) % 2))) & 15;
      const float db = d * (0.5f + float(ls)) * 0.25f;
      const uint64_t g = kIq2xsGrid[b[i].qs[c] & 511];
      const uint8_t s = kEvenSigns[b[i].qs[c] >> 9];
      for (int j = 0; j < 8; ++j) {
        const float v = db * float((g >> (8 * j)) & 255);
        *dst++ = (s >> j) & 1 ? -v : v;
      }
    }
  }
}

void vec_dot_iq2_xs_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ2_XS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int8_t* q8 = y[i].qs;
    int bsum = 0;
    for (int ig = 0; ig < 16; ++ig) {  // groups of 16: two runs of eight
      int sumi = 0;
      for (int c = 2 * ig; c < 2 * ig + 2; ++c) {
        const uint64_t g = kIq2xsGrid[a[i].qs[c] & 511];
        const uint8_t s = kEvenSigns[a[i].qs[c] >> 9];
        for (int j = 0; j < 8; ++j, ++q8) {
          const int v = int((g >> (8 * j)) & 255) * *q8;
          sumi += (s >> j) & 1 ? -v : v;
        }
      }
      bsum += sumi * (2 * ((a[i].scales[ig / 2] >> (4 * (ig % 2))) & 15) + 1);
    }
    sum += fp16_to_f32(a[i].d) * y[i].d * float(bsum);
  }
  *out = 0.125f * sum;
}

// ---- IQ3_XXS -------------------------------------------------------------------------

void to_float_iq3_xxs_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ3_XXS*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t w;
      std::memcpy(&w, b[i].qs + 64 + 4 * ib, 4);
      const float db = d * (0.5f + float(w >> 28)) * 0.5f;
      for (int k = 0; k < 8; ++k) {  // runs of four values
        const uint32_t g = kIq3xxsGrid[b[i].qs[8 * ib + k]];
        const uint8_t s = kEvenSigns[(w >> (7 * (k / 2))) & 127];
        for (int j = 0; j < 4; ++j) {
          const float v = db * float((g >> (8 * j)) & 255);
          *dst++ = (s >> (4 * (k % 2) + j)) & 1 ? -v : v;
        }
      }
    }
  }
}

void vec_dot_iq3_xxs_ref(int64_t n, float* out, const void* w, const void* x) {
  const auto* a = static_cast<const BlockIQ3_XXS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(x);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int8_t* q8 = y[i].qs;
    int bsum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t aw;
      std::memcpy(&aw, a[i].qs + 64 + 4 * ib, 4);
      int sumi = 0;
      for (int k = 0; k < 8; ++k) {
        const uint32_t g = kIq3xxsGrid[a[i].qs[8 * ib + k]];
        const uint8_t s = kEvenSigns[(aw >> (7 * (k / 2))) & 127];
        for (int j = 0; j < 4; ++j, ++q8) {
          const int v = int((g >> (8 * j)) & 255) * *q8;
          sumi += (s >> (4 * (k % 2) + j)) & 1 ? -v : v;
        }
      }
      bsum += sumi * int(2 * (aw >> 28) + 1);
    }
    sum += fp16_to_f32(a[i].d) * y[i].d * float(bsum);
  }
  *out = 0.25f * sum;
}

}  // namespace deltafin::kern
