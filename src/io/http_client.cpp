#include "io/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/log.h"

namespace deltafin {

namespace {

using Clock = std::chrono::steady_clock;

// What every request of ours sets alike: redirects (HTTP(S) only), the connect
// timeout, no signals, our user agent, the CA bundle.
void set_common_options(CURL* e, const HttpOptions& o) {
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, long(o.connect_timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "deltafin/0.1");
  if (!o.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, o.ca_file.c_str());
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// One request, across its attempts.
struct Transfer {
  // What was asked.
  std::string url;
  uint64_t offset = 0, n = 0;
  char* dst = nullptr;
  bool has_pin = false;
  HttpIdentity pin;
  IoPriority prio = IoPriority::Demand;
  std::shared_ptr<const std::atomic<bool>> urgent;  // a prefetch promoted to demand once true
  HttpClient::Done done;
  HttpProbe* probe = nullptr;  // a probe: fill in what the response says
  int max_attempts = 0;        // > 0: overrides the option
  bool* unreachable = nullptr; // set if the last attempt made no connection
  // Progress over attempts.
  uint64_t got = 0;  // bytes [offset, offset + got) are in dst
  int attempts = 0;  // attempts that failed without progress
  Clock::time_point not_before{};
  // The current attempt.
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};
  long status = 0;
  std::string content_range, etag, last_modified, retry_after;
  bool checked = false;        // the response head passed validation
  std::string fail;            // why the attempt was aborted
  bool fail_permanent = false;
  uint64_t got_at_start = 0;
  Clock::time_point last_data;
  bool paused = false;
  // Transfer time over all attempts (running and not paused), for the deadline.
  double spent_s = 0;
  Clock::time_point run_since;

  double spent_now(Clock::time_point now) const {
    return spent_s + (easy && !paused ? std::chrono::duration<double>(now - run_since).count() : 0.0);
  }

  bool is_demand() const { return prio == IoPriority::Demand || (urgent && urgent->load()); }
  std::string range_text() const { return fmt::format("bytes {}-{}", offset, offset + n - 1); }
};

bool parse_content_range(const std::string& v, uint64_t* a, uint64_t* b, uint64_t* total) {
  unsigned long long x = 0, y = 0, z = 0;
  int used = 0;
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%llu%n", &x, &y, &z, &used) != 3 || size_t(used) != v.size())
    return false;
  *a = x;
  *b = y;
  *total = z;
  return x <= y && y < z;
}

}  // namespace

std::string redact_url(const std::string& url) {
  std::string u = url.substr(0, url.find_first_of("?#"));
  size_t scheme = u.find("://");
  if (scheme != std::string::npos) {
    size_t host = scheme + 3, slash = u.find('/', host), at = u.find('@', host);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) u.erase(host, at + 1 - host);
  }
  return u;
}

struct HttpClient::Impl {
  HttpOptions opts;
  CURLM* multi = nullptr;
  std::string auth_header;
  std::thread thread;

  mutable std::mutex mu;
  std::deque<std::unique_ptr<Transfer>> incoming;
  bool stop = false;
  HttpStats st;
  bool busy = false;
  Clock::time_point busy_since;

  // Loop thread only.
  std::vector<std::unique_ptr<Transfer>> waiting;  // new, or waiting to retry
  std::map<CURL*, std::unique_ptr<Transfer>> active;
  std::mt19937_64 rng{std::random_device{}()};

