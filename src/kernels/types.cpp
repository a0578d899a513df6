// Assembles the traits tables: the scalar reference, then one table per instruction
// set built on top of the next lower one, so a row always has every kernel.
#include "kernels/types.h"

#include <array>
#include <atomic>

#include "core/platform.h"
#include "kernels/cpu_x86.h"
#include "kernels/iq_impl.h"
#include "kernels/kernels_impl.h"

namespace deltafin {
namespace {

using namespace kern;
using Table = std::array<TypeTraits, kDTypeCount>;

#define DF_REF_ROW(T, name, vdt)                                                      \
  t[uint32_t(DType::T)] = TypeTraits{DType::T,                                        \
                                     block_geometry(DType::T).block_elems,           \
                                     block_geometry(DType::T).block_bytes,           \
                                     DType::vdt,                                     \
                                     to_float_##name##_ref,                          \
                                     from_float_##name##_ref,                        \
                                     vec_dot_##name##_ref,                           \
                                     vec_dot_x4_by_one<vec_dot_##name##_ref>,        \
                                     Isa::Scalar};

Table make_ref_table() {
  Table t{};
  DF_REF_ROW(F32, f32, F32)
  DF_REF_ROW(F16, f16, F16)
  DF_REF_ROW(BF16, bf16, BF16)
  DF_REF_ROW(Q8_0, q8_0, Q8_0)
  DF_REF_ROW(Q4_0, q4_0, Q8_0)
  DF_REF_ROW(MXFP4, mxfp4, Q8_0)
  DF_REF_ROW(Q8_K, q8_k, Q8_K)
  DF_REF_ROW(Q2_K, q2_k, Q8_K)
  DF_REF_ROW(Q3_K, q3_k, Q8_K)
  DF_REF_ROW(Q4_K, q4_k, Q8_K)
  DF_REF_ROW(Q5_K, q5_k, Q8_K)
  DF_REF_ROW(Q6_K, q6_k, Q8_K)
  DF_REF_ROW(IQ2_XXS, iq2_xxs, Q8_K)
  DF_REF_ROW(IQ2_XS, iq2_xs, Q8_K)
  DF_REF_ROW(IQ3_XXS, iq3_xxs, Q8_K)
  DF_REF_ROW(IQ2_S, iq2_s, Q8_K)
  DF_REF_ROW(IQ3_S, iq3_s, Q8_K)
  DF_REF_ROW(IQ1_S, iq1_s, Q8_K)
  DF_REF_ROW(IQ1_M, iq1_m, Q8_K)
  DF_REF_ROW(Q8_1, q8_1, Q8_1)
  DF_REF_ROW(Q4_1, q4_1, Q8_1)
  DF_REF_ROW(Q5_0, q5_0, Q8_0)
  DF_REF_ROW(Q5_1, q5_1, Q8_1)
  DF_REF_ROW(IQ4_NL, iq4_nl, Q8_0)
  DF_REF_ROW(IQ4_XS, iq4_xs, Q8_K)
  DF_REF_ROW(TQ2_0, tq2_0, Q8_K)
  DF_REF_ROW(TQ1_0, tq1_0, Q8_K)
  return t;
}
#undef DF_REF_ROW

struct Tables {
  Table ref, avx2, avx512, neon;
  bool has_avx2 = false, has_avx512 = false, has_neon = false;
  Isa best = Isa::Scalar;

