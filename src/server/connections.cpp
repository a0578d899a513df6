#include "server/connections.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/platform.h"
#include "server/api.h"

namespace deltafin::server {

namespace {

using Clock = std::chrono::steady_clock;

// The framing verdict on the request being read on this thread (set while its head is
// checked, read by the pre-routing handler).
struct Framing {
  const char* error = nullptr;
  int status = 400;
  bool close = false;  // close the connection after the answer
};
thread_local Framing* t_framing = nullptr;

std::string address_of(const sockaddr_storage& a, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    if (port) *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    if (port) *port = ntohs(v6->sin6_port);
  }
  return buf;
}

std::string peer_of(socket_t fd, int* port = nullptr) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return {};
  return address_of(a, port);
}

// A status line and an OpenAI error body, for answers sent without cpp-httplib.
std::string canned_response(int status, const char* reason, const std::string& message) {
  ApiError e;
  e.status = status;
  e.message = message;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  const std::string body = e.body().dump();
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                     status, reason, body.size(), body);
}

int poll_one(socket_t fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

// Ends a connection the server gave up on: what is left of the answer goes out and
// what the client still sends is read (briefly) and dropped, so that it sees the
// answer rather than a reset.
void close_gently(socket_t fd) {
  ::shutdown(fd, SHUT_WR);
  char sink[4096];
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  for (size_t total = 0; total < (64u << 10);) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0 || poll_one(fd, POLLIN, int(left)) <= 0) break;
    const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
    if (n <= 0) break;
    total += size_t(n);
  }
  ::close(fd);
}

// cpp-httplib's Stream changed after 0.18: is_writable became wait_writable, and
// is_readable (which waited for the read timeout) became wait_readable beside an
// is_readable that only says whether bytes are buffered (0.41 has both). Debian 12
// has 0.11, trixie 0.18, Homebrew a newer one; ConnStream answers both sets, overriding the ones its
// base declares (so none is marked override) and asserting below that none is missed.
template <typename S>
constexpr bool kWaits = requires(const S& s) { s.wait_readable(); };
constexpr bool kStreamWaits = kWaits<httplib::Stream>;

int to_ms(time_t sec, time_t usec) { return int(std::min<int64_t>(int64_t(sec) * 1000 + usec / 1000, INT32_MAX)); }

// A connection's socket as cpp-httplib's Stream, with a deadline over each request's
// head and body: it starts with the request's first byte and ends with the first byte
// of the answer. Past it the client gets 408 and the connection is closed.
class ConnStream final : public httplib::Stream {
 public:
  // `listener`: the server's socket, INVALID_SOCKET once it stops (a read waiting for a
  // slow client then gives up).
  ConnStream(socket_t fd, int read_timeout_ms, int write_timeout_ms, std::chrono::milliseconds request_timeout,
             const std::atomic<socket_t>& listener)
      : fd_(fd), read_ms_(read_timeout_ms), write_ms_(write_timeout_ms), request_timeout_(request_timeout),
        listener_(listener) {}

  bool expired() const { return expired_; }

