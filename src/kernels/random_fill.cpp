// Random block generators. Every type draws its quant codes uniformly and picks block
// scales so that E[x^2] = stddev^2; a random sign on symmetric-scale blocks cancels
// the -0.5 bias of the asymmetric code ranges, and mins offset the positive codes of
// Q2_K/Q4_K/Q5_K.
#include "kernels/random_fill.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/blocks.h"
#include "kernels/blocks_legacy.h"
#include "kernels/iq_grids.h"
#include "kernels/types.h"

namespace deltafin {
namespace {

using namespace kern;

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256**.
struct Rng {
  uint64_t s[4];
  explicit Rng(uint64_t seed) {
    for (auto& v : s) v = splitmix64(seed);
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
    s[2] ^= t, s[3] = rotl(s[3], 45);
    return r;
  }
  void bytes(void* dst, size_t n) {  // n a multiple of 8
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; i += 8) {
      uint64_t v = next();
      std::memcpy(p + i, &v, 8);
    }
  }
  int range(int lo, int hi) { return lo + int((next() >> 32) * uint64_t(hi - lo + 1) >> 32); }  // [lo, hi]
  float sign() { return (next() >> 63) ? -1.0f : 1.0f; }
  // Approximately normal (sum of four uniforms), unit variance, |v| < 3.5.
  float normal() {
    uint64_t v = next();
    int s = int(v & 0xffff) + int((v >> 16) & 0xffff) + int((v >> 32) & 0xffff) + int(v >> 48) - 2 * 65535;
    return float(s) * (1.0f / 37837.23f);
  }
};

// fp16 of a positive scale, never rounded to zero or infinity.
uint16_t scale_fp16(float v) { return f32_to_fp16(std::clamp(v, 0x1p-24f, 65504.0f)); }

// Uniform int8 in -127..127 (no -128: the SIMD dots rely on it); std ~73.6.
void random_i8(Rng& r, int8_t* q, int n) {
  r.bytes(q, size_t(n));
  for (int i = 0; i < n; ++i) q[i] = q[i] == -128 ? int8_t(-127) : q[i];
}

constexpr float kStdI8 = 73.61f;       // uniform -127..127
constexpr float kStdU4 = 4.6098f;      // uniform over 16 codes
constexpr float kStdU5 = 9.2331f;      // uniform over 32 codes
constexpr float kStdU6 = 18.473f;      // uniform over 64 codes
constexpr float kStdU2 = 1.1180f;      // uniform over 4 codes
constexpr float kStdU3 = 2.2913f;      // uniform over 8 codes
constexpr float kRmsMxfp4 = 5.8523f;   // rms of kMxfp4Values over the 16 codes
constexpr float kRmsIq4nl = 67.4389f;  // rms of kIq4nlValues over the 16 codes

// One block of a 256-value type (Q8_K and the K-quants).
void fill_kquant_block(DType t, Rng& r, float sd, uint8_t* out) {
  switch (t) {
    case DType::Q8_K: {
      BlockQ8_K b;
      b.d = sd / kStdI8;
      random_i8(r, b.qs, 256);
      for (int j = 0; j < 16; ++j) {
        int s = 0;
        for (int e = 0; e < 16; ++e) s += b.qs[16 * j + e];
        b.bsums[j] = int16_t(s);
      }
      std::memcpy(out, &b, sizeof b);
      break;
    }
    case DType::Q2_K: {  // sc in 8..15, dmin = 2d, m = 0.75 sc: mean ~0
      BlockQ2_K b;
      float d = sd / (kStdU2 * 11.726f);  // sqrt(E[sc^2]) = 11.726
      b.d = scale_fp16(d);
      b.dmin = scale_fp16(2 * d);
      for (int j = 0; j < 16; ++j) {
        int sc = r.range(8, 15);
        b.scales[j] = uint8_t(sc | (int(std::lround(sc * 0.75f)) << 4));
      }
      r.bytes(b.qs, 64);
      std::memcpy(out, &b, sizeof b);
      break;
    }
    case DType::Q3_K: {  // |sc| in 16..31, random sign
      BlockQ3_K b;
      b.d = scale_fp16(sd / (kStdU3 * 23.948f));  // sqrt(E[sc^2]) = 23.948
      int8_t sc[16];
      for (auto& v : sc) v = int8_t(r.sign() * float(r.range(16, 31)));
      pack_scales_q3k(sc, b.scales);
      r.bytes(b.hmask, 32);
      r.bytes(b.qs, 64);
      std::memcpy(out, &b, sizeof b);
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K: {  // sc in 32..63, dmin = (levels / 2) d, m = sc * (levels - 1) / levels
      const bool five = t == DType::Q5_K;
      const float half = five ? 16.0f : 8.0f;
      float d = sd / ((five ? kStdU5 : kStdU4) * 48.389f);  // sqrt(E[sc^2]) = 48.389
      uint8_t sc[8], m[8];
      for (int j = 0; j < 8; ++j) {
        sc[j] = uint8_t(r.range(32, 63));
        m[j] = uint8_t(std::lround(sc[j] * (half - 0.5f) / half));
      }
      if (five) {
        BlockQ5_K b;
        b.d = scale_fp16(d), b.dmin = scale_fp16(half * d);
        pack_scales_k4(sc, m, b.scales);
        r.bytes(b.qh, 32);
        r.bytes(b.qs, 128);
        std::memcpy(out, &b, sizeof b);
      } else {
        BlockQ4_K b;
        b.d = scale_fp16(d), b.dmin = scale_fp16(half * d);
        pack_scales_k4(sc, m, b.scales);
        r.bytes(b.qs, 128);
        std::memcpy(out, &b, sizeof b);
      }
      break;
    }
    case DType::Q6_K: {  // |sc| in 64..127, random sign
      BlockQ6_K b;
      b.d = scale_fp16(sd / (kStdU6 * 97.270f));  // sqrt(E[sc^2]) = 97.270
      for (auto& v : b.scales) v = int8_t(r.sign() * float(r.range(64, 127)));
      r.bytes(b.ql, 128);
      r.bytes(b.qh, 64);
      std::memcpy(out, &b, sizeof b);
      break;
    }
    default:
      break;
  }
}

// Writes nb blocks of type t at out. The type switch sits outside the per-block loops.
void fill_blocks(DType t, Rng& r, float sd, uint8_t* out, int64_t nb) {
  switch (t) {
    case DType::F32: {
      auto* y = reinterpret_cast<float*>(out);
      for (int64_t i = 0; i < nb; ++i) y[i] = sd * r.normal();
      break;
    }
    case DType::F16: {
      for (int64_t i = 0; i < nb; ++i) {
        uint16_t v = f32_to_fp16(sd * r.normal());
        std::memcpy(out + 2 * i, &v, 2);
      }
      break;
    }
    case DType::BF16: {
      for (int64_t i = 0; i < nb; ++i) {
        uint16_t v = f32_to_bf16(sd * r.normal());
        std::memcpy(out + 2 * i, &v, 2);
      }
      break;
    }
    case DType::Q8_0: {
      BlockQ8_0 b;
      b.d = scale_fp16(sd / kStdI8);
      for (int64_t i = 0; i < nb; ++i) {
        random_i8(r, b.qs, 32);
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::Q4_0: {
      BlockQ4_0 b;
      const float d = fp16_to_f32(scale_fp16(sd / kStdU4));
      const uint16_t pos = f32_to_fp16(d), neg = f32_to_fp16(-d);
      for (int64_t i = 0; i < nb; ++i) {
        uint64_t v[2] = {r.next(), r.next()};
        b.d = (v[0] & 1) ? neg : pos;  // random sign cancels the -0.5 code bias
        std::memcpy(b.qs, v, 16);
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::MXFP4: {
      // Scale 2^(e-128) ~ sd / rms; between two exponents pick the larger with the
      // probability that makes E[scale^2] exact.
      const float s = sd / kRmsMxfp4;
      const int k = int(std::floor(std::log2(s)));
      const float lo = std::ldexp(1.0f, k), p = (s * s / (lo * lo) - 1.0f) / 3.0f;
      const uint32_t threshold = uint32_t(std::clamp(p, 0.0f, 1.0f) * 4294967295.0f);
      BlockMXFP4 b;
      for (int64_t i = 0; i < nb; ++i) {
        uint64_t v[2] = {r.next(), r.next()};
        b.e = uint8_t(std::clamp(k + 128 + (uint32_t(r.next() >> 32) < threshold ? 1 : 0), 1, 254));
        std::memcpy(b.qs, v, 16);
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::IQ2_XXS: {
      // Uniform bytes are valid blocks (any point, sign code and scale code); d so
      // that E[x^2] = sd^2: E[(2 ls + 1)^2] = 341 over ls < 16, E[g^2] over the grid.
      double g2 = 0;
      for (uint64_t p : kIq2xxsGrid)
        for (int j = 0; j < 8; ++j) g2 += double((p >> (8 * j)) & 255) * double((p >> (8 * j)) & 255);
      g2 /= 256.0 * 8.0;
      BlockIQ2_XXS b;
      for (int64_t i = 0; i < nb; ++i) {
        r.bytes(b.qs, sizeof b.qs);
        b.d = scale_fp16(float(sd / std::sqrt(341.0 / 64.0 * g2)));
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::IQ2_XS: {  // as IQ2_XXS over the 512 points
      double g2 = 0;
      for (uint64_t p : kIq2xsGrid)
        for (int j = 0; j < 8; ++j) g2 += double((p >> (8 * j)) & 255) * double((p >> (8 * j)) & 255);
      g2 /= 512.0 * 8.0;
      BlockIQ2_XS b;
      for (int64_t i = 0; i < nb; ++i) {
        r.bytes(b.qs, sizeof b.qs);
        r.bytes(b.scales, sizeof b.scales);
        b.d = scale_fp16(float(sd / std::sqrt(341.0 / 64.0 * g2)));
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::IQ3_XXS: {  // as IQ2_XXS; E[(2 ls + 1)^2] / 16 for the step d (2 ls + 1) / 4
      double g2 = 0;
      for (uint32_t p : kIq3xxsGrid)
        for (int j = 0; j < 4; ++j) g2 += double((p >> (8 * j)) & 255) * double((p >> (8 * j)) & 255);
      g2 /= 256.0 * 4.0;
      BlockIQ3_XXS b;
      for (int64_t i = 0; i < nb; ++i) {
        uint64_t v[12];
        r.bytes(v, sizeof v);
        std::memcpy(b.qs, v, sizeof b.qs);
        b.d = scale_fp16(float(sd / std::sqrt(341.0 / 16.0 * g2)));
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::Q8_1: {
      BlockQ8_1 b;
      b.d = scale_fp16(sd / kStdI8);
      for (int64_t i = 0; i < nb; ++i) {
        random_i8(r, b.qs, 32);
        int sum = 0;
        for (int8_t q : b.qs) sum += q;
        b.s = f32_to_fp16(fp16_to_f32(b.d) * float(sum));
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::Q4_1:
    case DType::Q5_1: {  // m = -(levels - 1) / 2 * d: mean 0
      const bool five = t == DType::Q5_1;
      const float d = fp16_to_f32(scale_fp16(sd / (five ? kStdU5 : kStdU4)));
      const uint16_t dh = f32_to_fp16(d), mh = f32_to_fp16(-(five ? 15.5f : 7.5f) * d);
      for (int64_t i = 0; i < nb; ++i) {
        uint64_t v[2] = {r.next(), r.next()};
        if (five) {
          BlockQ5_1 b{dh, mh, {}, {}};
          uint32_t h = uint32_t(r.next());
          std::memcpy(b.qh, &h, 4);
          std::memcpy(b.qs, v, 16);
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        } else {
          BlockQ4_1 b{dh, mh, {}};
          std::memcpy(b.qs, v, 16);
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        }
      }
      break;
    }
    case DType::Q5_0:
    case DType::IQ4_NL: {  // random sign on d, as Q4_0
      const bool five = t == DType::Q5_0;
      const float d = fp16_to_f32(scale_fp16(sd / (five ? kStdU5 : kRmsIq4nl)));
      const uint16_t pos = f32_to_fp16(d), neg = f32_to_fp16(-d);
      for (int64_t i = 0; i < nb; ++i) {
        uint64_t v[2] = {r.next(), r.next()};
        const uint16_t dh = (v[0] & 1) ? neg : pos;
        if (five) {
          BlockQ5_0 b{dh, {}, {}};
          uint32_t h = uint32_t(r.next());
          std::memcpy(b.qh, &h, 4);
          std::memcpy(b.qs, v, 16);
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        } else {
          BlockIQ4_NL b{dh, {}};
          std::memcpy(b.qs, v, 16);
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        }
      }
      break;
    }
    case DType::IQ4_XS: {  // |ls - 32| in 16..31 with a random sign (E = 573.5)
      const float d = fp16_to_f32(scale_fp16(sd / (23.948f * kRmsIq4nl)));
      BlockIQ4_XS b;
      b.d = f32_to_fp16(d);
      for (int64_t i = 0; i < nb; ++i) {
        b.scales_h = 0;
        std::memset(b.scales_l, 0, 4);
        for (int j = 0; j < 8; ++j) {
          const int m = r.range(16, 31), u = r.sign() > 0 ? 32 + m : 32 - m;
          b.scales_l[j / 2] |= uint8_t((u & 15) << 4 * (j % 2));
          b.scales_h |= uint16_t((u >> 4) << 2 * j);
        }
        r.bytes(b.qs, sizeof b.qs);
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::TQ2_0: {  // codes 0..2 uniform (code 3, which decodes to 2, never written)
      BlockTQ2_0 b;
      b.d = scale_fp16(sd * 1.2247449f);  // E[(q - 1)^2] = 2/3
      for (int64_t i = 0; i < nb; ++i) {
        for (int k = 0; k < 64; ++k) {
          uint8_t v = 0;
          for (int l = 0; l < 4; ++l) v = uint8_t(v | r.range(0, 2) << 2 * l);
          b.qs[k] = v;
        }
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::IQ2_S:
    case DType::IQ3_S: {  // as IQ2_XS / IQ3_XXS (uniform bytes are valid blocks), free signs
      const bool two = t == DType::IQ2_S;
      double g2 = 0;
      if (two) {
        for (uint64_t p : kIq2sGrid)
          for (int j = 0; j < 8; ++j) g2 += double((p >> (8 * j)) & 255) * double((p >> (8 * j)) & 255);
        g2 /= 1024.0 * 8.0 * 64.0;  // and the step d (2 ls + 1) / 8
      } else {
        for (uint32_t p : kIq3sGrid)
          for (int j = 0; j < 4; ++j) g2 += double((p >> (8 * j)) & 255) * double((p >> (8 * j)) & 255);
        g2 /= 512.0 * 4.0;
      }
      const uint16_t d = scale_fp16(float(sd / std::sqrt(341.0 * g2)));
      for (int64_t i = 0; i < nb; ++i) {
        if (two) {
          BlockIQ2_S b;
          uint8_t raw[80];
          r.bytes(raw, sizeof raw);
          std::memcpy(b.qs, raw, 64), std::memcpy(b.qh, raw + 64, 8), std::memcpy(b.scales, raw + 72, 8);
          b.d = d;
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        } else {
          BlockIQ3_S b;
          uint8_t raw[112];
          r.bytes(raw, sizeof raw);
          std::memcpy(b.qs, raw, 64), std::memcpy(b.qh, raw + 64, 8), std::memcpy(b.signs, raw + 72, 32);
          std::memcpy(b.scales, raw + 104, 4);
          b.d = d;
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        }
      }
      break;
    }
    case DType::TQ1_0: {  // every byte is valid base-3 digits, near uniform (E[(t - 1)^2] ~ 2/3)
      BlockTQ1_0 b;
      b.d = scale_fp16(sd * 1.2247449f);
      for (int64_t i = 0; i < nb; ++i) {
        r.bytes(b.qs, sizeof b.qs);
        uint64_t h = r.next();
        std::memcpy(b.qh, &h, sizeof b.qh);
        std::memcpy(out + i * sizeof b, &b, sizeof b);
      }
      break;
    }
    case DType::IQ1_S:
    case DType::IQ1_M: {
      // Uniform bytes are valid blocks (any point, delta sign and 3-bit scale code);
      // d so that E[x^2] = sd^2: E[(2 ls + 1)^2] = 85 over ls < 8, E[(g +- 1/8)^2]
      // = E[g^2] + 1/64 over the grid (the delta's sign is random).
      double g2 = 0;
      for (uint64_t p : kIq1sGrid)
        for (int j = 0; j < 8; ++j) g2 += double(int8_t((p >> (8 * j)) & 255)) * double(int8_t((p >> (8 * j)) & 255));
      g2 = g2 / (2048.0 * 8.0) + 1.0 / 64.0;
      const uint16_t d = scale_fp16(float(sd / std::sqrt(85.0 * g2)));
      for (int64_t i = 0; i < nb; ++i) {
        if (t == DType::IQ1_S) {
          BlockIQ1_S b;
          r.bytes(b.qs, sizeof b.qs);
          r.bytes(b.qh, sizeof b.qh);
          b.d = d;
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        } else {  // the fp16 d in the top nibbles of the four scale words
          BlockIQ1_M b;
          r.bytes(b.qs, sizeof b.qs);
          r.bytes(b.qh, sizeof b.qh);
          r.bytes(b.scales, sizeof b.scales);
          for (int w = 0; w < 4; ++w) b.scales[2 * w + 1] = uint8_t((b.scales[2 * w + 1] & 15) | ((d >> (4 * w)) & 15) << 4);
          std::memcpy(out + i * sizeof b, &b, sizeof b);
        }
      }
      break;
    }
    default:
      for (int64_t i = 0; i < nb; ++i) fill_kquant_block(t, r, sd, out + i * block_geometry(t).block_bytes);
      break;
  }
}

}  // namespace

bool fill_random(DType t, uint64_t seed, int64_t n_elems, float stddev, void* dst, ThreadPool* pool) {
  const TypeTraits* tt = type_traits_ref(t);
  if (tt == nullptr || n_elems < 0 || n_elems % tt->block_elems != 0) return false;
  const int64_t nblocks = n_elems / tt->block_elems;
  // Fixed chunks, each with its own stream, so the output ignores the thread count.
  const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 16) / tt->block_elems);
  const int64_t nchunks = (nblocks + chunk - 1) / chunk;
  auto* out = static_cast<uint8_t*>(dst);
  auto body = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      uint64_t s = seed ^ (uint64_t(c) * 0xd1342543de82ef95ULL);
      Rng r(splitmix64(s) ^ uint64_t(t));
      const int64_t b1 = std::min(nblocks, (c + 1) * chunk);
      fill_blocks(t, r, stddev, out + size_t(c * chunk) * tt->block_bytes, b1 - c * chunk);
    }
  };
  if (pool != nullptr) pool->parallel_for(nchunks, 1, body);
  else body(0, nchunks);
  return true;
}

}  // namespace deltafin
