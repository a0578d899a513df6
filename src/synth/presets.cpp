// Presets: "tiny" models per architecture for tests (a few MB), and scaled-down
// shapes of the real models for benchmarks.
#include "synth/synth.h"

#include "model/registry.h"

namespace deltafin {

std::vector<std::string> synth_preset_names() {
  return {"tiny", "qwen3-moe-mini", "kimi-k2-mini", "kimi-k3-mini", "mixtral-mini"};
}

namespace {
// What every "-mini" preset is: `arch` at 8 layers of 1024 with 16 heads, Q8_0
// matrices and (unless the preset says otherwise) Q8_0 experts.
void mini(SynthSpec* d, const std::string& arch, const std::string& name) {
  d->arch = arch;
  d->name = name;
  d->n_layer = 8;
  d->n_embd = 1024;
  d->n_head = 16;
  d->type = DType::Q8_0;
  d->expert_type = DType::Q8_0;
}

// The scaled-down Kimi K2 shape kimi-k2-mini and kimi-k3-mini share: q-LoRA MLA,
// one leading dense layer, 1 shared and 64 routed experts (top-8).
void mla_mini_shape(SynthSpec* d) {
  d->n_head_kv = 16;
  d->n_dense_lead = 1;
  d->n_shared = 1;
  d->q_lora_rank = 512;
  d->kv_lora_rank = 256;
  d->rope_dim = 64;
  d->nope_dim = 128;
  d->v_head_dim = 128;
  d->n_expert = 64;
  d->n_used = 8;
  d->n_ff_exp = 512;
  d->n_ff = 2048;
}
}  // namespace

bool synth_preset(const std::string& preset, const std::string& arch, SynthSpec* s) {
  SynthSpec d;
  if (preset == "tiny") {
    d.arch = arch.empty() ? architectures()[0].name : arch;
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
    // An unknown architecture keeps the common shape; writing it names the problem.
    if (const Architecture* a = find_architecture(d.arch)) a->tiny_preset(&d);
  } else if (preset == "qwen3-moe-mini") {
    // Qwen3-30B-A3B's pattern (GQA 32/4, 128 experts, top-8), narrower and shallower.
    mini(&d, "qwen3moe", preset);
    d.n_head_kv = 4;
    d.head_dim = 64;
    d.n_expert = 64;
    d.n_used = 8;
    d.n_ff_exp = 512;
    d.n_ff = 2048;
  } else if (preset == "kimi-k2-mini") {
    // Kimi K2's pattern: absorbed MLA with q-LoRA, one leading dense layer, 1 shared
    // expert, sigmoid routing with score bias (one expert group, as K2), top-8,
    // routed scale 2.827, rope base 50000 with YaRN x32 over 4096 (mscale_all_dim 1).
    mini(&d, "deepseek2", preset);
    mla_mini_shape(&d);
    d.n_group = 1;
    d.n_group_used = 1;
    d.mla_split_kv_b = true;
    d.n_ctx = 131072;
    d.freq_base = 50000.0f;
    d.yarn_factor = 32.0f;
    d.yarn_orig_ctx = 4096;
    d.yarn_mscale_all_dim = 1.0f;
    d.routed_scale = 2.827f;
  } else if (preset == "kimi-k3-mini") {
    mini(&d, "kimi-k3", preset);
    mla_mini_shape(&d);
    // Kimi-K3's pattern: 3 KDA layers to 1 gated MLA, a leading dense layer, latent
    // MoE with a shared expert, SiTU, attention residuals, MXFP4 experts.
    d.kda_period = 4;
    d.kda_head_dim = 128;
    d.moe_latent = 512;
    d.attn_res_block = 4;
    d.expert_type = DType::MXFP4;
  } else if (preset == "mixtral-mini") {
    mini(&d, "llama", preset);
    d.n_head_kv = 4;
    d.head_dim = 64;
    d.n_expert = 8;
    d.n_used = 2;
    d.n_ff_exp = 2048;
  } else {
    return false;
  }
  *s = d;
  return true;
}

}  // namespace deltafin