  explicit Impl(HttpOptions o) : opts(std::move(o)) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, long(CURLPIPE_MULTIPLEX));
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, long(std::max(4, 2 * opts.max_in_flight)));
    if (!opts.bearer_token.empty()) auth_header = "Authorization: Bearer " + opts.bearer_token;
    thread = std::thread([this] { loop(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    curl_multi_wakeup(multi);
    thread.join();
    curl_multi_cleanup(multi);
  }

  void submit(std::unique_ptr<Transfer> t) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!stop) {
        incoming.push_back(std::move(t));
        t = nullptr;
      }
    }
    if (t) {
      t->done(make_error("GET {} {}: the HTTP client is shutting down", redact_url(t->url), t->range_text()));
      return;
    }
    curl_multi_wakeup(multi);
  }

  // --- the loop thread ---

  void loop() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (stop) break;
        while (!incoming.empty()) {
          waiting.push_back(std::move(incoming.front()));
          incoming.pop_front();
        }
      }
      start_ready();
      apply_pauses();
      int running = 0;
      curl_multi_perform(multi, &running);
      reap();
      check_stalls();
      update_busy();
      curl_multi_poll(multi, nullptr, 0, poll_timeout_ms(), nullptr);
    }
    // Shutting down: fail what is left.
    std::vector<std::unique_ptr<Transfer>> left = std::move(waiting);
    for (auto& [e, t] : active) {
      curl_multi_remove_handle(multi, e);
      cleanup_attempt(*t);
      left.push_back(std::move(t));
    }
    active.clear();
    {
      std::lock_guard<std::mutex> lk(mu);
      for (auto& t : incoming) left.push_back(std::move(t));
      incoming.clear();
    }
    for (auto& t : left)
      t->done(make_error("GET {} {}: the HTTP client is shutting down", redact_url(t->url), t->range_text()));
  }

  int poll_timeout_ms() const {
    auto now = Clock::now();
    int ms = 100;
    for (const auto& t : waiting) {
      if (t->not_before <= now) continue;
      ms = std::min<int>(ms, int(std::chrono::duration_cast<std::chrono::milliseconds>(t->not_before - now).count()) + 1);
    }
    return std::max(ms, 1);
  }

  bool demand_running() const {
    for (const auto& [e, t] : active)
      if (t->is_demand()) return true;
    return false;
  }

  int active_demand() const {
    int n = 0;
    for (const auto& [e, t] : active) n += t->is_demand();
    return n;
  }

  // Starts waiting transfers whose time has come: demand first; prefetch only while
  // no demand transfer runs. Only demand transfers count against a demand
  // transfer's limit: prefetch transfers filling every slot (paused as soon as a
  // demand transfer runs) never hold one back.
  void start_ready() {
    const auto now = Clock::now();
    for (IoPriority p : {IoPriority::Demand, IoPriority::Prefetch}) {
      if (p == IoPriority::Prefetch && demand_running()) return;
      int running = p == IoPriority::Demand ? active_demand() : int(active.size());
      for (size_t i = 0; i < waiting.size() && running < opts.max_in_flight;) {
        if ((waiting[i]->is_demand() ? IoPriority::Demand : IoPriority::Prefetch) == p &&
            waiting[i]->not_before <= now) {
          ++running;
          std::unique_ptr<Transfer> t = std::move(waiting[i]);
          waiting.erase(waiting.begin() + std::ptrdiff_t(i));
          start_attempt(std::move(t));
        } else {
          ++i;
        }
      }
    }
  }

  void apply_pauses() {
    const bool demand = demand_running();
    for (auto& [e, t] : active) {
      if (t->is_demand()) {
        if (t->paused) {  // promoted while paused
          t->paused = false;
          t->last_data = t->run_since = Clock::now();
          curl_easy_pause(e, CURLPAUSE_CONT);
        }
        continue;
      }
      if (demand && !t->paused) {
        t->spent_s = t->spent_now(Clock::now());
        t->paused = true;
        curl_easy_pause(e, CURLPAUSE_RECV);
      } else if (!demand && t->paused) {
        t->paused = false;
        t->last_data = t->run_since = Clock::now();
        curl_easy_pause(e, CURLPAUSE_CONT);
      }
    }
  }

  void update_busy() {
    std::lock_guard<std::mutex> lk(mu);
    const bool now_busy = !active.empty();
    if (now_busy && !busy) busy_since = Clock::now();
    if (!now_busy && busy) st.busy_s += std::chrono::duration<double>(Clock::now() - busy_since).count();
    busy = now_busy;
  }

  void start_attempt(std::unique_ptr<Transfer> t) {
    if (t->got >= t->n) {  // nothing left to ask for: never an empty or inverted range
      t->done({});
      return;
    }
    CURL* e = curl_easy_init();
    t->easy = e;
    t->status = 0;
    t->content_range.clear();
    t->etag.clear();
    t->last_modified.clear();
    t->retry_after.clear();
    t->checked = false;
    t->fail.clear();
    t->fail_permanent = false;
    t->errbuf[0] = 0;
    t->got_at_start = t->got;
    t->last_data = t->run_since = Clock::now();
    t->paused = false;
    const std::string range = fmt::format("{}-{}", t->offset + t->got, t->offset + t->n - 1);
    curl_easy_setopt(e, CURLOPT_URL, t->url.c_str());
    curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // copied by libcurl
    set_common_options(e, opts);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, long(CURL_HTTP_VERSION_2TLS));
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Impl::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Impl::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    if (!auth_header.empty()) {
      t->headers = curl_slist_append(nullptr, auth_header.c_str());
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      ++st.attempts;
    }
    curl_multi_add_handle(multi, e);
    active.emplace(e, std::move(t));
  }

  static void cleanup_attempt(Transfer& t) {
    if (t.easy) t.spent_s = t.spent_now(Clock::now());
    if (t.easy) curl_easy_cleanup(t.easy);
    t.easy = nullptr;
    if (t.headers) curl_slist_free_all(t.headers);
    t.headers = nullptr;
  }

  static size_t on_header(char* p, size_t size, size_t nmemb, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    const size_t len = size * nmemb;
    std::string line = trim(std::string(p, len));
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect, or 100 Continue)
      long code = 0;
      size_t sp = line.find(' ');
      if (sp != std::string::npos) code = std::strtol(line.c_str() + sp + 1, nullptr, 10);
      t->status = code;
      t->content_range.clear();
      t->etag.clear();
      t->last_modified.clear();
      t->retry_after.clear();
      return len;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) return len;
    const std::string name = lower(trim(line.substr(0, colon)));
    std::string value = trim(line.substr(colon + 1));
    if (name == "content-range") t->content_range = value;
    else if (name == "etag") t->etag = value;
    else if (name == "last-modified") t->last_modified = value;
    else if (name == "retry-after") t->retry_after = value;
    else if (name == "x-repo-commit" && t->probe) t->probe->repo_commit = value;
    return len;
  }

  // Validates the head of the final response; on failure sets t.fail.
  static bool check_head(Transfer& t) {
    if (t.status == 206) {
      uint64_t a = 0, b = 0, total = 0;
      if (!parse_content_range(t.content_range, &a, &b, &total)) {
        t.fail = t.content_range.empty() ? "HTTP 206 without a Content-Range header"
                                         : fmt::format("malformed Content-Range '{}'", t.content_range);
        return false;
      }
      if (t.has_pin) {
        if (total != t.pin.size) {
          t.fail = fmt::format("the file changed at the origin: it is now {} bytes, it was {} bytes when opened",
                               total, t.pin.size);
          t.fail_permanent = true;
          return false;
        }
        // The validator the object was pinned by must come with every response: one
        // that goes missing may hide a new revision at the same size.
        std::string change;
        if (!t.pin.etag.empty()) {
          if (t.etag.empty())
            change = fmt::format("the response carries no ETag, the file was opened with ETag {}", t.pin.etag);
          else if (t.etag != t.pin.etag)
            change = fmt::format("ETag {} is now {}", t.pin.etag, t.etag);
        } else if (!t.pin.last_modified.empty()) {
          if (t.last_modified.empty())
            change = fmt::format("the response carries no Last-Modified, the file was opened with '{}'",
                                 t.pin.last_modified);
          else if (t.last_modified != t.pin.last_modified)
            change = fmt::format("Last-Modified '{}' is now '{}'", t.pin.last_modified, t.last_modified);
        }
        if (!change.empty()) {
          t.fail = "the file changed at the origin: " + change;
          t.fail_permanent = true;
          return false;
        }
      }
      const uint64_t want_a = t.offset + t.got, want_b = t.offset + t.n - 1;
      if (a != want_a || b != want_b) {
        t.fail = fmt::format("Content-Range '{}' does not match the bytes asked for ({}-{})", t.content_range,
                             want_a, want_b);
        return false;
      }
      return true;
    }
    if (t.status == 200) {
      t.fail = "the server ignored the Range header (HTTP 200): it cannot serve byte ranges";
      t.fail_permanent = true;
      return false;
    }
    t.fail = fmt::format("HTTP {}", t.status);
    // Retry what may pass: timeouts, rate limits, server errors.
    t.fail_permanent = !(t.status == 408 || t.status == 425 || t.status == 429 || t.status >= 500 || t.status == 0);
    return false;
  }

  static size_t on_body(char* p, size_t size, size_t nmemb, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    const size_t len = size * nmemb;
    if (!t->checked) {
      if (!check_head(*t)) return 0;  // aborts the transfer
      t->checked = true;
    }
    if (len > t->n - t->got) {
      t->fail = fmt::format("the server sent more than the {} bytes asked for", t->n);
      return 0;
    }
    std::memcpy(t->dst + t->got, p, len);
    t->got += len;
    t->last_data = Clock::now();
    return len;
  }

  void reap() {
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      CURL* e = m->easy_handle;
      const CURLcode rc = m->data.result;
      auto it = active.find(e);
      if (it == active.end()) continue;
      std::unique_ptr<Transfer> t = std::move(it->second);
      active.erase(it);
      curl_multi_remove_handle(multi, e);
      finish_attempt(std::move(t), rc);
    }
  }

  // The request's overall deadline in transfer seconds (0: none).
  double deadline_s(const Transfer& t) const {
    return opts.min_rate_bps > 0 ? opts.stall_timeout_s + double(t.n) / opts.min_rate_bps : 0;
  }

  // Ends attempts that stalled, ran past the request's deadline, or hold every byte
  // asked for while the response promises more (a Content-Length larger than the
  // range): those are complete.
  void check_stalls() {
    const auto now = Clock::now();
    std::vector<CURL*> ended;
    for (auto& [e, t] : active) {
      const double deadline = deadline_s(*t);
      if (t->checked && t->got == t->n) ended.push_back(e);
      else if (!t->paused && std::chrono::duration<double>(now - t->last_data).count() > opts.stall_timeout_s)
        ended.push_back(e);
      else if (deadline > 0 && t->spent_now(now) > deadline)
        ended.push_back(e);
    }
    for (CURL* e : ended) {
      auto it = active.find(e);
      std::unique_ptr<Transfer> t = std::move(it->second);
      active.erase(it);
      curl_multi_remove_handle(multi, e);
      const double deadline = deadline_s(*t);
      if (t->checked && t->got == t->n) {
        // complete: finish_attempt sees every byte in
      } else if (deadline > 0 && t->spent_now(now) > deadline) {
        t->fail = fmt::format(
            "{} of {} bytes arrived in {:.1f} s, slower than the minimum rate of {:.0f} bytes/s (--net-min-rate) over "
            "the request",
            t->got, t->n, t->spent_now(now), opts.min_rate_bps);
        t->fail_permanent = true;
      } else {
        t->fail = fmt::format("no data for {:.0f} s", opts.stall_timeout_s);
      }
      finish_attempt(std::move(t), CURLE_OK);
    }
  }

  // Seconds a Retry-After value asks for; -1 if absent or malformed.
  static double retry_after_s(const std::string& v) {
    if (v.empty()) return -1;
    char* end = nullptr;
    const double s = std::strtod(v.c_str(), &end);
    if (end && *end == 0 && s >= 0) return s;
    const time_t when = curl_getdate(v.c_str(), nullptr);
    if (when < 0) return -1;
    return std::max(0.0, double(when - std::time(nullptr)));
  }

  void finish_attempt(std::unique_ptr<Transfer> t, CURLcode rc) {
    std::string why = t->fail;
    bool permanent = t->fail_permanent;
    // Every byte asked for is in and the response head passed its checks: whatever
    // else went wrong afterwards (a Content-Length larger than the range, a
    // connection closed early) costs nothing.
    if (t->checked && t->got == t->n) {
      why.clear();
      permanent = false;
      rc = CURLE_OK;
    }
    if (why.empty() && rc != CURLE_OK) {
      why = t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc);
      // Failures a retry cannot mend.
      if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM) {
        permanent = true;
        if (rc != CURLE_SSL_CERTPROBLEM)
          why += opts.ca_file.empty()
                     ? " (the server's certificate is not trusted by the system's CA certificates: pass --ca-cert "
                       "FILE or set CURL_CA_BUNDLE)"
                     : fmt::format(" (CA certificates from '{}')", opts.ca_file);
      }
      if (rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT || rc == CURLE_TOO_MANY_REDIRECTS)
        permanent = true;
    }
    if (why.empty() && !t->checked && !check_head(*t)) {  // a response without a body
      why = t->fail;
      permanent = t->fail_permanent;
    }
    if (why.empty() && t->got < t->n) why = fmt::format("the body ended after {} of {} bytes", t->got, t->n);
    if (t->probe && why.empty()) {
      uint64_t a = 0, b = 0, total = 0;
      parse_content_range(t->content_range, &a, &b, &total);
      t->probe->id.size = total;
      t->probe->id.etag = t->etag;
      t->probe->id.last_modified = t->last_modified;
      char* eff = nullptr;
      curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &eff);
      t->probe->effective_url = eff ? eff : t->url;
      long ver = 0;
      curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &ver);
      t->probe->http_version = ver == CURL_HTTP_VERSION_3 ? 3 : ver == CURL_HTTP_VERSION_2_0 ? 2 : 1;
    }
    long version = 0;
    if (why.empty()) curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &version);
    const std::string retry_after = t->retry_after;
    cleanup_attempt(*t);
    const bool progressed = t->got > t->got_at_start;
    // No answer at all: the origin could not be reached.
    const bool no_connection = rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
                               rc == CURLE_COULDNT_CONNECT || (rc == CURLE_OPERATION_TIMEDOUT && t->status == 0);
    if (t->unreachable) *t->unreachable = no_connection;
    {
      std::lock_guard<std::mutex> lk(mu);
      st.bytes += t->got - t->got_at_start;
      if (why.empty()) {
        ++st.requests;
        (version == CURL_HTTP_VERSION_3 ? st.over_http3 : version == CURL_HTTP_VERSION_2_0 ? st.over_http2 : st.over_http1)++;
      }
    }
    if (why.empty()) {
      t->done({});
      return;
    }
    if (!progressed) ++t->attempts;
    double delay = retry_after_s(retry_after);
    if (delay > opts.retry_after_max_s) {
      why += fmt::format(" (the server asks to retry after {:.0f} s, more than the {:.0f} s allowed)", delay,
                         opts.retry_after_max_s);
      permanent = true;
    }
    const int max_attempts = t->max_attempts > 0 ? t->max_attempts : opts.max_attempts;
    if (permanent || t->attempts >= max_attempts) {
      std::string msg = fmt::format("GET {} {}: {}", redact_url(t->url), t->range_text(), why);
      if (!permanent) msg += fmt::format(" (gave up after {} failed attempts)", t->attempts);
      {
        std::lock_guard<std::mutex> lk(mu);
        ++st.requests;
      }
      t->done(Error{msg});
      return;
    }
    if (delay < 0) {
      if (progressed) {
        delay = 0;  // resume at once from the last byte received
      } else {
        const double cap = std::min(opts.backoff_max_s, opts.backoff_base_s * std::pow(2.0, t->attempts - 1));
        delay = std::uniform_real_distribution<double>(0.5 * cap, cap)(rng);
      }
    }
    DF_LOG_DEBUG("GET {} {}: {}; retrying in {:.2f} s from byte {}", redact_url(t->url), t->range_text(), why, delay,
                 t->offset + t->got);
    {
      std::lock_guard<std::mutex> lk(mu);
      ++st.retries;
    }
    t->not_before = Clock::now() + std::chrono::microseconds(int64_t(delay * 1e6));
    waiting.push_back(std::move(t));
  }
};

