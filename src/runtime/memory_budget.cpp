#include "runtime/memory_budget.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"
#include "core/platform.h"
#include "core/units.h"

namespace deltafin {

namespace {

constexpr uint64_t kReserveBase = uint64_t(64) << 20;
constexpr double kReserveShare = 0.03;
constexpr uint64_t kResidentPromptCache = uint64_t(1) << 30;
constexpr double MiB = 1024.0 * 1024.0;

std::string human(double b) { return format_bytes(b); }

std::string states_phrase(int n) {
  return n == 1 ? std::string("a sequence state") : fmt::format("{} sequence states", n);
}

// The store's reserve_memory, on the plan's numbers: the spare first, then whole
// slots; false (nothing changed) when no slot would remain.
bool take_from_cache(MemoryPlan& p, uint64_t bytes, uint64_t* taken) {
  const uint64_t from_spare = std::min(bytes, p.spare);
  const uint64_t rest = bytes - from_spare;
  const uint64_t want = p.slot_bytes ? (rest + p.slot_bytes - 1) / p.slot_bytes : 0;
  if (want >= uint64_t(p.slots)) return false;
  p.spare -= from_spare;
  p.slots -= int(want);
  *taken = from_spare + want * p.slot_bytes;
  return true;
}

std::string cache_too_small(const MemoryPlan& p) {
  return fmt::format("more than the expert cache's {:.1f} MiB ({} experts) can give",
                     double(uint64_t(p.slots) * p.slot_bytes + p.spare) / MiB, p.slots);
}

// Lending leaves at least a quarter of the slots (and 8) to the experts (the store's rule).
uint64_t lend_limit(int slots, uint64_t slot_bytes) {
  const int floor = std::min(slots, std::max(8, (slots + 3) / 4));
  return uint64_t(slots - floor) * slot_bytes;
}

}  // namespace

uint64_t available_memory_budget() {
  const platform::MemoryInfo m = platform::memory_info();
  if (m.available) return m.available / 10 * 8;
  return m.total ? m.total / 2 : (uint64_t(4) << 30);
}

uint64_t MemoryPlan::states_bytes() const {
  if (n_states <= 0) return 0;
  return state_bytes > UINT64_MAX / uint64_t(n_states) ? UINT64_MAX : state_bytes * uint64_t(n_states);
}

Result<MemoryPlan> plan_memory(const ModelMemory& m, const MemoryRequest& r) {
  MemoryPlan p;
  p.available = r.available ? r.available : available_memory_budget();
  p.automatic = r.mem == kMemAuto || (m.remote && r.mem == 0);
  p.total = p.automatic ? p.available : r.mem;
  p.core_resident = m.core_bytes;
  p.slot_bytes = m.slot_bytes;
  p.n_experts = m.n_experts;
  p.batch_token_bytes = m.batch_token_bytes;
  // Streaming: a budget was given (or the model is remote), the model has routed
  // experts, and (auto) it does not fit whole.
  p.streaming = m.n_experts > 0 && (r.mem > 0 || m.remote) && !(p.automatic && !m.remote && m.file_bytes <= p.total);
  const uint64_t base = r.reserve ? r.reserve : kReserveBase;
  const double share = r.reserve ? 0.0 : kReserveShare;
  p.reserve = r.reserve ? r.reserve : kReserveBase + uint64_t(double(p.total) * kReserveShare);
  if (!p.streaming) {
    p.experts_resident = m.expert_bytes;
  } else {
    const uint64_t slot = m.slot_bytes;
    const uint64_t least = uint64_t(double(m.core_bytes + base + slot) / (1.0 - share)) + 1;
    // When the core does not fit, its layers stream too: its first layers resident,
    // the others paged per layer (model/core_pager.h). A resident core byte saves a
    // read every token, a cached expert only when a token routes to it (n_used of a
    // layer's experts), so the core comes first: the expert cache keeps two layers'
    // routed experts (the one computing and the one prefetched; at least four) and
    // what the sequence states take from it, the core all the rest.
    const uint64_t avail = p.total > p.reserve ? p.total - p.reserve : 0;
    const SequenceRequest& sq = r.seqs;
    const uint64_t states = sq.n_states > 0 ? m.state_bytes * uint64_t(sq.n_states) : 0;
    const uint64_t states_covered = sq.serving ? 0 : p.reserve / 2;
    const uint64_t paged_cache = uint64_t(std::max(4, 2 * m.n_used)) * slot +
                                 (states > states_covered ? states - states_covered : 0);
    if (p.total >= least) {
      p.expert_cache = p.total - m.core_bytes - p.reserve;
    } else if (avail >= paged_cache + m.core_least) {
      p.expert_cache = paged_cache;
      // What the core may take; CorePager::plan splits it into resident and paged layers.
      p.paged_core = true;
      p.core_resident = std::min(m.core_bytes, avail - paged_cache);
      p.core_paged = m.core_bytes - p.core_resident;
    } else {
      // The least total whose avail holds paged_cache + core_least (the part of the
      // states the reserve does not hold grows as the reserve shrinks).
      const double fixed = double(uint64_t(std::max(4, 2 * m.n_used)) * slot + m.core_least);
      double least_paged = (fixed + double(base)) / (1.0 - share) + 1;
      if (double(states) > (double(base) + share * least_paged) / 2)
        least_paged = (fixed + double(states) + double(base) / 2) / (1.0 - share / 2) + 1;
      const std::string paged = fmt::format(" (or at least {:.1f} MiB to stream the core's layers from the file as "
                                            "well, which is slower)", least_paged / MiB + 0.05);
      return make_error("{}: a memory budget of {:.1f} MiB is too small: the resident core takes {:.1f} MiB, {:.1f} "
                        "MiB is kept for the KV cache and buffers, and one expert takes {:.3f} MiB: give --mem of at "
                        "least {:.1f} MiB{}",
                        m.path, p.total / MiB, m.core_bytes / MiB, p.reserve / MiB, slot / MiB, least / MiB + 0.05,
                        paged);
    }
    const uint64_t n = std::min<uint64_t>(slot ? p.expert_cache / slot : 0, uint64_t(m.n_experts));
    p.slots_built = p.slots = int(n);
    p.spare = p.expert_cache > n * slot ? p.expert_cache - n * slot : 0;
  }

  // The sequences.
  const SequenceRequest& q = r.seqs;
  p.n_ctx = q.n_ctx;
  p.n_states = q.n_states;
  p.serving = q.serving;
  p.state_bytes = q.n_states > 0 ? m.state_bytes : 0;
  const uint64_t all = p.states_bytes();
  const std::string hint =
      q.serving ? "lower -c/--ctx-size or --parallel, or raise --mem" : "lower -c/--ctx-size or raise --mem";
  if (q.n_states > 0 && !p.streaming) {
    // Resident experts: no cache to take the states from, but no more than the
    // machine has either.
    if (all > p.available)
      return make_error("{} of {} positions would take {:.1f} MiB, more than the {:.1f} MiB of memory available; {}",
                        states_phrase(q.n_states), q.n_ctx, double(all) / MiB, double(p.available) / MiB, hint);
  } else if (q.n_states > 0) {
    const uint64_t covered = q.serving ? 0 : p.reserve / 2;
    p.states_in_reserve = std::min(all, covered);
    if (all > covered && !take_from_cache(p, all - covered, &p.states_from_cache))
      return make_error("{} of {} positions take{} {:.1f} MiB{}: {}; {}", states_phrase(q.n_states), q.n_ctx,
                        q.n_states == 1 ? "s" : "", double(all) / MiB,
                        q.n_states == 1 ? std::string() : fmt::format(" ({:.2f} MiB each)", p.state_bytes / MiB),
                        cache_too_small(p), hint);
  }
  if (q.serving && q.prompt_cache > 0) {
    if (!p.streaming) {
      p.prompt_cache = q.prompt_cache == kMemAuto ? kResidentPromptCache : q.prompt_cache;
    } else {
      p.prompt_cache = q.prompt_cache == kMemAuto ? uint64_t(p.slots) * p.slot_bytes / 10 : q.prompt_cache;
      if (!take_from_cache(p, p.prompt_cache, &p.prompt_cache_from_cache))
        return make_error("--prompt-cache-mem {:.1f} MiB: {}; lower it or raise --mem", p.prompt_cache / MiB,
                          cache_too_small(p));
    }
  }
  if (p.streaming) p.prompt_lend = lend_limit(p.slots, p.slot_bytes);
  return p;
}

Result<ModelMemory> model_memory(ModelFile& file, bool remote, int n_ctx, const Model* model) {
  ModelMemory m;
  m.path = file.path();
  m.file_bytes = file.total_bytes();
  m.remote = remote;
  const std::vector<ExpertLayerInfo> layers = find_expert_layers(file);
  if (!layers.empty()) {
    DF_ASSIGN(ExpertIndex ix, ExpertIndex::build(file, layers));
    m.core_bytes = ix.core_bytes();
    m.expert_bytes = ix.expert_bytes();
    m.slot_bytes = expert_slot_bytes(ix);
    m.n_experts = ix.n_keys();
    m.core_least = CorePager::least_bytes(file);
  } else {
    m.core_bytes = m.file_bytes;
  }
  std::unique_ptr<Model> checked;
  if (!model && n_ctx > 0) {
    // The state's size without reading a weight: a model checked, not loaded.
    LoadOptions lo;
    lo.check_only = true;
    if (auto r = load_model(file, std::move(lo)); r.ok()) checked = std::move(r).value();
    model = checked.get();
  }
  if (model && n_ctx > 0) m.state_bytes = model->state_bytes(n_ctx);
  if (model && model->info().n_embd > 0) {
    m.batch_token_bytes = batch_bytes_per_token(model->info());
  } else {
    // A checked model has no info yet: the same product from the metadata.
    const GGUFFile& g = file.meta();
    const std::string arch = g.string_or("general.architecture", "");
    ModelInfo mi;
    mi.n_embd = g.int_or(arch + ".embedding_length", 0);
    mi.n_expert_used = int(g.int_or(arch + ".expert_used_count", 0));
    m.batch_token_bytes = batch_bytes_per_token(mi);
  }
  {
    const GGUFFile& g = file.meta();
    m.n_used = int(g.int_or(g.string_or("general.architecture", "") + ".expert_used_count", 0));
  }
  return m;
}

Result<MemoryPlan> plan_memory(ModelFile& file, const ModelMemory& m, const MemoryRequest& r,
                               std::unique_ptr<CorePager>* pager) {
  DF_ASSIGN(MemoryPlan p, plan_memory(m, r));
  if (p.paged_core) {
    DF_ASSIGN(std::unique_ptr<CorePager> cp, CorePager::plan(file, p.core_resident, m.core_files));
    p.core_resident = cp->stats().resident_bytes;
    p.core_paged = cp->stats().streamed_bytes;
    p.core_reread = cp->stats().reread_bytes;
    if (pager) *pager = std::move(cp);
  }
  return p;
}

Status take_sequence_memory(StreamingExpertStore& store, const MemoryPlan& p) {
  for (uint64_t bytes : {p.states_from_cache, p.prompt_cache_from_cache}) {
    if (bytes == 0) continue;
    auto r = store.reserve_memory(bytes);
    if (!r.ok()) return r.error();
  }
  const int slots = store.stats().slots;
  if (slots != p.slots)
    return make_error("the expert cache has {} slots, not the {} the memory plan counted", slots, p.slots);
  DF_LOG_DEBUG("{} sequence states of {} positions: {:.1f} MiB taken from the expert cache", p.n_states, p.n_ctx,
               p.states_from_cache / MiB);
  return {};
}

uint64_t borrow_for_prompt(StreamingExpertStore& store, const ModelInfo& mi, int64_t pending, int64_t base) {
  if (pending <= base) return 0;
  return store.lend_memory(batch_bytes_per_token(mi) * uint64_t(pending - base));
}

int64_t prompt_step_tokens(const ModelInfo& mi, int64_t pending, int64_t base, uint64_t lent) {
  const int64_t most = base + int64_t(lent / batch_bytes_per_token(mi));
  const int64_t steps = (pending + most - 1) / most;
  return (pending + steps - 1) / steps;
}

std::string format_plan(const MemoryPlan& p) {
  std::string o;
  if (p.total == 0)
    o += "  budget:        none (no --mem): every weight resident\n";
  else if (p.automatic)
    o += fmt::format("  budget:        {} (no --mem: 80% of the {} of RAM available)\n", human(double(p.total)),
                     human(double(p.available) / 0.8));
  else
    o += fmt::format("  budget:        {} (--mem)\n", human(double(p.total)));
  if (p.core_paged > 0)
    o += fmt::format("  core:          {} resident, {} of layers paged from the file per layer ({} read again each "
                     "token)\n", human(double(p.core_resident)), human(double(p.core_paged)),
                     human(double(p.core_reread)));
  else
    o += fmt::format("  core:          {} resident\n", human(double(p.core_resident)));
  if (p.streaming)
    o += fmt::format("  reserve:       {} (KV cache, activations, the program; --reserve)\n", human(double(p.reserve)));
  if (!p.streaming) {
    o += fmt::format("  experts:       {} resident{}\n", human(double(p.experts_resident)),
                     p.total > 0 && p.n_experts > 0 ? " (the whole model fits the budget)" : "");
  } else {
    const double frac = p.n_experts ? double(p.slots_built) / double(p.n_experts) : 1.0;
    o += fmt::format("  expert cache:  {}: {} of {} experts ({:.1f}%), {} a slot\n", human(double(p.expert_cache)),
                     p.slots_built, p.n_experts, frac * 100, human(double(p.slot_bytes)));
  }
  if (p.n_states > 0) {
    o += fmt::format("  sequences:     {} of {} positions, {}{}", p.n_states == 1 ? std::string("1 state")
                                                                                : fmt::format("{} states", p.n_states),
                     p.n_ctx, human(double(p.states_bytes())), p.n_states > 1 ? fmt::format(" ({} each)", human(double(p.state_bytes))) : "");
    if (!p.streaming)
      o += "\n";
    else if (p.states_from_cache == 0)
      o += ": held by the reserve\n";
    else
      o += fmt::format(": {} from the expert cache{}\n", human(double(p.states_from_cache)),
                       p.states_in_reserve ? fmt::format(", {} in the reserve", human(double(p.states_in_reserve)))
                                           : std::string());
  }
  if (p.serving)
    o += fmt::format("  prompt cache:  {}{}\n", human(double(p.prompt_cache)),
                     p.prompt_cache == 0       ? " (off)"
                     : p.prompt_cache_from_cache ? fmt::format(", {} from the expert cache",
                                                               human(double(p.prompt_cache_from_cache)))
                                                 : std::string());
  if (p.streaming) {
    o += fmt::format("  experts kept:  {} slots ({}{})\n", p.slots, human(double(uint64_t(p.slots) * p.slot_bytes)),
                     p.spare ? fmt::format(", and {} spare", human(double(p.spare))) : "");
    o += fmt::format("  long prompts:  a batch may borrow {} of them ({} tokens beyond the automatic batch)\n",
                     human(double(p.prompt_lend)), p.prompt_lend_tokens());
  }
  return o;
}

std::vector<PlanGauge> plan_gauges(const MemoryPlan& p) {
  return {
      {"deltafin_memory_budget_bytes", "The memory budget (--mem, or 80% of the RAM available); 0: none.",
       double(p.total)},
      {"deltafin_memory_reserve_bytes", "Kept for the KV cache, activations and the program (--reserve).",
       double(p.reserve)},
      {"deltafin_memory_core_resident_bytes", "Core weights in RAM.", double(p.core_resident)},
      {"deltafin_memory_core_paged_bytes", "Core weights of layers paged from the file per layer.",
       double(p.core_paged)},
      {"deltafin_memory_experts_resident_bytes", "Routed experts loaded into RAM (not streamed).",
       double(p.experts_resident)},
      {"deltafin_memory_expert_cache_bytes", "RAM given to the expert cache.", double(p.expert_cache)},
      {"deltafin_memory_expert_cache_planned_slots", "Expert slots left after the states and the prompt cache.",
       double(p.slots)},
      {"deltafin_memory_sequence_states", "Sequence states planned (--parallel, and a copy for n choices).",
       double(p.n_states)},
      {"deltafin_memory_sequence_state_bytes", "What one sequence state of -c positions takes at most.",
       double(p.state_bytes)},
      {"deltafin_memory_states_from_cache_bytes", "Of the states, taken out of the expert cache.",
       double(p.states_from_cache)},
      {"deltafin_memory_prompt_cache_bytes", "RAM for finished conversations' states (--prompt-cache-mem).",
       double(p.prompt_cache)},
      {"deltafin_memory_prompt_lend_bytes", "The most a long prompt's batch may borrow from the expert cache.",
       double(p.prompt_lend)},
  };
}

}  // namespace deltafin
