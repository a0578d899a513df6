#include "io/io_pool.h"

#include <algorithm>

namespace deltafin {

IoPool::IoPool(int n_threads) {
  for (int i = 0; i < std::max(1, n_threads); ++i) threads_.emplace_back([this] { worker(); });
}

IoPool::~IoPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    demand_.clear();
    prefetch_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void IoPool::submit(IoPriority prio, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    (prio == IoPriority::Demand ? demand_ : prefetch_).push_back(std::move(job));
  }
  cv_.notify_one();
}

void IoPool::worker() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !demand_.empty() || !prefetch_.empty(); });
      if (stop_) return;
      auto& q = !demand_.empty() ? demand_ : prefetch_;
      job = std::move(q.front());
      q.pop_front();
    }
    job();
  }
}

}  // namespace deltafin
