// cpp-httplib's server with deltafin's own connection handling, so that slow or
// numerous clients cannot take every worker (slowloris) and a request's framing is
// checked as RFC 9112 asks:
//  - a request's head and body must arrive within a deadline, however the bytes
//    trickle in (the read timeout alone restarts with every byte);
//  - connections are capped in total and per client address; one over a cap gets 503
//    at once and is closed; workers are started as connections need them (up to the
//    cap), so /health answers while other clients hold theirs;
//  - two different Content-Length values, Content-Length beside Transfer-Encoding, or
//    a transfer coding other than chunked: 400 (501 for the coding), and the
//    connection is closed (the body's framing is unknown);
//  - a form Content-Type does not change how the body is read (the body is JSON
//    whatever the header says; cpp-httplib would cap form bodies at 8 KiB and split
//    multipart ones).
// Only src/server sees this header (cpp-httplib is its private dependency).
#pragma once
#include <httplib.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace deltafin::server {

struct ConnectionLimits {
  int max_connections = 512;         // open connections at once, all clients together
  int max_client_connections = 128;  // open connections from one client address
  std::chrono::milliseconds request_timeout{30000};  // to receive a request's head and body
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ConnectionLimits limits);
  const ConnectionLimits& limits() const { return limits_; }
  // After bind_to_port(): a listen backlog for bursts of connections.
  void widen_backlog();
  // Why the request being routed on this thread is refused (its framing), or null;
  // the pre-routing handler answers it with `framing_status()`.
  static const char* framing_error();
  static int framing_status();
  // The connection is closed after this thread's answer: for one given before the
  // request's body was read (what is left of it must not be read as the next request).
  static void close_after_answer();

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool admit(const std::string& client, std::string* why);
  void release(const std::string& client);

  ConnectionLimits limits_;
  std::mutex mutex_;
  int open_ = 0;
  std::map<std::string, int> per_client_;
};

}  // namespace deltafin::server
