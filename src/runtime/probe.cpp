#include "runtime/probe.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "core/aligned.h"
#include "core/thread_pool.h"
#include "io/direct_file.h"
#include "kernels/matmul.h"
#include "kernels/random_fill.h"
#include "kernels/types.h"

namespace deltafin {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

Result<DiskProbe> measure_disk_read(const std::string& path, uint64_t block, double seconds, int in_flight) {
  DF_ASSIGN(std::unique_ptr<DirectFile> f, DirectFile::open(path));
  block = align_up(std::max<uint64_t>(block, kDirectAlign), kDirectAlign);
  if (f->size() < block) return make_error("'{}' ({} bytes) is smaller than one read of {} bytes", path, f->size(), block);
  const uint64_t positions = (f->size() - block) / kDirectAlign + 1;
  std::atomic<uint64_t> reads{0};
  std::atomic<bool> failed{false};
  std::string error;
  std::mutex mu;
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, in_flight); ++i)
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(0x9e3779b97f4a7c15ull * uint64_t(i + 1));
      std::uniform_int_distribution<uint64_t> pos(0, positions - 1);
      AlignedBuffer mem(block);
      void* buf = mem.data();
      while (!failed.load() && since(t0) < seconds) {
        Status s = f->read_aligned(pos(rng) * kDirectAlign, buf, block);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lk(mu);
          if (!failed.exchange(true)) error = s.error().message;
          break;
        }
        reads.fetch_add(1);
      }
    });
  for (auto& t : threads) t.join();
  if (failed) return make_error("reading '{}': {}", path, error);
  DiskProbe p;
  p.reads = reads.load();
  p.bytes_per_second = double(p.reads) * double(block) / std::max(since(t0), 1e-9);
  p.direct = f->direct();
  return p;
}

double measure_weight_rate(DType t, int tokens, int threads, double seconds, uint64_t matrix_bytes) {
  const BlockGeometry g = block_geometry(t);
  if (!type_traits(t) || g.block_elems == 0) return 0.0;
  const int64_t cols = std::max<int64_t>(g.block_elems, 4096 / g.block_elems * g.block_elems);
  const uint64_t row_bytes = dtype_row_bytes(t, uint64_t(cols));
  // Matrices of the model's size, one product each as a forward pass does, 96 MiB of
  // them in all: larger than any cache, so that the weights come from memory.
  const uint64_t total = uint64_t(96) << 20;
  const int64_t rows = std::max<int64_t>(1, int64_t(std::min(std::max(matrix_bytes, row_bytes), total) / row_bytes));
  const int64_t n_mat = std::max<int64_t>(1, int64_t(total / (uint64_t(rows) * row_bytes)));
  ThreadPool pool(threads > 0 ? threads : default_thread_count());
  std::vector<uint8_t> w(row_bytes * uint64_t(rows) * uint64_t(n_mat));
  if (!fill_random(t, 1, rows * n_mat * cols, 0.02f, w.data(), &pool)) return 0.0;
  tokens = std::max(1, tokens);
  std::vector<float> x(size_t(cols) * size_t(tokens), 0.01f), y(size_t(rows) * size_t(tokens));
  QuantizedActs acts;
  quantize_acts(&pool, t, x.data(), tokens, cols, cols, &acts);
  auto all = [&] {
    for (int64_t m = 0; m < n_mat; ++m)
      matmul_q(&pool, t, w.data() + size_t(m) * size_t(rows) * row_bytes, rows, cols, acts, y.data(), rows,
               tokens > 1);
  };
  all();  // warm-up
  int n = 0;
  const auto t0 = Clock::now();
  do {
    all();
    ++n;
  } while (since(t0) < seconds);
  return double(w.size()) * n * tokens / std::max(since(t0), 1e-9);
}

}  // namespace deltafin
