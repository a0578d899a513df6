#include "runtime/predict.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace deltafin {

namespace {

double div_or_zero(double a, double b) { return b > 0 ? a / b : 0.0; }

// Seconds to read `bytes` of experts: the share on disk at the disk's rate, the rest
// (a remote model's experts not yet cached) over the link.
double expert_read_s(const PredictInput& in, double bytes) {
  if (!in.remote) return div_or_zero(bytes, in.disk_bps);
  const double on_disk = std::clamp(in.on_disk, 0.0, 1.0);
  return div_or_zero(bytes * on_disk, in.disk_bps) + div_or_zero(bytes * (1 - on_disk), in.link_bps);
}

// I/O and compute of one pass over `k` tokens decoded together (k = 1: plain decode).
struct Pass {
  double misses = 0, read_bytes = 0, io_s = 0, expert_io_s = 0, compute_s = 0;
  // The pass's time with `compute` seconds of products: the experts' reads before
  // their layer's products (an MoE layer waits for them), the paged core's behind
  // them (the pager reads two layers ahead), and never less than the disk needs
  // for all the reads it shares.
  double seconds(double compute) const { return std::max(io_s, expert_io_s + compute); }
};
Pass pass(const PredictInput& in, int k) {
  Pass p;
  const double touched = in.streaming ? expected_distinct(in.experts_per_layer, in.experts_used, k) : 0.0;
  p.misses = in.streaming ? touched * in.moe_layers * (1 - std::clamp(in.hit_rate, 0.0, 1.0)) : 0.0;
  const double expert_read = p.misses * double(in.expert_bytes);
  p.read_bytes = expert_read + double(in.core_paged);
  p.expert_io_s = expert_read_s(in, expert_read);
  p.io_s = p.expert_io_s + div_or_zero(double(in.core_paged), in.disk_bps);
  // Weights are read once per pass; each token still runs its own experts.
  const double experts = double(in.experts_used) * in.moe_layers * double(in.expert_compute_bytes);
  p.compute_s = div_or_zero(double(in.core_touched), in.core_bps) + k * div_or_zero(experts, in.expert_bps);
  return p;
}

}  // namespace

double expected_distinct(int n, int used, int k) {
  if (n <= 0 || used <= 0 || k <= 0) return 0.0;
  const double miss_one = 1.0 - double(std::min(used, n)) / double(n);
  return double(n) * (1.0 - std::pow(miss_one, double(k)));
}

double uniform_hit_rate(int slots, int total) {
  if (total <= 0) return 1.0;
  return std::clamp(double(slots) / double(total), 0.0, 1.0);
}

Prediction predict(const PredictInput& in) {
  Prediction r;
  const Pass one = pass(in, 1);
  r.misses_per_token = one.misses;
  r.read_bytes_per_token = one.read_bytes;
  r.io_s = one.io_s;
  r.compute_s = one.compute_s;
  r.seconds_per_token = one.seconds(one.compute_s);
  r.overlap_seconds_per_token = std::max(one.io_s, one.compute_s);
  r.tokens_per_second = div_or_zero(1.0, r.seconds_per_token);

  const double p = std::clamp(in.spec_accept, 0.0, 1.0);
  const Pass two = pass(in, 2);
  r.spec_seconds_per_token = two.seconds(two.compute_s) / (1.0 + p);
  r.spec_tokens_per_second = div_or_zero(1.0, r.spec_seconds_per_token);

  if (in.prefill_tokens > 0) {
    const int b = std::max(1, in.batch);
    const int full = in.prefill_tokens / b, rest = in.prefill_tokens % b;
    auto batch_s = [&](int k) {
      const Pass q = pass(in, k);
      // Batched core products; experts batched too once each gets a few tokens of the
      // batch (k x used / experts >= 4), else one token at a time.
      const double batched = in.batch_bps > 0 ? in.batch_bps : in.core_bps;
      const double core = div_or_zero(double(in.core_touched) * k, batched);
      const double expert_tokens = double(k) * in.experts_used / std::max(1, in.experts_per_layer);
      const double expert_bytes = double(k) * in.experts_used * in.moe_layers * double(in.expert_compute_bytes);
      const double experts = div_or_zero(expert_bytes, expert_tokens >= 4 ? batched : in.expert_bps);
      return q.seconds(core + experts);
    };
    r.prefill_s = full * batch_s(b) + (rest ? batch_s(rest) : 0.0);
  }
  r.cold_start_s = div_or_zero(double(in.core_cold), in.disk_bps);
  if (in.remote) r.cold_start_s += div_or_zero(double(in.remote_core_missing), in.link_bps);
  return r;
}

Result<double> profile_hit_rate(const std::string& text, const std::string& identity, int slots) {
  std::istringstream f(text);
  std::string magic, id;
  std::getline(f, magic);
  std::getline(f, id);
  if (magic != "deltafin-expert-profile 1") return make_error("not an expert usage profile");
  if (id != identity) return make_error("written for another model ('{}', this model is '{}')", id, identity);
  std::vector<double> counts;
  int layer = 0, expert = 0;
  double c = 0;
  while (f >> layer >> expert >> c)
    if (c > 0) counts.push_back(c);
  double total = 0;
  for (double v : counts) total += v;
  if (!(total > 0)) return make_error("records no expert use");
  std::sort(counts.begin(), counts.end(), std::greater<>());
  double kept = 0;
  for (size_t i = 0; i < counts.size() && i < size_t(std::max(slots, 0)); ++i) kept += counts[i];
  return kept / total;
}

std::string plan_line(const MemoryPlan& p) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  return fmt::format("plan: {:.2f} GiB budget{}: core {:.2f} GiB resident{}, {} of {} experts cached ({:.1f}% hits if "
                     "routing is uniform); `deltafin plan` predicts the speed",
                     p.total / gib, p.automatic ? " (80% of the RAM available)" : "", p.core_resident / gib,
                     p.core_paged ? fmt::format(" + {:.2f} GiB paged per token", p.core_paged / gib) : "", p.slots,
                     p.n_experts, uniform_hit_rate(p.slots, p.n_experts) * 100);
}

}  // namespace deltafin