  // Waits (at most `idle_sec`, while the server runs) for a request's first byte.
  bool wait_request(time_t idle_sec, const std::atomic<socket_t>& listener) {
    if (pos_ < have_) return true;
    const auto until = Clock::now() + std::chrono::seconds(idle_sec);
    while (listener != INVALID_SOCKET) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      const int r = poll_one(fd_, POLLIN, int(std::min<int64_t>(left, 100)));
      if (r < 0) return false;
      if (r > 0) return true;
    }
    return false;
  }

  bool is_readable() const { return kStreamWaits ? pos_ < have_ : wait_readable(); }
  bool wait_readable() const { return pos_ < have_ || poll_one(fd_, POLLIN, read_ms_) > 0; }
  bool is_writable() const { return wait_writable(); }
  bool wait_writable() const { return !expired_ && poll_one(fd_, POLLOUT, write_ms_) > 0; }
  // Milliseconds since the connection began (newer versions: for a maximum timeout, unset here).
  time_t duration() const {
    return time_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began_).count());
  }

  ssize_t read(char* ptr, size_t size) {
    if (expired_) return -1;
    if (!reading_) {  // a request begins
      reading_ = true;
      deadline_ = Clock::now() + request_timeout_;
    }
    if (pos_ == have_) {
      const auto silent_until = Clock::now() + std::chrono::milliseconds(read_ms_);
      for (;;) {
        const auto now = Clock::now();
        if (now >= deadline_) return expire();
        if (now >= silent_until || listener_ == INVALID_SOCKET) return -1;  // silence past the read timeout
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(std::min(deadline_, silent_until) - now);
        const int r = poll_one(fd_, POLLIN, int(std::min<int64_t>(left.count(), 200)));
        if (r < 0) return -1;
        if (r > 0) break;
      }
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0;
      have_ = size_t(n);
    }
    const size_t n = std::min(size, have_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) {
    if (expired_) return -1;
    reading_ = false;  // the answer has begun: the next read is the next request's
    if (poll_one(fd_, POLLOUT, write_ms_) <= 0) return -1;
    ssize_t n;
    do n = platform::send_nosignal(fd_, ptr, size);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const { ip = peer_of(fd_, &port); }
  void get_local_ip_and_port(std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ip.clear();
    port = 0;
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) ip = address_of(a, &port);
  }
  socket_t socket() const { return fd_; }

 private:
  ssize_t expire() {
    expired_ = true;
    const std::string r = canned_response(
        408, "Request Timeout",
        fmt::format("the request's head and body did not arrive within {} s (the limit, --request-timeout)",
                    double(request_timeout_.count()) / 1000));
    DF_LOG_WARN("closed a connection from {}: its request did not arrive within {} ms", peer_of(fd_),
                request_timeout_.count());
    (void)platform::send_nosignal(fd_, r.data(), r.size());
    return -1;
  }

  socket_t fd_;
  int read_ms_, write_ms_;
  std::chrono::milliseconds request_timeout_;
  const std::atomic<socket_t>& listener_;
  bool reading_ = false, expired_ = false;
  Clock::time_point deadline_, began_ = Clock::now();
  char buf_[4096];
  size_t pos_ = 0, have_ = 0;
};

static_assert(!std::is_abstract_v<ConnStream>, "ConnStream misses a function of this cpp-httplib's Stream");

// Workers started as connections come (up to `max`), kept for the next ones.
// TaskQueue::enqueue returns void in cpp-httplib 0.11, bool (taken) in 0.18 and 0.41.
using EnqueueResult = decltype(std::declval<httplib::TaskQueue&>().enqueue(std::function<void()>()));
class GrowingPool final : public httplib::TaskQueue {
 public:
  explicit GrowingPool(size_t max) : max_(max) {}
  ~GrowingPool() override { shutdown(); }

  EnqueueResult enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lk(mutex_);
      jobs_.push_back(std::move(fn));
      if (jobs_.size() > idle_ && threads_.size() < max_) threads_.emplace_back([this] { work(); });
      else cond_.notify_one();
    }
    return EnqueueResult(true);  // void(true) where it returns nothing
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lk(mutex_);
      if (stopping_ && threads_.empty()) return;
      stopping_ = true;
    }
    cond_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lk(mutex_);
        ++idle_;
        cond_.wait(lk, [this] { return stopping_ || !jobs_.empty(); });
        --idle_;
        if (jobs_.empty()) return;  // stopping, and nothing left to do
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  const size_t max_;
  std::mutex mutex_;
  std::condition_variable cond_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

std::string trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

bool starts_with_ci(const std::string& s, const char* prefix) {
  const size_t n = std::strlen(prefix);
  return s.size() >= n && strncasecmp(s.data(), prefix, n) == 0;
}

// RFC 9112 6.1-6.3: the body's length must be known one way. Also drops a form
// Content-Type, which would make cpp-httplib read the body as a form.
void vet(httplib::Request& req, Framing* f) {
  std::string length;
  bool bad_length = false;
  const size_t n_length = req.get_header_value_count("Content-Length");
  const auto [first, last] = req.headers.equal_range("Content-Length");  // a multimap in 0.11, unordered later
  for (auto it = first; it != last; ++it) {
    const std::string& v = it->second;
    size_t at = 0;
    do {  // a field may list values: "5, 5"
      const size_t comma = v.find(',', at);
      const std::string one = trim(v.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (one.empty() || one.size() > 18 || one.find_first_not_of("0123456789") != std::string::npos ||
          (!length.empty() && one != length))
        bad_length = true;
      length = one;
      at = comma == std::string::npos ? std::string::npos : comma + 1;
    } while (at != std::string::npos);
  }
  const size_t n_coding = req.get_header_value_count("Transfer-Encoding");
  if (bad_length) {
    *f = {"the request's Content-Length is not one decimal number (two different values, or not a number; RFC 9112 "
          "6.3)", 400, true};
  } else if (n_length > 0 && n_coding > 0) {
    *f = {"the request has both Content-Length and Transfer-Encoding (RFC 9112 6.1); send one", 400, true};
  } else if (n_coding > 1 || (n_coding == 1 && strcasecmp(trim(req.get_header_value("Transfer-Encoding")).c_str(),
                                                          "chunked") != 0)) {
    *f = {"the request's Transfer-Encoding is not supported: only 'chunked' is", 501, true};
  }
  if (f->error) {
    // The body's end is unknown: none of it is read (cpp-httplib 0.41 would read to
    // the end of the connection after the answer, taking a next request's bytes),
    // and the answer closes the connection.
    req.headers.erase("Connection");
    req.set_header("Connection", "close");
    req.headers.erase("Transfer-Encoding");
    req.headers.erase("Content-Length");
    req.set_header("Content-Length", "0");
  } else if (n_length == 0 && n_coding == 0) {
    // No body (RFC 9112 6.3), said so: cpp-httplib 0.41 would otherwise read a
    // DELETE's absent body to the end of the connection after the answer, taking the
    // next request on a kept-alive connection as its bytes.
    req.set_header("Content-Length", "0");
  }
  const std::string type = req.get_header_value("Content-Type");
  if (starts_with_ci(type, "application/x-www-form-urlencoded") || starts_with_ci(type, "multipart/form-data"))
    req.headers.erase("Content-Type");
}

}  // namespace

