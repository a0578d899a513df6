#include "server/metrics.h"

#include <fmt/format.h>

namespace deltafin::server {

void Metrics::count_response(const std::string& path, int status) {
  // Endpoints by name; anything else is one label so odd paths cannot grow the map.
  static const char* known[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"};
  std::string ep = "other";
  for (const char* k : known)
    if (path == k) ep = k;
  if (path.rfind("/v1/models/", 0) == 0) ep = "/v1/models";
  std::lock_guard<std::mutex> lk(mu_);
  ++responses_[{ep, status}];
}

namespace {
void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
}
}  // namespace

std::string Metrics::render(const SchedulerStats& s, const StreamingExpertStore* store,
                            const MemoryPlan* plan) const {
  std::string o;
  metric(o, "deltafin_prompt_tokens_total", "counter", "Prompt tokens evaluated.", double(s.prompt_tokens));
  metric(o, "deltafin_prompt_cache_tokens_total", "counter",
         "Prompt tokens taken from the prompt cache (a kept state), not evaluated.", double(s.cached_prompt_tokens));
  metric(o, "deltafin_prompt_cache_hits_total", "counter", "Requests that took a kept state from the prompt cache.",
         double(s.prompt_cache_hits));
  metric(o, "deltafin_prompt_cache_parked_states", "gauge",
         "Finished requests' states parked in RAM beyond the batch places (--prompt-cache-mem).", double(s.parked));
  metric(o, "deltafin_prompt_cache_parked_bytes", "gauge", "Memory of the parked states.", double(s.parked_bytes));
  metric(o, "deltafin_prompt_cache_disk_states", "gauge", "States in the prompt cache's disk tier (--prompt-cache-dir).",
         double(s.disk_states));
  metric(o, "deltafin_prompt_cache_disk_bytes", "gauge", "Bytes of the disk tier's states.", double(s.disk_bytes));
  metric(o, "deltafin_prompt_cache_disk_hits_total", "counter", "Requests that resumed from a state on disk.",
         double(s.prompt_cache_disk_hits));
  metric(o, "deltafin_prefill_lent_bytes", "gauge",
         "Expert cache memory lent now to the prompts' steps (while no sequence decodes).",
         double(s.prefill_lent_bytes));
  metric(o, "deltafin_generated_tokens_total", "counter", "Tokens generated.", double(s.generated_tokens));
  metric(o, "deltafin_prefill_seconds_total", "counter",
         "Forward-pass time spent on prompt tokens (each step split by its rows).", s.prefill_s);
  metric(o, "deltafin_decode_seconds_total", "counter",
         "Forward-pass time spent on generated tokens (each step split by its rows).", s.decode_s);
  metric(o, "deltafin_prompt_tokens_per_second", "gauge", "Prompt tokens per second of prefill time.",
         s.prefill_s > 0 ? double(s.prompt_tokens) / s.prefill_s : 0.0);
  metric(o, "deltafin_decode_tokens_per_second", "gauge", "Tokens generated per second over the last 5 seconds.",
         s.recent_tokens_per_s);
  metric(o, "deltafin_batch_steps_total", "counter", "Batched forward passes.", double(s.steps));
  metric(o, "deltafin_batch_rows_total", "counter", "Token rows evaluated over all batched passes.",
         double(s.batch_rows));
  metric(o, "deltafin_spec_drafted_tokens_total", "counter",
         "Guessed tokens verified in batched passes (prompt-lookup speculation).", double(s.drafted));
  metric(o, "deltafin_spec_accepted_tokens_total", "counter", "Guessed tokens the model agreed with (kept).",
         double(s.accepted));
  metric(o, "deltafin_spec_literal_drafted_tokens_total", "counter",
         "Of the guessed tokens, a constrained reply's certain literal text (a call's closing tags).",
         double(s.literal_drafted));
  metric(o, "deltafin_spec_literal_accepted_tokens_total", "counter", "Of those, the ones the model agreed with.",
         double(s.literal_accepted));
  metric(o, "deltafin_tool_calls_total", "counter", "Tool calls read from replies.", double(tool_calls_.load()));
  metric(o, "deltafin_structured_requests_total", "counter",
         "Requests whose reply was constrained (response_format JSON, or a forced tool call).",
         double(structured_.load()));
  metric(o, "deltafin_requests_running", "gauge", "Requests in the batch now.", double(s.active));
  metric(o, "deltafin_queue_depth", "gauge", "Requests waiting for a place in the batch.", double(s.queued));
  o += "# HELP deltafin_generations_total Generations ended, by how.\n# TYPE deltafin_generations_total counter\n";
  o += fmt::format("deltafin_generations_total{{result=\"finished\"}} {}\n", s.finished);
  o += fmt::format("deltafin_generations_total{{result=\"cancelled\"}} {}\n", s.cancelled);
  o += fmt::format("deltafin_generations_total{{result=\"error\"}} {}\n", s.failed);
  {
    std::lock_guard<std::mutex> lk(mu_);
    o += "# HELP deltafin_http_responses_total HTTP responses by endpoint and status.\n"
         "# TYPE deltafin_http_responses_total counter\n";
    for (auto& [k, n] : responses_)
      o += fmt::format("deltafin_http_responses_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, n);
  }
  if (store) {
    const StoreStats st = store->stats();
    o += "# HELP deltafin_expert_cache_lookups_total Expert lookups by tier that served them.\n"
         "# TYPE deltafin_expert_cache_lookups_total counter\n";
    o += fmt::format("deltafin_expert_cache_lookups_total{{tier=\"ram\"}} {}\n", st.hits);
    o += fmt::format("deltafin_expert_cache_lookups_total{{tier=\"disk\"}} {}\n", st.misses);
    metric(o, "deltafin_expert_cache_prefetch_hits_total", "counter", "RAM hits on experts a prefetch brought in.",
           double(st.prefetch_hits));
    metric(o, "deltafin_expert_cache_evictions_total", "counter", "Experts evicted from the RAM cache.",
           double(st.evictions));
    metric(o, "deltafin_expert_reads_total", "counter", "Experts read from disk on demand.", double(st.reads));
    metric(o, "deltafin_expert_prefetch_reads_total", "counter", "Experts read from disk by prefetch.",
           double(st.prefetch_reads));
    metric(o, "deltafin_expert_read_bytes_total", "counter", "Bytes read from disk for experts.",
           double(st.bytes_read));
    metric(o, "deltafin_expert_read_busy_seconds_total", "counter", "Time with at least one expert read in flight.",
           st.read_busy_s);
    metric(o, "deltafin_expert_wait_seconds_total", "counter", "Time the forward pass waited for experts.", st.wait_s);
    metric(o, "deltafin_expert_cache_hit_ratio", "gauge", "RAM hits over lookups.", st.hit_rate());
    metric(o, "deltafin_expert_cache_slots", "gauge", "Experts the RAM cache holds at most.", double(st.slots));
    metric(o, "deltafin_expert_cache_cached", "gauge", "Experts in RAM now.", double(st.cached));
    metric(o, "deltafin_expert_cache_slot_bytes", "gauge", "Bytes per cache slot.", double(st.slot_bytes));
  }
  if (plan)
    for (const PlanGauge& g : plan_gauges(*plan)) metric(o, g.name, "gauge", g.help, g.value);
  return o;
}

}  // namespace deltafin::server
