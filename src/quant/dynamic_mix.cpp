#include "quant/dynamic_mix.h"

#include <cctype>

namespace deltafin {
namespace {

struct DynamicMix {
  const char* name;
  DType gate_up;  // routed experts' gate and up projections
  DType down;     // routed experts' down projections, one step higher
  DType core;     // attention, shared experts, latent projections, everything else
  int64_t file_type;  // llama_ftype of gate_up
};
constexpr DynamicMix kDynamicMixes[] = {
    {"IQ1_S_DYN", DType::IQ1_S, DType::IQ2_XXS, DType::Q4_K, 24},
    {"IQ2_XXS_DYN", DType::IQ2_XXS, DType::IQ3_XXS, DType::Q5_K, 19},
    {"Q2_K_DYN", DType::Q2_K, DType::Q3_K, DType::Q6_K, 10},
};

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

const DynamicMix* find(const std::string& name) {
  std::string up = name;
  for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (const DynamicMix& m : kDynamicMixes)
    if (up == m.name) return &m;
  return nullptr;
}

}  // namespace

std::vector<std::string> dynamic_mix_names() {
  std::vector<std::string> v;
  for (const DynamicMix& m : kDynamicMixes) v.emplace_back(m.name);
  return v;
}

bool is_dynamic_mix(const std::string& name, std::string* canonical) {
  const DynamicMix* m = find(name);
  if (m && canonical) *canonical = m->name;
  return m != nullptr;
}

DType dynamic_mix_type(const std::string& mix, const std::string& tensor) {
  const DynamicMix* m = find(mix);
  if (m == nullptr) return DType::F32;
  if (contains(tensor, "_exps.")) return contains(tensor, "ffn_down") ? m->down : m->gate_up;
  if (tensor == "output.weight") return DType::Q6_K;
  if (tensor == "token_embd.weight") return DType::Q4_K;
  // A dense layer's FFN (the leading dense layers of DeepSeek-V3 and the Kimi models).
  for (const char* dense : {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"})
    if (contains(tensor, dense)) return DType::Q8_0;
  return m->core;
}

int64_t dynamic_mix_file_type(const std::string& mix) {
  const DynamicMix* m = find(mix);
  return m ? m->file_type : -1;
}

DType dynamic_mix_fit(DType want, int64_t cols) {
  auto fits = [cols](DType t) {
    const BlockGeometry g = block_geometry(t);
    return g.block_elems != 0 && cols % g.block_elems == 0;
  };
  if (fits(want)) return want;
  DType alt = DType::F32;
  switch (want) {
    case DType::Q4_K: alt = DType::Q5_0; break;
    case DType::Q5_K: alt = DType::Q5_1; break;
    case DType::Q6_K: alt = DType::Q8_0; break;
    case DType::Q2_K: case DType::Q3_K: case DType::IQ1_S: case DType::IQ1_M: case DType::IQ2_XXS:
    case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ4_XS:
      alt = DType::IQ4_NL;
      break;
    default: break;
  }
  return fits(alt) ? alt : DType::F32;
}

}  // namespace deltafin
