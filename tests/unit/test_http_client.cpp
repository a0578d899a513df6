// HttpClient against a real HTTP server on loopback (cpp-httplib, its bodies sent at
// a throttled rate): a demand request is never held back by prefetch transfers
// that fill every slot; a paused prefetch that someone now waits for resumes at
// demand priority once promoted; a Retry-After is honoured, and one longer than allowed
// fails at once with a message saying so. (Faults and nginx: tests/e2e/remote_*.sh.)
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "io/http_client.h"

using namespace deltafin;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Serves `blob` at /blob (ranges answered by httplib, 16 KiB every 8 ms: ~2 MB/s
// per transfer) and at /busy, which answers 429 with `retry_after` to its first
// request.
class SlowServer {
 public:
  explicit SlowServer(std::string blob) : blob_(std::move(blob)) {
    auto serve = [this](const httplib::Request&, httplib::Response& res) {
      res.set_content_provider(blob_.size(), "application/octet-stream",
                               [this](size_t offset, size_t length, httplib::DataSink& sink) {
                                 const size_t n = std::min<size_t>(length, 16 << 10);
                                 std::this_thread::sleep_for(std::chrono::milliseconds(8));
                                 return sink.write(blob_.data() + offset, n);
                               });
    };
    srv_.Get("/blob", serve);
    srv_.Get("/busy", [this, serve](const httplib::Request& req, httplib::Response& res) {
      if (busy_requests_++ == 0) {
        res.status = 429;
        res.set_header("Retry-After", retry_after);
        return;
      }
      serve(req, res);
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~SlowServer() {
    srv_.stop();
    thread_.join();
  }
  std::string url(const char* path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  std::string retry_after = "1";
  std::atomic<int> busy_requests_{0};

 private:
  std::string blob_;
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
};

std::string random_blob(size_t n) {
  std::mt19937 rng(5);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng());
  return s;
}

}  // namespace

TEST(HttpClient, PrefetchFillingEverySlotNeverDelaysADemandFetch) {
  const std::string blob = random_blob(8 << 20);
  SlowServer srv(blob);
  HttpOptions o;
  o.max_in_flight = 2;
  HttpClient client(o);
  // Two prefetch transfers of 3 MiB (about 1.5 s each at the server's rate) take both slots.
  const uint64_t big = 3 << 20;
  std::vector<std::string> pre(2, std::string(big, '\0'));
  std::vector<std::promise<double>> pre_done(2);
  const auto t0 = Clock::now();
  for (int i = 0; i < 2; ++i)
    client.get_range(srv.url("/blob"), uint64_t(i) * big, big, pre[size_t(i)].data(), nullptr, IoPriority::Prefetch,
                     [&, i](const Status& s) {
                       EXPECT_TRUE(s.ok()) << s.error().message;
                       pre_done[size_t(i)].set_value(since(t0));
                     });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // A demand fetch of 32 KiB: two server ticks when it starts at once.
  std::string demand(32 << 10, '\0');
  const uint64_t at = 7 << 20;
  const auto t1 = Clock::now();
  Status s = client.get_range_sync(srv.url("/blob"), at, demand.size(), demand.data(), nullptr, IoPriority::Demand);
  const double demand_s = since(t1);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(demand, blob.substr(at, demand.size()));
  EXPECT_LT(demand_s, 0.8) << "the demand fetch waited for a prefetch slot";  // ~1.4 s if it waits
  const double p0 = pre_done[0].get_future().get(), p1 = pre_done[1].get_future().get();
  EXPECT_GT(std::min(p0, p1), 0.2 + demand_s) << "the demand fetch finished after a prefetch";
  EXPECT_EQ(pre[0], blob.substr(0, big));
  EXPECT_EQ(pre[1], blob.substr(big, big));
}

TEST(HttpClient, APromotedPrefetchRunsBesideDemandFetches) {
  const std::string blob = random_blob(8 << 20);
  SlowServer srv(blob);
  HttpClient client;
  // A prefetch of 1 MiB (about 0.5 s alone), paused by a demand fetch of 3 MiB (about
  // 1.5 s) until someone waits for it.
  auto urgent = std::make_shared<std::atomic<bool>>(false);
  std::string pre(1 << 20, '\0'), dem(3 << 20, '\0');
  std::promise<double> pre_done, dem_done;
  const auto t0 = Clock::now();
  client.get_range(srv.url("/blob"), 0, pre.size(), pre.data(), nullptr, IoPriority::Prefetch,
                   [&](const Status& s) {
                     EXPECT_TRUE(s.ok());
                     pre_done.set_value(since(t0));
                   },
                   urgent);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  client.get_range(srv.url("/blob"), 4 << 20, dem.size(), dem.data(), nullptr, IoPriority::Demand,
                   [&](const Status& s) {
                     EXPECT_TRUE(s.ok());
                     dem_done.set_value(since(t0));
                   });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  urgent->store(true);
  client.wake();
  const double p = pre_done.get_future().get(), d = dem_done.get_future().get();
  EXPECT_LT(p, d) << "the promoted prefetch stayed paused behind the demand fetch";
  EXPECT_LT(p, 1.2);
  EXPECT_EQ(pre, blob.substr(0, pre.size()));
  EXPECT_EQ(dem, blob.substr(4 << 20, dem.size()));
}

TEST(HttpClient, RetryAfterIsHonoured) {
  const std::string blob = random_blob(64 << 10);
  {
    SlowServer srv(blob);
    HttpOptions o;
    o.backoff_base_s = 0.05;  // without the header the retry would come within 50 ms
    HttpClient client(o);
    std::string got(20000, '\0');
    const auto t0 = Clock::now();
    Status s = client.get_range_sync(srv.url("/busy"), 1000, got.size(), got.data(), nullptr);
    const double took = since(t0);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(got, blob.substr(1000, got.size()));
    EXPECT_EQ(srv.busy_requests_.load(), 2);
    EXPECT_GE(took, 0.95) << "the retry came before the Retry-After delay";
    EXPECT_LT(took, 3.0);
    EXPECT_EQ(client.stats().retries, 1u);
  }
  {
    SlowServer srv(blob);
    srv.retry_after = "120";
    HttpOptions o;
    o.retry_after_max_s = 60;
    HttpClient client(o);
    char byte = 0;
    const auto t0 = Clock::now();
    Status s = client.get_range_sync(srv.url("/busy"), 0, 1, &byte, nullptr);
    ASSERT_FALSE(s.ok());
    EXPECT_LT(since(t0), 1.0);
    EXPECT_NE(s.error().message.find("HTTP 429"), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("retry after 120 s, more than the 60 s allowed"), std::string::npos)
        << s.error().message;
    EXPECT_NE(s.error().message.find("/busy bytes 0-0"), std::string::npos) << s.error().message;
  }
}