HttpClient::HttpClient(HttpOptions opts) : opts_(opts), impl_(std::make_unique<Impl>(std::move(opts))) {}
HttpClient::~HttpClient() = default;

void HttpClient::get_range(const std::string& url, uint64_t offset, uint64_t n, char* dst, const HttpIdentity* pin,
                           IoPriority prio, Done done, std::shared_ptr<const std::atomic<bool>> urgent) {
  auto t = std::make_unique<Transfer>();
  t->urgent = std::move(urgent);
  t->url = url;
  t->offset = offset;
  t->n = n;
  t->dst = dst;
  t->has_pin = pin != nullptr;
  if (pin) t->pin = *pin;
  t->prio = prio;
  t->done = std::move(done);
  if (n == 0) {
    t->done({});
    return;
  }
  impl_->submit(std::move(t));
}

void HttpClient::wake() { curl_multi_wakeup(impl_->multi); }

Status HttpClient::get_range_sync(const std::string& url, uint64_t offset, uint64_t n, char* dst,
                                  const HttpIdentity* pin, IoPriority prio) {
  std::promise<Status> p;
  auto f = p.get_future();
  get_range(url, offset, n, dst, pin, prio, [&p](const Status& s) { p.set_value(s); });
  return f.get();
}

Result<HttpProbe> HttpClient::probe(const std::string& url, int max_attempts, bool* unreachable) {
  HttpProbe probe;
  char byte = 0;
  std::promise<Status> p;
  auto f = p.get_future();
  auto t = std::make_unique<Transfer>();
  t->url = url;
  t->offset = 0;
  t->n = 1;
  t->dst = &byte;
  t->probe = &probe;
  t->max_attempts = max_attempts;
  t->unreachable = unreachable;
  t->done = [&p](const Status& s) { p.set_value(s); };
  impl_->submit(std::move(t));
  Status s = f.get();
  if (!s.ok()) return s.error();
  return probe;
}

