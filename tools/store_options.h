// The memory-budget options shared by run, eval and bench: --mem, --cache-policy,
// --profile, --io-threads. They fill EngineOptions; the Engine builds the store.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "commands.h"
#include "core/result.h"
#include "runtime/engine.h"

namespace deltafin::tools {

struct StoreCli {
  std::string mem, policy = "lfu", profile;
  int io_threads = 0;
};

inline void add_store_options(CLI::App* sub, StoreCli& o) {
  sub->add_option("--mem", o.mem,
                  "Memory for everything deltafin uses (e.g. 8G): the core stays resident, the rest caches "
                  "experts streamed from disk (default: 80% of available RAM; streams only if the model does not fit)");
  sub->add_option("--cache-policy", o.policy, "Expert cache eviction: lfu (frequency with aging) or lru")
      ->check(CLI::IsMember({"lfu", "lru"}))
      ->capture_default_str();
  sub->add_option("--profile", o.profile,
                  "Expert usage profile that warms the cache (default: ~/.cache/deltafin/profiles/; 'none': off)");
  sub->add_option("--io-threads", o.io_threads, "Expert reads in flight at most (default 16)");
}

// `default_profile`: the profile when --profile is not given ("auto" or "").
inline Status apply_store_options(const StoreCli& o, EngineOptions* eo, const char* default_profile = "auto") {
  if (o.mem.empty()) {
    eo->mem_bytes = EngineOptions::kMemAuto;
  } else if (!parse_size(o.mem, &eo->mem_bytes) || eo->mem_bytes == 0) {
    return make_error("bad --mem '{}' (expected a size such as 8G or 512M)", o.mem);
  }
  if (!parse_cache_policy(o.policy, &eo->stream.policy)) return make_error("bad --cache-policy '{}'", o.policy);
  eo->stream.profile_path = o.profile.empty() ? default_profile : o.profile == "none" ? "" : o.profile;
  if (o.io_threads > 0) eo->stream.io_threads = o.io_threads;
  return {};
}

}  // namespace deltafin::tools