GuardedServer::GuardedServer(ConnectionLimits limits) : limits_(limits) {
  // Enough workers for every connection the caps allow, and a few more that answer
  // those over a cap without waiting.
  const size_t workers = size_t(std::max(1, limits_.max_connections)) + 16;
  new_task_queue = [workers] { return new GrowingPool(workers); };
}

void GuardedServer::widen_backlog() {
  // cpp-httplib listens with a backlog of 5: a burst of connections (slowloris opens
  // many) would leave the next clients' handshakes unanswered for seconds.
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, SOMAXCONN);
}

const char* GuardedServer::framing_error() { return t_framing ? t_framing->error : nullptr; }
int GuardedServer::framing_status() { return t_framing ? t_framing->status : 400; }
void GuardedServer::close_after_answer() {
  if (t_framing) t_framing->close = true;
}

bool GuardedServer::admit(const std::string& client, std::string* why) {
  std::lock_guard<std::mutex> lk(mutex_);
  if (open_ >= limits_.max_connections) {
    *why = fmt::format("the server has {} connections open, the most it takes (--max-connections); try again later",
                       open_);
    return false;
  }
  int& mine = per_client_[client];
  if (mine >= limits_.max_client_connections) {
    *why = fmt::format("{} has {} connections open, the most one client address may (--max-client-connections)",
                       client, mine);
    return false;
  }
  ++mine;
  ++open_;
  return true;
}

void GuardedServer::release(const std::string& client) {
  std::lock_guard<std::mutex> lk(mutex_);
  --open_;
  auto it = per_client_.find(client);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  const std::string client = peer_of(sock);
  std::string why;
  if (!admit(client, &why)) {
    DF_LOG_DEBUG("refused a connection: {}", why);
    const std::string r = canned_response(503, "Service Unavailable", why);
    if (poll_one(sock, POLLOUT, 1000) > 0) (void)platform::send_nosignal(sock, r.data(), r.size());
    close_gently(sock);
    return false;
  }
  ConnStream strm(sock, to_ms(read_timeout_sec_, read_timeout_usec_), to_ms(write_timeout_sec_, write_timeout_usec_),
                  limits_.request_timeout, svr_sock_);
  bool ret = false, refused = false;
  for (size_t count = keep_alive_max_count_; count > 0; --count) {
    if (!strm.wait_request(keep_alive_timeout_sec_, svr_sock_)) break;
    Framing framing;
    t_framing = &framing;
    bool closed = false;
    const auto vet_this = [&framing](httplib::Request& req) { vet(req, &framing); };
    // 0.11 takes the stream alone; 0.18 and later the addresses beside it. (A generic
    // lambda, so that `if constexpr` drops the form this cpp-httplib lacks.)
    ret = [&](auto& self) {
      if constexpr (requires { self.process_request(strm, true, closed, vet_this); }) {
        return self.process_request(strm, count == 1, closed, vet_this);
      } else {
        std::string remote, local;
        int remote_port = 0, local_port = 0;
        strm.get_remote_ip_and_port(remote, remote_port);
        strm.get_local_ip_and_port(local, local_port);
        return self.process_request(strm, remote, remote_port, local, local_port, count == 1, closed, vet_this);
      }
    }(*this);
    t_framing = nullptr;
    refused = framing.error != nullptr || framing.close || strm.expired();
    if (!ret || closed || refused) break;
  }
  if (refused) {
    close_gently(sock);
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  release(client);
  return ret;
}

}  // namespace deltafin::server
