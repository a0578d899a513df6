// Presets: "tiny" models per architecture for tests (a few MB), and scaled-down
// shapes of the real models for benchmarks.
#include "synth/synth.h"

namespace deltafin {

std::vector<std::string> synth_preset_names() {
  return {"tiny", "qwen3-moe-mini", "kimi-k2-mini", "kimi-k3-mini", "mixtral-mini"};
}

bool synth_preset(const std::string& preset, const std::string& arch, SynthSpec* s) {
  SynthSpec d;
  if (preset == "tiny") {
    d.arch = arch.empty() ? "qwen3moe" : arch;
    d.name = "tiny-" + d.arch;
    d.n_layer = 2;
    d.n_embd = 256;
    d.n_head = 4;
    d.n_head_kv = 2;
    d.head_dim = 64;
    d.n_expert = 8;
    d.n_used = 2;
    d.n_ff_exp = 256;
    d.n_ff = 512;
    if (d.arch == "deepseek2" || d.arch == "kimi-k3") {
      d.n_layer = 3;
      d.n_dense_lead = 1;
      d.n_shared = 1;
      d.kv_lora_rank = 256;
      d.q_lora_rank = 256;
      d.rope_dim = 64;
      d.nope_dim = 64;
      d.v_head_dim = 64;
      d.n_expert = 8;
      d.n_used = 2;
      d.n_group = 2;
      d.n_group_used = 1;
    }
    if (d.arch == "kimi-k3") {
      d.n_layer = 5;
      d.kda_period = 4;
      d.moe_latent = 256;
      d.expert_type = DType::MXFP4;
    }
  } else if (preset == "qwen3-moe-mini") {
    // Qwen3-30B-A3B's pattern (GQA 32/4, 128 experts, top-8), narrower and shallower.
    d.arch = "qwen3moe";
    d.name = preset;
    d.n_layer = 8;
    d.n_embd = 1024;
    d.n_head = 16;
    d.n_head_kv = 4;
    d.head_dim = 64;
    d.n_expert = 64;
    d.n_used = 8;
    d.n_ff_exp = 512;
    d.n_ff = 2048;
    d.type = DType::Q8_0;
    d.expert_type = DType::Q8_0;
  } else if (preset == "kimi-k2-mini") {
    // Kimi K2 / DeepSeek V3's pattern: MLA, one leading dense layer, 1 shared expert,
    // sigmoid routing with score bias and groups, top-8.
    d.arch = "deepseek2";
    d.name = preset;
    d.n_layer = 8;
    d.n_embd = 1024;
    d.n_head = 16;
    d.n_head_kv = 16;
    d.n_dense_lead = 1;
    d.n_shared = 1;
    d.q_lora_rank = 512;
    d.kv_lora_rank = 256;
    d.rope_dim = 64;
    d.nope_dim = 128;
    d.v_head_dim = 128;
    d.n_expert = 64;
    d.n_used = 8;
    d.n_ff_exp = 512;
    d.n_ff = 2048;
    d.n_group = 1;
    d.n_group_used = 1;
    d.type = DType::Q8_0;
    d.expert_type = DType::Q8_0;
  } else if (preset == "kimi-k3-mini") {
    d.arch = "kimi-k3";
    d.name = preset;
    d.n_layer = 8;
    d.n_embd = 1024;
    d.n_head = 16;
    d.n_head_kv = 16;
    d.n_dense_lead = 1;
    d.n_shared = 1;
    d.q_lora_rank = 512;
    d.kv_lora_rank = 256;
    d.rope_dim = 64;
    d.nope_dim = 128;
    d.v_head_dim = 128;
    d.n_expert = 64;
    d.n_used = 8;
    d.n_ff_exp = 512;
    d.n_ff = 2048;
    d.kda_period = 4;
    d.moe_latent = 512;
    d.type = DType::Q8_0;
    d.expert_type = DType::MXFP4;
  } else if (preset == "mixtral-mini") {
    d.arch = "llama";
    d.name = preset;
    d.n_layer = 8;
    d.n_embd = 1024;
    d.n_head = 16;
    d.n_head_kv = 4;
    d.head_dim = 64;
    d.n_expert = 8;
    d.n_used = 2;
    d.n_ff_exp = 2048;
    d.type = DType::Q8_0;
    d.expert_type = DType::Q8_0;
  } else {
    return false;
  }
  *s = d;
  return true;
}

}  // namespace deltafin
