// HTTP range requests: one libcurl multi handle driven by one thread, many
// transfers in flight over reused connections (HTTP/2 multiplexing where the
// server offers it). Every response is checked strictly: 206, a Content-Range that
// names exactly the bytes asked for and the object's pinned size, the pinned ETag,
// exactly the expected length. Transient failures (connection reset, truncated
// body, stall, 5xx, 429, wrong Content-Range) are retried with exponential backoff
// and jitter, resuming from the last byte received; a Retry-After header sets the
// delay. A changed object (ETag or size, or a response without the validator the
// object was pinned by) fails at once: bytes of two revisions are never mixed.
// Every request has an overall deadline, stall_timeout_s + n / min_rate_bps of
// time spent transferring (paused and waiting time excluded) over all its attempts,
// so that an origin trickling bytes cannot hold it forever. A request is complete
// when its n bytes are in, whatever the response's Content-Length still promises.
// Every error names the URL and the byte range.
//
// Priorities: demand transfers start before prefetch transfers, a demand transfer
// counts only other demand transfers against max_in_flight (prefetches never hold
// its slot), and while any demand transfer is running every prefetch transfer is
// paused, so that prefetch never delays a demand fetch nor takes its bandwidth.
//
// Thread safety: every public member may be called from any thread. Completion
// callbacks run on the client's thread and must not block.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/result.h"
#include "io/io_pool.h"

namespace deltafin {

struct HttpOptions {
  double connect_timeout_s = 10;
  double stall_timeout_s = 30;  // a running transfer that receives nothing this long is retried
  int max_attempts = 8;         // per request; attempts that made progress are not counted
  double backoff_base_s = 0.2;  // first retry delay (before jitter), doubled per attempt
  double backoff_max_s = 10;
  double retry_after_max_s = 60;  // a longer Retry-After fails the request
  int max_in_flight = 16;         // transfers running at once
  // Overall deadline of a request of n bytes: stall_timeout_s + n / min_rate_bps
  // seconds of transfer time; 0: none.
  double min_rate_bps = 64 * 1024;
  std::string bearer_token;       // "Authorization: Bearer" (never sent across hosts on redirect)
  // CA certificates (PEM) that https:// servers are verified against, instead of the
  // system's; verification itself is never turned off.
  std::string ca_file;
};

// What every response for an object must match, pinned when it was first opened.
struct HttpIdentity {
  uint64_t size = 0;
  std::string etag;           // empty: the server sent none
  std::string last_modified;  // compared only when there is no ETag
  // Only without either validator: XXH3-64 of the first and last kFingerprintBytes
  // (0: not computed). Checked when the object is opened, not per response.
  uint64_t fingerprint = 0;
  bool has_validator() const { return !etag.empty() || !last_modified.empty(); }
};
constexpr uint64_t kFingerprintBytes = 64 * 1024;

// The answer to a probe (a request for the first byte).
struct HttpProbe {
  HttpIdentity id;
  std::string effective_url;  // after redirects
  std::string repo_commit;    // X-Repo-Commit (Hugging Face), from any response on the way
  long http_version = 0;      // 2 or 3 when multiplexed, else 1
};

// The answer to a plain GET (get_text).
struct HttpText {
  long status = 0;
  std::string body;
  std::string link_next;  // the URL of a Link header's rel="next" (a paginated listing), or ""
};

struct HttpStats {
  uint64_t requests = 0;  // completed requests
  uint64_t attempts = 0;  // HTTP transfers started (retries included)
  uint64_t retries = 0;
  uint64_t bytes = 0;     // body bytes received into destinations
  double busy_s = 0;      // wall time with at least one transfer running
  uint64_t over_http1 = 0, over_http2 = 0, over_http3 = 0;  // completed requests by HTTP version
};

// "HTTP/2" when every completed request used one version, else "HTTP/1.1: 3, HTTP/2: 40"
// ("no requests" when none completed).
std::string http_versions_text(const HttpStats& s);

class HttpClient {
 public:
  explicit HttpClient(HttpOptions opts = {});
  ~HttpClient();  // fails requests still queued or running ("shutting down")
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  using Done = std::function<void(const Status&)>;
  // Fetches bytes [offset, offset + n) of `url` into dst (n >= 1); `pin`: what the
  // object must be (null: no check). Calls done exactly once; dst must stay valid
  // until then. `urgent` (a prefetch only; may be null): once it turns true the
  // transfer counts as a demand transfer (someone now waits for it); call wake().
  void get_range(const std::string& url, uint64_t offset, uint64_t n, char* dst, const HttpIdentity* pin,
                 IoPriority prio, Done done, std::shared_ptr<const std::atomic<bool>> urgent = nullptr);
  // Makes the client's thread look at `urgent` flags now.
  void wake();
  // The same, waiting for the result.
  Status get_range_sync(const std::string& url, uint64_t offset, uint64_t n, char* dst, const HttpIdentity* pin,
                        IoPriority prio = IoPriority::Demand);
  // Asks for the first byte: size, ETag, where redirects lead. `max_attempts` > 0
  // overrides the option (a quick check); `unreachable` (may be null) is set when
  // the request failed because no connection could be made (name resolution,
  // connect, TLS handshake never reached, timeout) rather than by an answer.
  Result<HttpProbe> probe(const std::string& url, int max_attempts = 0, bool* unreachable = nullptr);

  // One plain GET (no range) of a small document such as a JSON listing, outside the
  // range machinery: follows redirects, sends the bearer token (never to another
  // host), retries connection failures, 5xx and 429 as range requests do. Any other
  // status is returned for the caller to judge. A body over `max_bytes` is an error.
  // `unreachable`: as for probe. Blocks; does not count in stats().
  // `max_attempts` > 0 overrides the option.
  Result<HttpText> get_text(const std::string& url, size_t max_bytes = size_t(64) << 20,
                            bool* unreachable = nullptr, int max_attempts = 0);

  HttpStats stats() const;
  const HttpOptions& options() const { return opts_; }

  struct Impl;

 private:
  HttpOptions opts_;
  std::unique_ptr<Impl> impl_;
};

// "https://host/path?query" without user info or query (for messages and cache keys).
std::string redact_url(const std::string& url);

}  // namespace deltafin
