#include "runtime/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// Measurements fade: the weight of a pass halves after about 10 (EMA) or 20 (counts) more.
constexpr double kEma = 0.07;
constexpr double kCountDecay = 0.965;
// A drafter that does not pay is still tried every kProbeEvery passes with a short
// draft, so that a change (a repetitive stretch, a warmer cache) is noticed. One
// whose drafting costs time of its own (over kCostlyDraft of a pass per token: the
// self draft costs about a plain pass per token on a loaded machine) waits twice as
// long after each probe that does not bring it back, up to kProbeMax passes, so
// that on text where it never pays its probes cost a pass in hundreds. A free
// drafter's probe (n-gram) costs only the verify rows, and only when it has a guess.
constexpr int kProbeEvery = 24;
constexpr int kProbeMax = 384;
constexpr int kProbeLen = 2;
constexpr double kCostlyDraft = 0.1;
// Prior acceptance (as if this many of that many guesses were accepted): hopeful, so
// that a drafter gets tried; measurements take over within a few passes.
constexpr double kPriorHits = 1.4, kPriorTrials = 2.0;
}  // namespace

Status parse_spec_mode(const std::string& s, SpecOptions* out) {
  if (s == "auto") out->mode = SpecMode::Auto;
  else if (s == "off") out->mode = SpecMode::Off;
  else if (s == "ngram") out->mode = SpecMode::Ngram;
  else if (s == "self") out->mode = SpecMode::Self;
  else if (s == "mtp") out->mode = SpecMode::Mtp;
  else if (s.rfind("draft:", 0) == 0 && s.size() > 6) {
    out->mode = SpecMode::Draft;
    out->draft_path = s.substr(6);
  } else {
    return make_error("bad --spec '{}' (expected auto, off, ngram, self, mtp or draft:PATH)", s);
  }
  return {};
}

const char* spec_mode_name(SpecMode m) {
  switch (m) {
    case SpecMode::Off: return "off";
    case SpecMode::Auto: return "auto";
    case SpecMode::Ngram: return "ngram";
    case SpecMode::Self: return "self";
    case SpecMode::Draft: return "draft";
    case SpecMode::Mtp: return "mtp";
  }
  return "?";
}

struct Speculator::Lane {
  std::unique_ptr<Drafter> d;
  double trials = 0, hits = 0;      // decayed: guesses reached / accepted
  double cost_s = 0, cost_n = 0;    // decayed: drafting time / tokens drafted
  int drafted = 0, accepted = 0;    // totals
  double draft_s = 0;
  int idle = 0;                     // passes since it was last asked
  int probe_every = kProbeEvery;    // passes between probes while it does not pay
  double alpha() const { return (hits + kPriorHits) / (trials + kPriorTrials); }
  double cost_per_token() const { return cost_n > 0 ? cost_s / cost_n : 0.0; }
};

Speculator::Speculator(std::vector<std::unique_ptr<Drafter>> drafters, int max_draft, bool adaptive)
    : max_draft_(std::clamp(max_draft, 0, SpecOptions::kMaxDraft)), adaptive_(adaptive) {
  for (auto& d : drafters) {
    lanes_.push_back(std::make_unique<Lane>());
    lanes_.back()->d = std::move(d);
  }
}

Speculator::~Speculator() = default;

// Expected tokens per second with k guesses: (1 + alpha + ... + alpha^k) tokens for
// a + (b + c) k seconds; k = 0 is a plain pass.
int Speculator::choose_k(const Lane& l, int limit) const {
  limit = std::min(limit, max_draft_);
  if (!adaptive_) return std::max(0, limit);
  if (limit <= 0 || !have_a_) return 0;  // the first pass is plain: it measures a
  const double alpha = l.alpha();
  const double b = b_;
  const double c = l.cost_per_token();
  double best = 1.0 / a_, expect = 1.0, p = 1.0;
  int best_k = 0;
  for (int k = 1; k <= limit; ++k) {
    p *= alpha;
    expect += p;
    const double rate = expect / (a_ + (b + c) * k);
    if (rate > best * 1.02) {
      best = rate;
      best_k = k;
    }
  }
  // A drafter's first draft is a probe: its drafting cost is not known yet (a self
  // draft costs about a pass per token).
  if (l.cost_n == 0) best_k = std::min(best_k, kProbeLen);
  return best_k;
}

