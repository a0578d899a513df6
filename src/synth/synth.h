// Synthetic models: valid GGUF files with random weights for every supported
// architecture and tensor type, shaped like the real models (presets) or as the
// flags say. Used by tests (tiny models), benchmarks (multi-GB models) and the
// README's first run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "format/gguf.h"

namespace deltafin {

struct SynthSpec {
  std::string arch = "qwen3moe";
  // Per-tensor type overrides, applied in order after the architecture's plan: a
  // tensor whose name matches `pattern` (ECMAScript regex, searched) gets `type`
  // (like llama-quantize's --tensor-type). 1-D tensors are never overridden.
  struct TypeOverride {
    std::string pattern;
    DType type;
  };
  std::vector<TypeOverride> type_overrides;
  // A dynamic-quant type mix (quant/dynamic_mix.h: IQ1_S_DYN ...), applied before the
  // overrides to every matrix the plan does not keep F32; empty: none.
  std::string mix;
  int n_layer = 2;
  int64_t n_embd = 256;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 64;
  int n_expert = 8;
  int n_used = 2;
  int64_t n_ff_exp = 256;   // expert width
  int64_t n_ff = 512;       // dense FFN width (leading dense layers, shared experts x n_shared)
  int n_ctx = 4096;
  DType type = DType::F32;         // 2-D core matrices
  DType expert_type = DType::F32;  // routed experts
  uint64_t seed = 1;
  // Routing skew: 0 = uniform; s > 0 makes expert popularity roughly Zipf(s).
  float skew = 0.0f;
  // Tokenizer: copied from this GGUF's tokenizer.* keys, or a small built-in
  // byte-level BPE vocabulary when empty.
  std::string vocab_path;
  // When larger than the vocabulary: padded with unused "[PAD<id>]" tokens to this
  // many (as llama.cpp's converter pads a vocabulary to the embedding's rows), so a
  // real model's embedding and output sizes can be had without its tokenizer.
  int64_t n_vocab = 0;
  // Tensor data left as holes of a sparse file (all weights zero): full-size shapes
  // in a few MB of disk, for `inspect` and `plan`, not for meaningful output.
  bool sparse = false;
  // DeepSeek2 / Kimi shapes.
  int n_dense_lead = 1;       // leading dense layers
  int n_shared = 1;           // shared experts
  int q_lora_rank = 0;        // 0: no q compression
  int kv_lora_rank = 128;
  int rope_dim = 32;          // qk_rope_head_dim
  int nope_dim = 64;          // qk_nope_head_dim
  int v_head_dim = 64;
  int n_group = 1, n_group_used = 1;
  bool mla_split_kv_b = false;  // write wk_b/wv_b instead of wkv_b
  int nextn = 0;                // deepseek2: multi-token-prediction blocks appended after the trunk (0 or 1)
  // Kimi K3.
  int kda_period = 4;         // every kda_period-th layer is MLA, the rest KDA
  int64_t moe_latent = 0;     // latent MoE width (0: off)
  // Target total size: when > 0, the expert count is raised to reach it.
  uint64_t target_bytes = 0;
  std::string name = "synthetic";
  // Kimi K3 (continued).
  int kda_head_dim = 64;               // KDA head size S (d_inner = n_head * S)
  int d_conv = 4;                      // KDA short-convolution width
  float kda_gate_lower_bound = -5.0f;  // K3's decay-gate formula
  int attn_res_block = 2;              // attention-residual block size (0: plain residuals)
  float situ_beta = 4.0f, situ_linear_beta = 25.0f;
  bool mla_gate = true;                // MLA sigmoid output gate (attn_gate)
  // DeepSeek2 / Kimi K2 (continued).
  float freq_base = 10000.0f;          // rope.freq_base
  float yarn_factor = 0.0f;            // YaRN rope scaling factor (0: no rope scaling)
  int yarn_orig_ctx = 4096;            // rope.scaling.original_context_length
  float yarn_mscale_all_dim = 1.0f;    // written x0.1 as rope.scaling.yarn_log_multiplier
  float routed_scale = 2.5f;           // expert_weights_scale (routed_scaling_factor)
  // Llama: write rope_freqs.weight, random per-pair frequency factors (Llama 3 has
  // such a tensor; Mixtral, and so a Mixtral Hugging Face folder, has none).
  bool rope_freqs = true;
  // Written as tokenizer.chat_template when not empty (replacing the vocabulary's).
  std::string chat_template;
};

// Named presets: "tiny" (per architecture), "qwen3-moe-mini", "kimi-k2-mini",
// "kimi-k3-mini", "mixtral-mini", and the real models' shapes "kimi-k3", "kimi-k2",
// "deepseek-v3" (all layers; --layers picks fewer, each of the real size).
// Returns false if unknown.
bool synth_preset(const std::string& preset, const std::string& arch, SynthSpec* out);
std::vector<std::string> synth_preset_names();

struct SynthReport {
  uint64_t bytes = 0;
  uint64_t expert_bytes = 0;
  int n_expert = 0;
  double seconds = 0;
};

// Writes the model. With spec.target_bytes set, the expert count is first set by
// fit_expert_count (report->n_expert tells what it became).
Status synth_model(const SynthSpec& spec, const std::string& path, ThreadPool& pool, SynthReport* report);

// For spec.target_bytes > 0: sets n_expert (a multiple of the expert groups, at
// least n_used) so that the tensor data comes nearest the target; the header
// (metadata, vocabulary, tensor directory) comes on top. Raises or lowers the
// preset's count. No-op when target_bytes == 0.
Status fit_expert_count(SynthSpec* spec);

// --- internals shared by the per-architecture planners ---

// How a tensor's values are drawn.
enum class Init { Normal, NormWeight, Zero, Bias };
struct TensorPlan {
  std::string name;
  DType type;
  std::vector<int64_t> shape;
  Init init = Init::Normal;
  float std = 0.02f;
  bool expert = false;  // stacked expert tensor (generated per expert)
  // Skew: add dir_scale[i] * u to row i (router rows) or dir to every row (embedding).
  std::vector<float> row_dir;
  bool add_dir_all_rows = false;
  // When non-empty: the tensor's exact values (row-major, all rows), e.g. a score
  // bias that encodes the routing skew. For small tensors.
  std::vector<float> values;
};

struct SynthPlan {
  GGUFFile meta;  // keys (tensors filled from `tensors`)
  std::vector<TensorPlan> tensors;
};

Status plan_qwen3moe(const SynthSpec& s, SynthPlan* p);
Status plan_deepseek2(const SynthSpec& s, SynthPlan* p);
Status plan_kimi_k3(const SynthSpec& s, SynthPlan* p);
Status plan_llama(const SynthSpec& s, SynthPlan* p);
// Each architecture's "tiny" preset from the common tiny shape (model/registry.h).
void tiny_qwen3moe(SynthSpec* s);
void tiny_deepseek2(SynthSpec* s);
void tiny_kimi_k3(SynthSpec* s);
void tiny_llama(SynthSpec* s);

// Tokenizer metadata into `meta` (s.vocab_path's, else the built-in vocabulary,
// padded to s.n_vocab); returns the vocabulary size.
Result<int64_t> synth_vocab(const SynthSpec& s, GGUFFile* meta);
// Zipf-like router offsets for skewed routing (empty when skew == 0).
std::vector<float> synth_router_skew(const SynthSpec& s, int n_expert);
// A matrix type for a tensor of `cols` columns: `want` if its block fits, else F32.
DType fit_type(DType want, int64_t cols);

}  // namespace deltafin
