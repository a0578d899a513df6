// The memory planner: the one place that turns --mem, --reserve and a model into
// numbers, and the only caller of the expert store's reserve_memory/lend_memory.
//
//   budget (--mem, or 80% of the RAM available)
//     = core (resident; or its first layers resident, the rest paged per layer)
//     + reserve (KV cache, activations, the program; --reserve, default 64 MiB + 3%)
//     + expert cache (whole slots of one expert each)
//   and out of the expert cache, once the model is loaded:
//     sequence states beyond what half the reserve holds (a command's one state),
//     or all of them (a server's batch), then a server's prompt cache;
//     a long prompt's batch borrows at most 3/4 of the slots left, while it runs.
//
// plan_memory() is pure arithmetic over a ModelMemory and a MemoryRequest (unit
// tests feed it numbers); the ModelFile overload reads the sizes from the headers.
// The Engine builds its store from the plan and applies the sequence part;
// inspect, --stats and /metrics print the same MemoryPlan (format_plan, plan_gauges).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "format/model_file.h"
#include "model/core_pager.h"
#include "model/model.h"
#include "store/streaming_store.h"

namespace deltafin {

// --mem not given: a share of the RAM available, streaming only when the model does not fit.
inline constexpr uint64_t kMemAuto = ~uint64_t(0);

// A safe share of the RAM available now (80% of MemAvailable).
uint64_t available_memory_budget();

// What a model takes, from its headers (no weight is read).
struct ModelMemory {
  std::string path;             // for messages
  uint64_t file_bytes = 0;
  uint64_t core_bytes = 0;      // everything but the routed experts
  uint64_t expert_bytes = 0;    // the routed experts
  uint64_t slot_bytes = 0;      // one expert cache slot (expert_slot_bytes: aligned ranges)
  int n_experts = 0;            // routed experts of all layers (0: a dense model)
  int n_used = 0;               // routed experts a token uses in one layer
  uint64_t core_least = 0;      // least RAM a paged core needs (CorePager::least_bytes)
  uint64_t state_bytes = 0;     // one sequence state of SequenceRequest::n_ctx positions
  uint64_t batch_token_bytes = 0;  // one prompt token in a batched pass (batch_bytes_per_token)
  bool remote = false;          // experts come through a disk cache: always streamed
  std::vector<std::string> core_files;  // per part, a local file with its core at its offsets (remote: the disk cache's)
};

// The sequences a command decodes at once, each of n_ctx positions.
struct SequenceRequest {
  int n_ctx = 0;
  int n_states = 0;  // 0: none planned
  // A server: every state comes out of the expert cache (its reserve is for the
  // batch's activations), and so does its prompt cache. A command's one state is
  // held by half the reserve, only the rest taken from the cache.
  bool serving = false;
  uint64_t prompt_cache = 0;  // serving: --prompt-cache-mem; kMemAuto: a tenth of the cache left (1 GiB resident)
};

// What the command asks for.
struct MemoryRequest {
  uint64_t mem = 0;        // --mem; kMemAuto; 0: no budget (a local model stays resident)
  uint64_t reserve = 0;    // --reserve; 0: 64 MiB + 3% of the budget
  uint64_t available = 0;  // RAM available (available_memory_budget()); 0: read it
  SequenceRequest seqs;
};

struct MemoryPlan {
  // The budget
  bool automatic = false;   // no --mem: 80% of the RAM available
  uint64_t available = 0;   // 80% of the RAM available when planned (the automatic budget)
  uint64_t total = 0;       // the budget; 0: none (every weight resident)
  bool streaming = false;   // routed experts stream through the expert cache; else all resident
  uint64_t reserve = 0;     // KV cache, activations, the program
  // Weights
  uint64_t core_resident = 0;  // core bytes read into RAM (all of the core unless paged)
  uint64_t core_paged = 0;     // core bytes of the layers that stream through the pager's layer buffers
  uint64_t core_reread = 0;    // of those, read again every token (a layer alone in its buffer stays)
  bool paged_core = false;     // the core does not fit: CorePager::plan(core_resident) splits it
  uint64_t experts_resident = 0;  // routed experts loaded into RAM (not streaming)
  // The expert cache as built
  uint64_t expert_cache = 0;   // bytes given to the store
  uint64_t slot_bytes = 0;
  int n_experts = 0;
  int slots_built = 0;         // slots of expert_cache (at most n_experts)
  uint64_t spare = 0;          // expert_cache beyond its whole slots
  // Sequences (n_states 0: none planned)
  int n_ctx = 0;
  int n_states = 0;
  bool serving = false;
  uint64_t state_bytes = 0;        // one state
  uint64_t states_in_reserve = 0;  // of all states, what the reserve holds
  uint64_t states_from_cache = 0;  // taken out of the expert cache (spare, then whole slots)
  uint64_t prompt_cache = 0;       // serving: RAM for finished conversations' states
  uint64_t prompt_cache_from_cache = 0;
  // What the experts keep, and what a long prompt may borrow of it
  int slots = 0;                   // slots left for experts
  uint64_t batch_token_bytes = 0;
  uint64_t prompt_lend = 0;        // most a long prompt's batch borrows (3/4 of the slots, whole slots)

  uint64_t states_bytes() const;   // n_states x state_bytes (saturating)
  uint64_t prompt_lend_tokens() const { return batch_token_bytes ? prompt_lend / batch_token_bytes : 0; }
};

// The plan, or an error naming the sizes and what to change.
Result<MemoryPlan> plan_memory(const ModelMemory& m, const MemoryRequest& r);

// A model's sizes from its headers; state_bytes for n_ctx (> 0) from `model`, else
// from a model checked but not loaded.
Result<ModelMemory> model_memory(ModelFile& file, bool remote, int n_ctx, const Model* model = nullptr);

// plan_memory for a file; a paged core's split filled in from CorePager::plan, whose
// pager is handed out in *pager when asked for.
Result<MemoryPlan> plan_memory(ModelFile& file, const ModelMemory& m, const MemoryRequest& r,
                               std::unique_ptr<CorePager>* pager = nullptr);

// Applies the sequence part of `plan` to the store built from it (the states, then the
// prompt cache, out of the cache). An error when the store does not end as planned.
Status take_sequence_memory(StreamingExpertStore& store, const MemoryPlan& plan);

// A long prompt's batch: lends the activations of the tokens beyond `base` (the
// automatic batch) from the expert cache; returns the bytes lent (return_memory()
// gives them back).
uint64_t borrow_for_prompt(StreamingExpertStore& store, const ModelInfo& mi, int64_t pending, int64_t base);
// Tokens per pass over `pending` prompt tokens: base plus what `lent` bytes hold, in
// equal passes.
int64_t prompt_step_tokens(const ModelInfo& mi, int64_t pending, int64_t base, uint64_t lent);

// The plan as text, one item a line, each starting "  " (inspect, --stats).
std::string format_plan(const MemoryPlan& p);
// The plan as gauges for /metrics: name (deltafin_memory_*), help, value.
struct PlanGauge {
  const char* name;
  const char* help;
  double value;
};
std::vector<PlanGauge> plan_gauges(const MemoryPlan& p);

}  // namespace deltafin