Status Speculator::draft(const std::vector<int32_t>& seq, SeqState& target, int limit, std::vector<int32_t>* out) {
  out->clear();
  last_lane_ = -1;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& l = *lanes_[i];
    int k = choose_k(l, limit);
    if (k > 0) {
      l.probe_every = kProbeEvery;  // it pays: should it stop, probe soon
    } else if (have_a_ && l.idle >= l.probe_every) {
      k = std::min({limit, max_draft_, kProbeLen});
      if (l.cost_per_token() > kCostlyDraft * a_) l.probe_every = std::min(2 * l.probe_every, kProbeMax);
    }
    if (k == 0) {
      ++l.idle;
      continue;
    }
    l.idle = 0;
    const double t0 = now_s();
    DF_TRY(l.d->propose(seq, target, k, out));
    const double dt = now_s() - t0;
    st_.draft_s += dt;
    l.draft_s += dt;
    if (out->size() > size_t(k)) out->resize(size_t(k));
    if (!out->empty()) {
      l.cost_s = l.cost_s * kCountDecay + dt;
      l.cost_n = l.cost_n * kCountDecay + double(out->size());
      last_lane_ = int(i);
      return {};
    }
  }
  return {};
}

void Speculator::feedback(int n_drafted, int n_accepted, double pass_s) {
  ++st_.passes;
  // Pass times swing with the cache (a pass of misses costs many of hits), so a
  // starts as the mean of the first plain passes and b from a prior of a / 4, and
  // both move slowly: one unlucky pass does not switch speculation off.
  if (n_drafted == 0) {
    ++n_plain_;
    a_ += (pass_s - a_) * std::max(kEma, 1.0 / n_plain_);
    if (!have_a_) b_ = 0.25 * a_;
    have_a_ = true;
    return;
  }
  ++st_.spec_passes;
  st_.drafted += n_drafted;
  st_.accepted += n_accepted;
  if (have_a_) b_ += kEma * (std::max(0.0, (pass_s - a_) / n_drafted) - b_);
  if (last_lane_ < 0) return;
  Lane& l = *lanes_[size_t(last_lane_)];
  l.drafted += n_drafted;
  l.accepted += n_accepted;
  // Guess i is judged only if guesses 0..i-1 were accepted.
  l.trials = l.trials * kCountDecay + std::min(n_accepted + 1, n_drafted);
  l.hits = l.hits * kCountDecay + n_accepted;
}

SpecStats Speculator::stats() const {
  SpecStats s = st_;
  for (const auto& l : lanes_)
    s.per_drafter.push_back(fmt::format(
        "{}: {} drafted, {} accepted ({:.1f}%), {:.2f} ms drafting per token; acceptance now {:.2f}",
        l->d->name(), l->drafted, l->accepted, l->drafted ? 100.0 * l->accepted / l->drafted : 0.0,
        l->drafted ? 1e3 * l->draft_s / l->drafted : 0.0, l->alpha()));
  s.per_drafter.push_back(fmt::format("verify pass model: {:.2f} ms + {:.2f} ms per drafted token", 1e3 * a_,
                                      1e3 * b_));
  return s;
}

Result<std::unique_ptr<Speculator>> make_speculator(const SpecOptions& opts, Engine& target, const Tokenizer& tok,
                                                    int n_ctx, int threads) {
  std::vector<std::unique_ptr<Drafter>> d;
  switch (opts.mode) {
    case SpecMode::Off:
      return std::unique_ptr<Speculator>();
    case SpecMode::Ngram:
      d.push_back(make_ngram_drafter());
      break;
    case SpecMode::Self:
      d.push_back(make_self_drafter(target.model(), target.streaming_store()));
      break;
    case SpecMode::Mtp:
      if (!target.model().has_mtp())
        return make_error("--spec mtp: the {} model has no multi-token-prediction (nextn) block",
                          target.model().info().arch);
      d.push_back(make_mtp_drafter(target.model()));
      break;
    case SpecMode::Draft: {
      EngineOptions eo;
      eo.threads = threads;
      DF_ASSIGN(auto de, Engine::open(opts.draft_path, eo));
      DF_ASSIGN(auto md, make_model_drafter(std::move(de), tok, n_ctx));
      d.push_back(std::move(md));
      break;
    }
    case SpecMode::Auto:
      // N-gram guesses first (free); self-speculation only when experts stream: with
      // every expert resident its draft costs as much as the target.
      // The model's own MTP block next where it has one.
      d.push_back(make_ngram_drafter());
      if (target.model().has_mtp()) d.push_back(make_mtp_drafter(target.model()));
      if (target.streaming_store()) d.push_back(make_self_drafter(target.model(), target.streaming_store()));
      break;
  }
  return std::make_unique<Speculator>(std::move(d), opts.max_draft, opts.adaptive);
}

}  // namespace deltafin
