// Presets: "tiny" models per architecture for tests (a few MB), and scaled-down
// shapes of the real models for benchmarks.
#include "synth/synth.h"

#include "model/registry.h"

namespace deltafin {

std::vector<std::string> synth_preset_names() {
  return {"tiny", "qwen3-moe-mini", "kimi-k2-mini", "kimi-k3-mini", "mixtral-mini", "kimi-k3", "kimi-k2",
          "deepseek-v3"};
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
// The real DeepSeek-V3 / Kimi K2 shape (their config.json): hidden 7168, 61 layers
// of which the first (K2; V3: three) are dense (width 18432), MLA with q-LoRA 1536, kv-LoRA 512,
// rope/nope/v head dims 64/128/128, one shared expert and routed experts of width
// 2048, top-8, a BF16 core and Q4_K experts (a popular GGUF of them). K2: 64 heads,
// 384 experts in one group; V3: 128 heads, 256 experts in 8 groups (top 4 groups).
void deepseek_real_shape(SynthSpec* d) {
  d->arch = "deepseek2";
  d->n_layer = 61;
  d->n_embd = 7168;
  d->n_dense_lead = 1;
  d->n_ff = 18432;
  d->n_shared = 1;
  d->n_ff_exp = 2048;
  d->n_used = 8;
  d->q_lora_rank = 1536;
  d->kv_lora_rank = 512;
  d->rope_dim = 64;
  d->nope_dim = 128;
  d->v_head_dim = 128;
  d->mla_split_kv_b = true;
  d->n_ctx = 131072;
  d->yarn_factor = 32.0f;
  d->yarn_orig_ctx = 4096;
  d->type = DType::BF16;
  d->expert_type = DType::Q4_K;
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
    d.rope_freqs = false;  // Mixtral has none
  } else if (preset == "kimi-k2") {
    deepseek_real_shape(&d);
    d.name = preset;
    d.n_head = d.n_head_kv = 64;
    d.n_expert = 384;
    d.n_vocab = 163840;
    d.freq_base = 50000.0f;
    d.routed_scale = 2.827f;
  } else if (preset == "deepseek-v3") {
    deepseek_real_shape(&d);
    d.name = preset;
    d.n_head = d.n_head_kv = 128;
    d.n_dense_lead = 3;
    d.n_expert = 256;
    d.n_group = 8;
    d.n_group_used = 4;
    d.n_vocab = 129280;
    d.routed_scale = 2.5f;
  } else if (preset == "kimi-k3") {
    // Kimi K3 as described by its release: 896 routed experts (top-16) of
    // 17,547,264 bytes each (MXFP4 gate/up/down of 3584 x 3072: the experts run at
    // a latent width of 3584 from a hidden 7168) in 92 MoE layers after one dense
    // layer, 2 shared experts, 3 KDA layers to 1 gated MLA, attention residuals, a
    // BF16 core. The attention widths are K2's with 96 heads instead of 64: K3's are
    // not stated in what we know of it, and 96 gives its stated 114 GB core and 2.8 T
    // parameters (1.56 TB in all).
    deepseek_real_shape(&d);
    d.arch = "kimi-k3";
    d.name = preset;
    d.n_layer = 93;
    d.n_head = d.n_head_kv = 96;
    d.n_expert = 896;
    d.n_used = 16;
    d.n_shared = 2;
    d.n_ff_exp = 3072;
    d.moe_latent = 3584;
    d.kda_period = 4;
    d.kda_head_dim = 128;
    d.attn_res_block = 4;
    d.n_vocab = 163840;
    d.freq_base = 50000.0f;
    d.routed_scale = 2.827f;
    d.type = DType::BF16;
    d.expert_type = DType::MXFP4;
  } else {
    return false;
  }
  *s = d;
  return true;
}

}  // namespace deltafin