  Tables() {
    ref = make_ref_table();
    avx2 = avx512 = neon = ref;
#if defined(DELTAFIN_X86)
    has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               cpu_x86_f16c() && __builtin_cpu_supports("bmi2");
    has_avx512 = has_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vnni");
    install_avx2(avx2.data());
    install_legacy_avx2(avx2.data());
    install_iq_avx2(avx2.data());
    install_iq_s_avx2(avx2.data());
    install_iq1_avx2(avx2.data());
    install_tq1_avx2(avx2.data());
    install_panels_avx2(avx2.data());
    avx512 = avx2;
    install_avx512(avx512.data());
    install_legacy_avx512(avx512.data());
    install_iq_avx512(avx512.data());
    install_iq_s_avx512(avx512.data());
    install_iq1_avx512(avx512.data());
    install_tq1_avx512(avx512.data());
    install_panels_avx512(avx512.data());
    // IQ1_S and IQ1_M: one token at a time the AVX2 kernels, which unpack a super-block
    // once, decode faster than the AVX-512 ones did with a gather per 64 values (Zen 5,
    // -p 64 -n 32 -t 1 alternating the sets: IQ1_S 108 against 136 tok/s, IQ1_M 110
    // against 128), while AVX-512 batches faster (pp64 300 against 253, 305 against
    // 219); the AVX-512 kernels fold to the AVX2 lanes, so the two agree bit for bit.
    for (DType t : {DType::IQ1_S, DType::IQ1_M}) {
      avx512[uint32_t(t)].vec_dot = avx2[uint32_t(t)].vec_dot;
      avx512[uint32_t(t)].vec_dot_r4 = avx2[uint32_t(t)].vec_dot_r4;
    }
    if (__builtin_cpu_is("amd")) decode_row_by_row_on_amd();
    best = has_avx512 ? Isa::AVX512 : has_avx2 ? Isa::AVX2 : Isa::Scalar;
#elif defined(DELTAFIN_ARM)
    has_neon = true;  // Advanced SIMD is mandatory on aarch64
    install_neon_all(neon.data(), platform::cpu_has_arm_dotprod());
    best = Isa::NEON;
#endif
  }

#if defined(DELTAFIN_X86)
  // On an AMD EPYC (CPU family 26, Zen 5) the decode matvec of these types ran faster
  // one row at a time than through the 4-row kernels, whose four interleaved row
  // streams the hardware prefetcher follows worse than one sequential stream
  // (qwen3-moe-mini, deltafin bench -p 0 -n 128 -t 1, alternating runs, tok/s r4 ->
  // row by row): AVX-512 Q8_0 122-125 -> 152-157, Q4_K 174-202 -> 230-233, Q5_K
  // 189-191 -> 214-218, Q6_K 137-163 -> 160-171, IQ4_XS 141-151 -> 154-161; AVX2 Q4_K
  // 136-141 -> 191-197, Q5_K 64-91 -> 121-141; AVX-512 IQ3_S 33-45 -> 62-64 (its
  // 4-row kernel's state spills), IQ3_XXS 68-69 -> 75. Q4_0, MXFP4, IQ1_S, IQ1_M,
  // IQ2_XXS, IQ2_XS and TQ1_0 measured faster with r4 (IQ2_S even); others keep it.
  // Later, against llama.cpp's AVX2 (haswell) library on the same CPU: AVX2 Q6_K
  // 104 -> 212 tok/s, MXFP4 149 -> 171-175 row by row; IQ1_M and IQ3_S no better.
  // With the decode kernels over a prepared row (vec_dot_prep), AVX2 MXFP4 row by
  // row 186 against 177 through four rows; Q4_0 keeps four rows (154 row by row).
  // Session 24, AVX2 -p 0 -n 32 alternating: IQ3_S 66 -> 71 row by row, IQ3_XXS 78 ->
  // 87; IQ1_M (102 -> 87) and IQ2_XS (103 -> 97) keep four rows.
  void decode_row_by_row_on_amd() {
    for (DType t : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::IQ3_S, DType::IQ3_XXS})
      avx512[uint32_t(t)].decode_r4 = false;
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4, DType::IQ3_S, DType::IQ3_XXS})
      avx2[uint32_t(t)].decode_r4 = false;
  }
#endif

  const Table* get(Isa isa) const {
    switch (isa) {
      case Isa::Scalar: return &ref;
      case Isa::AVX2: return has_avx2 ? &avx2 : nullptr;
      case Isa::AVX512: return has_avx512 ? &avx512 : nullptr;
      case Isa::NEON: return has_neon ? &neon : nullptr;
    }
    return nullptr;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

// The set select_isa() picked; -1: none, the best.
std::atomic<int> g_selected{-1};

const TypeTraits* row(const Table* table, DType t) {
  auto i = uint32_t(t);
  if (table == nullptr || i >= kDTypeCount || (*table)[i].block_elems == 0) return nullptr;
  return &(*table)[i];
}

}  // namespace

const TypeTraits* type_traits(DType t) { return row(tables().get(selected_isa()), t); }
const TypeTraits* type_traits_ref(DType t) { return row(&tables().ref, t); }
const TypeTraits* type_traits_isa(DType t, Isa isa) { return row(tables().get(isa), t); }

std::string computed_type_names() {
  std::string s;
  for (uint32_t i = 0; i < kDTypeCount; ++i)
    if (type_traits_ref(DType(i)))
      s += (s.empty() ? "" : ", ") + std::string(dtype_name(DType(i)));
  return s;
}

bool isa_supported(Isa isa) { return tables().get(isa) != nullptr; }
Isa best_isa() { return tables().best; }

Isa selected_isa() {
  const int s = g_selected.load(std::memory_order_relaxed);
  return s < 0 ? tables().best : Isa(s);
}

bool select_isa(Isa isa) {
  if (!isa_supported(isa)) return false;
  g_selected.store(int(isa), std::memory_order_relaxed);
  return true;
}

bool isa_from_name(std::string_view name, Isa* out) {
  for (Isa i : {Isa::Scalar, Isa::AVX2, Isa::AVX512, Isa::NEON})
    if (name == isa_name(i)) {
      *out = i;
      return true;
    }
  return false;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::AVX2: return "avx2";
    case Isa::AVX512: return "avx512";
    case Isa::NEON: return "neon";
  }
  return "unknown";
}

}  // namespace deltafin
