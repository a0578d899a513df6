// Threads that do blocking reads (pread on an O_DIRECT descriptor), so that many
// requests are in flight at once and the device sees a deep queue. Two classes of
// work: demand reads (a forward pass is, or soon will be, waiting on them) always
// go before prefetch reads. Separate from the compute ThreadPool on purpose: these
// threads sleep in the kernel, the compute threads never should.
//
// Thread safety: submit() may be called from any thread, including a job.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deltafin {

enum class IoPriority { Demand, Prefetch };

class IoPool {
 public:
  explicit IoPool(int n_threads);
  // Drops the jobs still queued and waits for the running ones.
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  void submit(IoPriority prio, std::function<void()> job);
  int size() const { return int(threads_.size()); }

 private:
  void worker();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> demand_, prefetch_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace deltafin
