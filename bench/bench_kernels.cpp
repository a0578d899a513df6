// Kernel speed against the speed of light. Decode matvec is a pure stream over the
// weights, so its ceiling is memory read bandwidth: each matvec benchmark reports
// weight GB/s and the fraction of the read bandwidth measured in the same run
// ("of_mem"). Weights are 512 MiB per type (far beyond the caches) filled by
// fill_random; activations are quantized once, as the engine does.
//
//   build/bench/bench_kernels [--benchmark_filter=matvec/Q4_K] [--threads=N] [--isa=avx2|avx512|neon|scalar]
// (the kernel set, as DELTAFIN_ISA for the deltafin program; default the best this CPU runs)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/panels.h"
#include "kernels/random_fill.h"
#include "kernels/types.h"

using namespace deltafin;

namespace {

constexpr size_t kWeightBytes = size_t(512) << 20;
constexpr int64_t kCols = 4096;

struct Env {
  std::unique_ptr<ThreadPool> pool;
  double read_gbs_1t = 0, read_gbs_mt = 0;
};
Env g_env;

// Aligned buffer that owns its memory.
struct Buffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t bytes) : p(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))), n(bytes) {}
  ~Buffer() { std::free(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

uint64_t read_sum(const uint8_t* p, size_t n) {
#if defined(__SSE2__)
  __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm_add_epi64(a0, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i)));
    a1 = _mm_add_epi64(a1, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 16)));
    a2 = _mm_add_epi64(a2, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 32)));
    a3 = _mm_add_epi64(a3, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 48)));
  }
  __m128i s = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
  uint64_t out[2];
  std::memcpy(out, &s, 16);
  return out[0] + out[1];
#else
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    uint64_t v[4];
    std::memcpy(v, p + i, 32);
    s0 += v[0], s1 += v[1], s2 += v[2], s3 += v[3];
  }
  return s0 + s1 + s2 + s3;
#endif
}

// Best of a few passes over a 1 GiB buffer, split over `pool` (or one thread).
double measure_read_gbs(ThreadPool* pool) {
  const size_t bytes = size_t(1) << 30;
  Buffer buf(bytes);
  std::memset(buf.p, 1, bytes);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t sink = 0;
    if (pool == nullptr) {
      sink = read_sum(buf.p, bytes);
    } else {
      const int64_t chunk = 1 << 20;
      std::atomic<uint64_t> total{0};
      pool->parallel_for(int64_t(bytes / chunk), 4, [&](int64_t b, int64_t e) {
        total += read_sum(buf.p + b * chunk, size_t(e - b) * chunk);
      });
      sink = total;
    }
    benchmark::DoNotOptimize(sink);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(bytes) / s * 1e-9);
  }
  return best;
}

// The weight matrix of the type being measured, kept while consecutive benchmarks use it.
struct Weights {
  DType type;
  int64_t rows;
  std::unique_ptr<Buffer> buf;
};
Weights& weights_for(DType t) {
  static Weights w{DType::F32, 0, nullptr};
  if (!w.buf || w.type != t) {
    w.buf.reset();
    const size_t row_bytes = dtype_row_bytes(t, kCols);
    w.type = t;
    w.rows = int64_t(kWeightBytes / row_bytes);
    w.buf = std::make_unique<Buffer>(row_bytes * size_t(w.rows));
    fill_random(t, 1, w.rows * kCols, 0.02f, w.buf->p, g_env.pool.get());
  }
  return w;
}