namespace {
struct TextTransfer {
  HttpText* out;
  size_t max_bytes;
  bool too_big = false;
  static size_t on_body(char* p, size_t size, size_t nmemb, void* ud) {
    auto* t = static_cast<TextTransfer*>(ud);
    const size_t len = size * nmemb;
    if (t->out->body.size() + len > t->max_bytes) {
      t->too_big = true;
      return 0;
    }
    t->out->body.append(p, len);
    return len;
  }
  static size_t on_header(char* p, size_t size, size_t nmemb, void* ud) {
    auto* t = static_cast<TextTransfer*>(ud);
    const size_t len = size * nmemb;
    const std::string line = trim(std::string(p, len));
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect)
      t->out->link_next.clear();
      return len;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos || lower(trim(line.substr(0, colon))) != "link") return len;
    // Link: <https://host/api/...?cursor=...>; rel="next"
    const std::string v = line.substr(colon + 1);
    for (size_t at = 0; (at = v.find('<', at)) != std::string::npos;) {
      const size_t end = v.find('>', at);
      if (end == std::string::npos) break;
      const size_t next_item = v.find('<', end);
      const std::string params = lower(v.substr(end, next_item == std::string::npos ? std::string::npos : next_item - end));
      if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos)
        t->out->link_next = v.substr(at + 1, end - at - 1);
      at = end;
    }
    return len;
  }
};
}  // namespace

