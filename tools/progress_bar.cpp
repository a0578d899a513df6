#include "progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

namespace deltafin::tools {

namespace {

using Clock = std::chrono::steady_clock;

std::string hms(double s) {
  if (!(s >= 0) || s > 1e7) return "--:--";
  const long t = long(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60) : fmt::format("{}:{:02}", t / 60, t % 60);
}

class Bar final : public Progress {
 public:
  Bar(std::string what, uint64_t total)
      : what_(std::move(what)), total_(total), tty_(::isatty(2)), start_(Clock::now()), last_(start_) {
    draw(false);
  }
  ~Bar() override {
    std::lock_guard<std::mutex> lk(mu_);
    draw(true);
  }
  void add(uint64_t bytes) override {
    std::lock_guard<std::mutex> lk(mu_);
    done_ += bytes;
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (since >= (tty_ ? 0.1 : 5.0)) {
      last_ = now;
      draw(false);
    }
  }

 private:
  void draw(bool final) {
    constexpr double kMiB = 1048576.0;
    const double el = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = el > 0 ? double(done_) / el : 0;
    const double frac = total_ ? std::min(1.0, double(done_) / double(total_)) : 1.0;
    std::string line;
    if (final) {
      line = fmt::format("{}: {:.1f} MiB in {:.1f} s ({:.1f} MiB/s)", what_, done_ / kMiB, el, rate / kMiB);
    } else {
      const int w = 24, fill = int(frac * w);
      line = fmt::format("{} [{}{}] {:.1f}/{:.1f} MiB {:.1f} MiB/s ETA {}", what_, std::string(size_t(fill), '#'),
                         std::string(size_t(w - fill), '-'), done_ / kMiB, total_ / kMiB, rate / kMiB,
                         rate > 0 ? hms(double(total_ - std::min(done_, total_)) / rate) : "--:--");
    }
    if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
    else std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
  std::mutex mu_;
  std::string what_;
  uint64_t total_, done_ = 0;
  bool tty_;
  Clock::time_point start_, last_;
};

}  // namespace

ProgressFactory terminal_progress(bool quiet) {
  if (quiet) return nullptr;
  return [](const std::string& what, uint64_t total) -> std::unique_ptr<Progress> {
    return std::make_unique<Bar>(what, total);
  };
}

}  // namespace deltafin::tools