// Plain counters from our own clock (Google Benchmark's rate counters would print
// "/s" after every value, including the bandwidth fraction).
struct Timer {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

void set_counters(benchmark::State& state, double seconds, double bytes_per_iter, double read_gbs) {
  double gbs = bytes_per_iter * double(state.iterations()) / seconds * 1e-9;
  state.counters["GB/s"] = gbs;
  if (read_gbs > 0) state.counters["of_mem"] = gbs / read_gbs;
}

void bm_read(benchmark::State& state, bool mt) {
  const size_t bytes = size_t(512) << 20;
  Buffer buf(bytes);
  std::memset(buf.p, 1, bytes);
  ThreadPool* pool = mt ? g_env.pool.get() : nullptr;
  Timer timer;
  for (auto _ : state) {
    uint64_t sink = 0;
    if (pool == nullptr) {
      sink = read_sum(buf.p, bytes);
    } else {
      std::atomic<uint64_t> total{0};
      pool->parallel_for(int64_t(bytes >> 20), 4, [&](int64_t b, int64_t e) {
        total += read_sum(buf.p + (b << 20), size_t(e - b) << 20);
      });
      sink = total;
    }
    benchmark::DoNotOptimize(sink);
  }
  set_counters(state, timer.seconds(), double(bytes), mt ? g_env.read_gbs_mt : g_env.read_gbs_1t);
}

void bm_memcpy(benchmark::State& state) {
  const size_t bytes = size_t(256) << 20;
  Buffer a(bytes), b(bytes);
  std::memset(a.p, 1, bytes);
  std::memset(b.p, 2, bytes);
  Timer timer;
  for (auto _ : state) {
    std::memcpy(b.p, a.p, bytes);
    benchmark::ClobberMemory();
  }
  set_counters(state, timer.seconds(), 2.0 * double(bytes), 0);  // bytes moved: read + write
}

// Y = W X for n_tok tokens; n_tok == 1 is decode.
// rows_limit < all rows measures the kernel on a cache-resident slice (no memory bound).
void bm_matmul(benchmark::State& state, DType t, int64_t n_tok, bool mt, int64_t rows_limit) {
  Weights& w = weights_for(t);
  std::vector<float> x(size_t(kCols * n_tok)), y(size_t(w.rows * n_tok));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  ThreadPool* pool = mt ? g_env.pool.get() : nullptr;
  QuantizedActs acts;
  quantize_acts(pool, t, x.data(), n_tok, kCols, kCols, &acts);
  const int64_t rows = std::min(w.rows, rows_limit);
  Timer timer;
  for (auto _ : state) {
    matmul_q(pool, t, w.buf->p, rows, kCols, acts, y.data(), w.rows);
    benchmark::DoNotOptimize(y.data());
  }
  double s = timer.seconds();
  set_counters(state, s, double(dtype_row_bytes(t, kCols) * rows), rows == w.rows ? (mt ? g_env.read_gbs_mt : g_env.read_gbs_1t) : 0);
  state.counters["GFLOP/s"] = 2e-9 * double(rows) * double(kCols) * double(n_tok) * double(state.iterations()) / s;
}

void bm_quantize_acts(benchmark::State& state, DType wtype) {
  const int64_t n_tok = 64;
  std::vector<float> x(size_t(kCols * n_tok), 0.25f);
  QuantizedActs acts;
  Timer timer;
  for (auto _ : state) {
    quantize_acts(nullptr, wtype, x.data(), n_tok, kCols, kCols, &acts);
    benchmark::DoNotOptimize(acts.data.data());
  }
  state.counters["Melem/s"] = double(kCols * n_tok) * 1e-6 * double(state.iterations()) / timer.seconds();
}

void bm_fill_random(benchmark::State& state, DType t) {
  const int64_t n = 1 << 24;
  Buffer buf(dtype_row_bytes(t, n));
  Timer timer;
  for (auto _ : state) {
    fill_random(t, 7, n, 0.02f, buf.p);
    benchmark::ClobberMemory();
  }
  set_counters(state, timer.seconds(), double(buf.n), 0);
}

// The conversion of one expert-sized matrix (1 MiB, in L2, as an expert just read
// into a RAM cache slot) to row panels, panel by panel: the scalar conversion or the
// selected set's (types.h panel_pack); GB/s of weights converted.
void bm_panel_pack(benchmark::State& state, DType t, bool simd) {
  const TypeTraits* tt = type_traits(t);
  if (simd && (tt == nullptr || tt->panel_pack == nullptr)) {
    state.SkipWithError("no SIMD conversion for this type and set");
    return;
  }
  const size_t row = dtype_row_bytes(t, kCols), panel = row * kPanelRows;
  const int64_t panels = int64_t((size_t(1) << 20) / panel), nb = kCols / int64_t(block_geometry(t).block_elems);
  Buffer src(panel * size_t(panels)), dst(src.n);
  fill_random(t, 5, kCols * panels * kPanelRows, 0.02f, src.p);
  Timer timer;
  for (auto _ : state) {
    for (int64_t g = 0; g < panels; ++g) {
      const uint8_t* from = src.p + size_t(g) * panel;
      uint8_t* to = dst.p + size_t(g) * panel;
      if (simd) tt->panel_pack(from, row, nb, to);
      else panel_pack_ref(t, from, row, nb, to);
    }
    benchmark::ClobberMemory();
  }
  set_counters(state, timer.seconds(), double(src.n), 0);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = default_thread_count();
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      threads = std::max(1, std::atoi(argv[i] + 10));
    } else if (std::strncmp(argv[i], "--isa=", 6) == 0) {
      Isa isa;
      if (!isa_from_name(argv[i] + 6, &isa) || !select_isa(isa)) {
        std::fprintf(stderr, "bench_kernels: %s is not a kernel set this CPU runs\n", argv[i] + 6);
        return 2;
      }
    } else {
      args.push_back(argv[i]);
    }
  }
  int nargs = int(args.size());
  benchmark::Initialize(&nargs, args.data());

  g_env.pool = std::make_unique<ThreadPool>(threads);
  g_env.read_gbs_1t = measure_read_gbs(nullptr);
  g_env.read_gbs_mt = measure_read_gbs(g_env.pool.get());
  std::printf("kernels: %s; threads: %d; memory read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n",
              isa_name(selected_isa()), threads, g_env.read_gbs_1t, g_env.read_gbs_mt, threads);
  std::printf("matvec: %lld cols, %zu MiB of weights per type; of_mem = weight GB/s / read bandwidth\n",
              static_cast<long long>(kCols), kWeightBytes >> 20);

  benchmark::RegisterBenchmark("mem/read/1t", bm_read, false)->UseRealTime();
  benchmark::RegisterBenchmark("mem/read/mt", bm_read, true)->UseRealTime();
  benchmark::RegisterBenchmark("mem/memcpy/1t", bm_memcpy)->UseRealTime();
  const DType types[] = {DType::Q8_0, DType::Q4_K, DType::MXFP4, DType::Q6_K, DType::F32, DType::F16,
                         DType::BF16, DType::Q4_0, DType::Q5_K, DType::Q2_K, DType::Q3_K, DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::TQ2_0,
                         DType::TQ1_0, DType::IQ1_S, DType::IQ1_M, DType::IQ2_XXS, DType::IQ2_XS,
                         DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S};
  for (DType t : types) {
    std::string n(dtype_name(t));
    const int64_t all = INT64_MAX, in_l2 = int64_t((1 << 20) / dtype_row_bytes(t, kCols));  // 1 MiB of weights
    benchmark::RegisterBenchmark(("matvec/" + n + "/1t").c_str(), bm_matmul, t, 1, false, all)->UseRealTime();
    benchmark::RegisterBenchmark(("matvec/" + n + "/mt").c_str(), bm_matmul, t, 1, true, all)->UseRealTime();
    benchmark::RegisterBenchmark(("matvec_l2/" + n + "/1t").c_str(), bm_matmul, t, 1, false, in_l2)->UseRealTime();
    benchmark::RegisterBenchmark(("matmul16_l2/" + n + "/1t").c_str(), bm_matmul, t, 16, false, in_l2)->UseRealTime();
    benchmark::RegisterBenchmark(("matmul16/" + n + "/mt").c_str(), bm_matmul, t, 16, true, all)->UseRealTime();
  }
  // A decode step's routed expert serves 1-4 rows (one per sequence that chose it): the
  // cost per row by rows (GFLOP/s equal across n: no sharing), weights in L2 and from
  // memory (256 MiB or more, as an expert just read into the RAM cache).
  for (DType t : {DType::Q8_0, DType::Q4_K})
    for (int64_t n = 1; n <= 4; ++n) {
      const int64_t in_l2 = int64_t((size_t(256) << 10) / dtype_row_bytes(t, kCols));
      benchmark::RegisterBenchmark(("rows_l2/" + std::string(dtype_name(t)) + "/n" + std::to_string(n) + "/1t").c_str(),
                                   bm_matmul, t, n, false, in_l2)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("rows_mem/" + std::string(dtype_name(t)) + "/n" + std::to_string(n) + "/1t").c_str(),
                                   bm_matmul, t, n, false, int64_t(64) << 10)
          ->UseRealTime();
    }
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::MXFP4, DType::Q4_K, DType::Q5_K})
    for (bool simd : {false, true})
      benchmark::RegisterBenchmark(("panel_pack/" + std::string(dtype_name(t)) + (simd ? "/simd" : "/scalar")).c_str(),
                                   bm_panel_pack, t, simd)
          ->UseRealTime();
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::F16})
    benchmark::RegisterBenchmark(("quantize_acts/for_" + std::string(dtype_name(t))).c_str(), bm_quantize_acts, t);
  for (DType t : types) benchmark::RegisterBenchmark(("fill_random/" + std::string(dtype_name(t))).c_str(), bm_fill_random, t);

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
