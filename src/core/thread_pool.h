// A fixed pool of worker threads for data-parallel kernels. run(fn) calls fn(i, n)
// on every one of the n threads (the caller is thread 0) and returns when all are
// done. Not reentrant: one run() at a time per pool. Passed explicitly to whoever
// needs it; there is no global pool.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deltafin {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }
  // Runs fn(thread_index, n_threads) on all threads; blocks until all return.
  void run(const std::function<void(int, int)>& fn);
  // Splits [0, count) into chunks of at least `grain` and hands them out dynamically.
  void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);
  int n_;
  std::vector<std::thread> threads_;
  // Workers poll for a new generation (and the caller for pending_ == 0) a short
  // while before sleeping on the condition variables (see thread_pool.cpp).
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  std::atomic<const std::function<void(int, int)>*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};         // workers asleep on cv_start_
  std::atomic<bool> caller_waits_{false};  // run() asleep on cv_done_
  std::atomic<bool> stop_{false};
};

// Default thread count: the machine's hardware threads.
int default_thread_count();

// The most threads a pool runs (ggml's GGML_MAX_N_THREADS): commands refuse more,
// and a pool asked for more runs this many.
constexpr int kMaxThreads = 512;

}  // namespace deltafin
