// What the architecture files share: their includes, the loaders they register
// and helpers for the steps every forward pass has (token checks, the output head,
// attaching the expert store).
#pragma once
#include <algorithm>
#include <vector>

#include "core/aligned.h"
#include "model/attention.h"
#include "model/hparams.h"
#include "model/linear.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/ops.h"
#include "model/weights.h"

namespace deltafin {

// One loader per architecture file.
Result<std::unique_ptr<Model>> load_qwen3moe(ModelFile& file, LoadOptions& opts);
Result<std::unique_ptr<Model>> load_deepseek2(ModelFile& file, LoadOptions& opts);
Result<std::unique_ptr<Model>> load_kimi_k3(ModelFile& file, LoadOptions& opts);
Result<std::unique_ptr<Model>> load_llama(ModelFile& file, LoadOptions& opts);

// Token ids in range and room left in the context.
Status check_tokens(const int32_t* tokens, int n, int64_t n_vocab, const SeqState& st);

// Every slice's tokens (as check_tokens) and no state twice.
Status check_batch(std::span<const BatchSlice> slices, int64_t n_vocab);

// The rows of a batched pass: every slice's tokens back to back.
struct BatchRows {
  int n = 0;                // rows in all
  std::vector<int> row0;    // per slice: its first row
  std::vector<int> pos;     // per row: its position in its own sequence
  explicit BatchRows(std::span<const BatchSlice> slices);
};

// Final norm + output head of a batched pass: each slice's last row (or all its rows)
// through one matmul, scattered into the slices' logits. x: [rows.n, n_embd].
void output_logits_batch(ThreadPool* pool, const float* x, std::span<const BatchSlice> slices,
                         const BatchRows& rows, int64_t n_embd, const float* norm_w, float eps,
                         const Tensor& output, int64_t n_vocab);

// Final norm + output head for the last token or every token. x: [n, n_embd].
void output_logits(ThreadPool* pool, const float* x, int n, int64_t n_embd, const float* norm_w,
                   float eps, const Tensor& output, bool all_logits, float* logits);

// Uses opts.experts if given, else loads every expert resident; fills the expert
// fields of `info`.
Status attach_experts(ModelFile& file, LoadOptions& opts, std::unique_ptr<ExpertStore>* out,
                      ModelInfo* info);

}  // namespace deltafin