Result<HttpText> HttpClient::get_text(const std::string& url, size_t max_bytes, bool* unreachable,
                                      int max_attempts) {
  if (max_attempts <= 0) max_attempts = opts_.max_attempts;
  std::string auth;
  if (!opts_.bearer_token.empty()) auth = "Authorization: Bearer " + opts_.bearer_token;
  std::string why;
  for (int attempt = 1;; ++attempt) {
    HttpText out;
    TextTransfer t{&out, max_bytes};
    char errbuf[CURL_ERROR_SIZE] = {};
    CURL* e = curl_easy_init();
    curl_slist* headers = auth.empty() ? nullptr : curl_slist_append(nullptr, auth.c_str());
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    set_common_options(e, opts_);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, std::max(1L, long(opts_.stall_timeout_s)));
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");  // gzip if the server offers it
    if (headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &TextTransfer::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &TextTransfer::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    const CURLcode rc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out.status);
    curl_easy_cleanup(e);
    if (headers) curl_slist_free_all(headers);
    const bool no_connection = rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
                               rc == CURLE_COULDNT_CONNECT || (rc == CURLE_OPERATION_TIMEDOUT && out.status == 0);
    if (unreachable) *unreachable = no_connection;
    if (t.too_big) return make_error("GET {}: the answer is larger than {} bytes", redact_url(url), max_bytes);
    bool transient = false;
    if (rc != CURLE_OK) {
      why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
      transient = rc != CURLE_UNSUPPORTED_PROTOCOL && rc != CURLE_URL_MALFORMAT && rc != CURLE_TOO_MANY_REDIRECTS &&
                  rc != CURLE_PEER_FAILED_VERIFICATION && rc != CURLE_SSL_CACERT_BADFILE;
    } else if (out.status >= 500 || out.status == 429 || out.status == 408) {
      why = fmt::format("HTTP {}", out.status);
      transient = true;
    } else {
      return out;
    }
    if (!transient || attempt >= max_attempts)
      return make_error("GET {}: {}{}", redact_url(url), why,
                        transient ? fmt::format(" (gave up after {} failed attempts)", attempt) : "");
    const double delay = std::min(opts_.backoff_max_s, opts_.backoff_base_s * std::pow(2.0, attempt - 1));
    DF_LOG_DEBUG("GET {}: {}; retrying in {:.2f} s", redact_url(url), why, delay);
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(delay * 1e6)));
  }
}

std::string http_versions_text(const HttpStats& s) {
  const std::pair<const char*, uint64_t> v[] = {{"HTTP/1.1", s.over_http1}, {"HTTP/2", s.over_http2}, {"HTTP/3", s.over_http3}};
  std::string out;
  int used = 0;
  for (const auto& [name, n] : v) used += n > 0;
  for (const auto& [name, n] : v) {
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += used == 1 ? std::string(name) : fmt::format("{}: {}", name, n);
  }
  return out.empty() ? "no requests" : out;
}

HttpStats HttpClient::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  HttpStats s = impl_->st;
  if (impl_->busy) s.busy_s += std::chrono::duration<double>(Clock::now() - impl_->busy_since).count();
  return s;
}

}  // namespace deltafin
