// What a machine will do with a model, predicted from its sizes, the memory plan and
// three rates (disk reads, the network link, the CPU's weight throughput): the
// arithmetic behind `deltafin plan`. Pure functions of numbers, so unit tests feed
// them numbers; runtime/probe.h measures the rates, tools/cmd_plan.cpp prints.
//
// Decode, per token:
//   misses  = used experts per token x MoE layers x (1 - hit rate)
//   I/O     = misses x expert bytes / read rate (disk, or the link for the share of a
//             remote model's experts not yet in its disk cache)
//             + paged core bytes / disk rate (layers paged per token)
//   compute = core bytes touched / core rate + used experts' bytes / expert rate
//   seconds = max(expert I/O + compute, I/O): an MoE layer waits for its experts'
//             reads before it finishes, while the paged core's reads run two layers
//             ahead, behind both, and the disk shares its rate among all the reads
//             (without a paged core: expert I/O + compute); max(I/O, compute) is the
//             bound were every read overlapped with compute (perfect prefetch).
// Speculation with one drafted token accepted with probability p: a pass verifies two
// tokens (the union of their experts, the weights read once) and yields 1 + p tokens;
// the drafter's own cost is left out.
// Prefill of N tokens in batches of B: each batch reads the union of its tokens'
// experts that are not cached; compute at the batched rate for the core, and for the
// experts once each gets 4 tokens of a batch on average (else the per-token rate).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "runtime/memory_budget.h"

namespace deltafin {

struct PredictInput {
  // The model
  int moe_layers = 0;             // layers with routed experts
  int experts_per_layer = 0;      // routed experts per MoE layer
  int experts_used = 0;           // routed experts per token per layer
  uint64_t expert_bytes = 0;      // one expert's bytes read on a miss (its aligned slot)
  uint64_t expert_compute_bytes = 0;  // one expert's weight bytes (gate+up+down)
  uint64_t core_bytes = 0;        // all of the core
  uint64_t core_touched = 0;      // core bytes a token reads (all but the embedding table)
  // The plan
  bool streaming = false;
  double hit_rate = 1;            // of expert lookups (1 when nothing streams)
  uint64_t core_paged = 0;        // core bytes paged per token from the file
  uint64_t core_cold = 0;         // core bytes read at start (resident part)
  bool remote = false;
  double on_disk = 1;             // remote: share of the experts already in the disk cache
  uint64_t remote_core_missing = 0;  // remote: core bytes not yet in the disk cache
  // Rates, bytes/s
  double disk_bps = 0;            // random reads at the expert size, 16 in flight
  double link_bps = 0;            // remote models
  double core_bps = 0;            // weight bytes/s of one-token matrix products, core types
  double expert_bps = 0;          // the same for the experts' type
  double batch_bps = 0;           // weight bytes x tokens / s of batched products (prefill)
  // Workload
  int prefill_tokens = 0;
  int batch = 512;
  double spec_accept = 0.6;       // acceptance of one drafted token
};

struct Prediction {
  double misses_per_token = 0;     // expert reads per token
  double read_bytes_per_token = 0; // experts and paged core
  double io_s = 0;                 // decode, per token
  double compute_s = 0;
  double seconds_per_token = 0;    // max(expert io + compute, io) (the prediction)
  double overlap_seconds_per_token = 0;  // max(io, compute)
  double tokens_per_second = 0;
  double spec_seconds_per_token = 0;     // with one drafted token at spec_accept
  double spec_tokens_per_second = 0;
  double prefill_s = 0;                  // prefill_tokens
  double cold_start_s = 0;               // the core to RAM (and to the disk cache first, remote)
};

Prediction predict(const PredictInput& in);

// Expected distinct experts of `n` that `k` tokens each choosing `used` at random touch.
double expected_distinct(int n, int used, int k);

// Hit rate of a cache of `slots` experts out of `total` under uniform routing.
double uniform_hit_rate(int slots, int total);

// Hit rate from an expert usage profile (store/streaming_store.h's format): the share
// of recorded uses that fall on the `slots` most used experts (what an LFU cache warmed
// from the profile keeps). `identity` is the second line the store writes for this
// model (usage_profile_identity, store/usage_profile.h); an error when the text is not
// a profile of this model or records no use.
Result<double> profile_hit_rate(const std::string& text, const std::string& identity, int slots);

// The plan in one line for run's start when experts stream: the budget, the core,
// the experts the cache holds and the hit rate uniform routing gives.
std::string plan_line(const MemoryPlan& p);

}  // namespace deltafin
