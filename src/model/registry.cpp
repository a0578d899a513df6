#include "model/registry.h"

#include "model/arch.h"
#include "synth/synth.h"

namespace deltafin {

namespace {
constexpr Architecture kArchitectures[] = {
    {"qwen3moe", load_qwen3moe, plan_qwen3moe, tiny_qwen3moe},
    {"deepseek2", load_deepseek2, plan_deepseek2, tiny_deepseek2},
    {"kimi-k3", load_kimi_k3, plan_kimi_k3, tiny_kimi_k3},
    {"llama", load_llama, plan_llama, tiny_llama},
};
}  // namespace

std::span<const Architecture> architectures() { return kArchitectures; }

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures)
    if (name == a.name) return &a;
  return nullptr;
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> v;
  for (const Architecture& a : kArchitectures) v.push_back(a.name);
  return v;
}

}  // namespace deltafin
