// Counters for /metrics and their Prometheus text form (text exposition format
// 0.0.4): HTTP responses by status, the scheduler's tokens and times, the expert
// cache tiers when experts stream, and the memory plan (runtime/memory_budget.h).
// Thread-safe.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "runtime/memory_budget.h"
#include "runtime/scheduler.h"
#include "store/streaming_store.h"

namespace deltafin::server {

class Metrics {
 public:
  void count_response(const std::string& path, int status);
  void count_tool_calls(size_t n) { tool_calls_ += n; }  // calls read from replies
  void count_structured() { ++structured_; }             // requests constrained to JSON (or a call)
  // store may be null (experts resident), plan null (not planned).
  std::string render(const SchedulerStats& s, const StreamingExpertStore* store,
                     const MemoryPlan* plan = nullptr) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;  // (endpoint, status) -> count
  std::atomic<uint64_t> tool_calls_{0}, structured_{0};
};

}  // namespace deltafin::server
