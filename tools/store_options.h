// The memory-budget options shared by run, eval and bench: --mem, --cache-policy,
// --profile, --io-threads; and for remote models the disk cache and network
// options (--cache-dir, --disk-cache, --net-timeout, --net-retries). They fill
// EngineOptions; the Engine plans the memory (runtime/memory_budget.h) and builds the store.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "commands.h"
#include "environment.h"
#include "progress_bar.h"
#include "core/result.h"
#include "runtime/engine.h"

namespace deltafin::tools {

// The disk cache and network options, also used by pull and cache.
struct RemoteCli {
  std::string cache_dir, disk_cache;
  double net_timeout = 30;
  std::string net_min_rate = "64K";
  int net_retries = 8;
  int net_parallel = 16;
  std::string ca_cert;
  bool offline = false;
};

inline void add_remote_options(CLI::App* sub, RemoteCli& o) {
  sub->add_option("--cache-dir", o.cache_dir,
                  "Disk cache for remote models (default: $DELTAFIN_CACHE_DIR, else $XDG_CACHE_HOME/deltafin or "
                  "~/.cache/deltafin; ~/Library/Caches/deltafin on macOS)");
  sub->add_option("--disk-cache", o.disk_cache,
                  "Size budget of the disk cache (e.g. 200G); the least used experts are evicted, never a core "
                  "(default: no limit)");
  sub->add_option("--net-timeout", o.net_timeout, "Seconds without data before a transfer is retried")
      ->capture_default_str();
  sub->add_option("--net-min-rate", o.net_min_rate,
                  "Slowest transfer rate per range request, in bytes/s (e.g. 64K): a request of N bytes fails "
                  "after --net-timeout + N / this many seconds of transfer in all, however the origin trickles "
                  "(0: no such deadline)")
      ->capture_default_str();
  sub->add_option("--net-retries", o.net_retries, "Attempts per range request before giving up")
      ->capture_default_str();
  sub->add_option("--net-parallel", o.net_parallel, "Range requests in flight at most")->capture_default_str();
  sub->add_option("--ca-cert", o.ca_cert,
                  "CA certificates (PEM) to verify https:// origins with instead of the system's (default: "
                  "$CURL_CA_BUNDLE, else $SSL_CERT_FILE, else the system's)");
}

inline Status apply_remote_options(const RemoteCli& o, RemoteOptions* ro) {
  ro->cache_dir = o.cache_dir.empty() ? environment().cache_dir : o.cache_dir;
  if (!o.disk_cache.empty() && !parse_size(o.disk_cache, &ro->disk_budget))
    return make_error("bad --disk-cache '{}' (expected a size such as 200G)", o.disk_cache);
  if (!(o.net_timeout > 0)) return make_error("--net-timeout must be positive");
  if (o.net_retries < 1) return make_error("--net-retries must be at least 1");
  uint64_t min_rate = 0;
  if (!parse_size(o.net_min_rate, &min_rate))
    return make_error("bad --net-min-rate '{}' (expected a rate in bytes/s such as 64K, or 0)", o.net_min_rate);
  ro->http.min_rate_bps = double(min_rate);
  ro->http.stall_timeout_s = o.net_timeout;
  ro->http.max_attempts = o.net_retries;
  ro->http.max_in_flight = std::max(1, o.net_parallel);
  ro->offline = o.offline;
  ro->http.ca_file = o.ca_cert.empty() ? environment().ca_bundle : o.ca_cert;
  // Checked when an https:// origin is opened: a local model does not care.
  return {};
}

struct StoreCli {
  std::string mem, reserve, policy = "lfu", profile, prefetch = "auto", core_type;
  int io_threads = 0;
  bool verify = false;
  RemoteCli remote;
};

inline void add_store_options(CLI::App* sub, StoreCli& o) {
  sub->add_option("--mem", o.mem,
                  "Memory for everything deltafin uses (e.g. 8G): the core stays resident, the rest caches "
                  "experts streamed from disk (default: 80% of available RAM; streams only if the model does not fit)");
  sub->add_option("--reserve", o.reserve,
                  "Part of --mem kept for the KV cache, activations and the program (default 64M + 3% of --mem)");
  sub->add_option("--cache-policy", o.policy, "Expert cache eviction: lfu (frequency with aging) or lru")
      ->check(CLI::IsMember({"lfu", "lru"}))
      ->capture_default_str();
  sub->add_option("--profile", o.profile,
                  "Expert usage profile that warms the cache (default: ~/.cache/deltafin/profiles/; 'none': off)");
  sub->add_option("--prefetch", o.prefetch,
                  "Next-layer expert prefetch: auto (per layer, while what it reads gets used), on, or off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  sub->add_option("--io-threads", o.io_threads, "Expert reads in flight at most (default 16)");
  sub->add_flag("--verify", o.verify,
                "Local models whose experts stream: check every expert read again against a checksum of its first "
                "read, so that a model file changed under the run stops it with an error (remote models' disk "
                "cache always checks)");
  sub->add_option("--core-type", o.core_type,
                  "Re-encode the core (every tensor but the routed experts) once to this type (Q8_0, Q4_K, ...) "
                  "into the cache directory and run on it: a smaller core stays resident where the model's own "
                  "would page; the experts are untouched. Changes the output (the core is no longer the model's "
                  "own weights). Local models: .gguf files and Hugging Face folders");
  add_remote_options(sub, o.remote);
  sub->add_flag("--offline", o.remote.offline,
                "Remote models: never contact the origin; use the core and experts in the disk cache (an expert "
                "that is not cached is an error naming it). Without it, an unreachable origin falls back to the "
                "cache on its own");
}

// `default_profile`: the profile when --profile is not given ("auto" or "").
inline Status apply_store_options(const StoreCli& o, EngineOptions* eo, const char* default_profile = "auto") {
  if (o.mem.empty()) {
    eo->mem_bytes = EngineOptions::kMemAuto;
  } else if (!parse_size(o.mem, &eo->mem_bytes) || eo->mem_bytes == 0) {
    return make_error("bad --mem '{}' (expected a size such as 8G or 512M)", o.mem);
  }
  if (!o.reserve.empty() && (!parse_size(o.reserve, &eo->reserve_bytes) || eo->reserve_bytes == 0))
    return make_error("bad --reserve '{}' (expected a size such as 256M)", o.reserve);
  if (!parse_cache_policy(o.policy, &eo->stream.policy)) return make_error("bad --cache-policy '{}'", o.policy);
  if (!parse_prefetch_mode(o.prefetch, &eo->stream.prefetch)) return make_error("bad --prefetch '{}'", o.prefetch);
  eo->stream.profile_path = o.profile.empty() ? default_profile : o.profile == "none" ? "" : o.profile;
  if (o.io_threads > 0) eo->stream.io_threads = o.io_threads;
  eo->stream.verify = o.verify;
  eo->core_type = o.core_type;
  eo->verify_core = o.verify;
  DF_TRY(apply_remote_options(o.remote, &eo->remote));
  eo->env = environment();
  eo->progress = terminal_progress();
  return {};
}

}  // namespace deltafin::tools
