#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace deltafin {

namespace {

// How long a worker polls for the next job, and the caller for the end of one,
// before sleeping on a condition variable. A forward pass runs hundreds of jobs a
// few microseconds apart: waking a sleeping thread costs a futex call and a context
// switch each time (a third of a small model's decode step), polling costs nothing
// then. Between passes (I/O, an idle server) the threads sleep.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done` for up to kSpin; true when it held.
template <class F>
bool spin_until(F done) {
  auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() > until) return done();
  }
}

}  // namespace

int default_thread_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_(std::clamp(n_threads, 1, kMaxThreads)) {
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

// The sleep/wake handshakes use sequentially consistent atomics: a worker that is
// about to sleep publishes `sleepers_` and then reads `generation_` (under mu_); run()
// publishes `generation_` and then reads `sleepers_`, so one of the two sees the
// other and no wake-up is lost (likewise `caller_waits_` and `pending_` for the end).
void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load() != seen || stop_.load(); })) {
      std::unique_lock<std::mutex> lk(mu_);
      ++sleepers_;
      cv_start_.wait(lk, [&] { return stop_.load() || generation_.load() != seen; });
      --sleepers_;
    }
    if (stop_.load()) return;
    seen = generation_.load();
    const std::function<void(int, int)>* job = job_.load();
    (*job)(index, n_);
    if (pending_.fetch_sub(1) == 1 && caller_waits_.load()) {
      std::lock_guard<std::mutex> lk(mu_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_ == 1) {
    fn(0, 1);
    return;
  }
  job_.store(&fn);
  pending_.store(n_ - 1);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_start_.notify_all();
  }
  fn(0, n_);
  if (!spin_until([&] { return pending_.load() == 0; })) {
    std::unique_lock<std::mutex> lk(mu_);
    caller_waits_.store(true);
    cv_done_.wait(lk, [&] { return pending_.load() == 0; });
    caller_waits_.store(false);
  }
  job_.store(nullptr);
}

void ThreadPool::parallel_for(int64_t count, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_ == 1 || count <= grain) {
    fn(0, count);
    return;
  }
  // Chunks small enough to balance load, large enough to amortise the atomic.
  int64_t chunk = std::max<int64_t>(grain, count / (int64_t(n_) * 4));
  std::atomic<int64_t> next{0};
  run([&](int, int) {
    for (;;) {
      int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= count) break;
      fn(b, std::min(count, b + chunk));
    }
  });
}

}  // namespace deltafin
