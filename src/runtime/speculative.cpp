#include "runtime/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>

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
// A drafter that does not pay is still asked, so that a change (a repetitive
// stretch, a warmer cache) is noticed, but its guesses are shadows: not verified (a
// verify row reads experts of its own, about a token's worth when routing spreads),
// only compared with the tokens the target then emits. With a deterministic draft
// (argmax, lookup) a guess is accepted exactly when the target emits it, greedy or
// sampled, so a shadow measures acceptance as a verify would, at no I/O cost. A
// free drafter (n-gram lookup: under kCostlyDraft of a pass per token) shadows on
// every pass it does not draft. One whose drafting costs time of its own (the self
// draft: about half a plain pass per token) shadows one token every kProbeEvery
// passes, twice as long after each that does not bring it back, up to kProbeMax;
// at once kProbeMax if it would not pay even with kHopeful of its guesses accepted.
// A shadow whose guesses were all right is followed by one twice as long.
// A drafter's first guesses are shadows too: their cost is not known yet.
constexpr int kProbeEvery = 24;
constexpr int kProbeMax = 384;
constexpr int kProbeLen = 1;
constexpr double kHopeful = 0.9;
constexpr double kCostlyDraft = 0.1;
// Drafting starts only when the expected tokens per second beat a plain pass by this
// factor: the measurements behind the expectation are noisy (a shared machine, a
// cache that hits or misses), and a wrong start costs more than a late one; on text
// where drafts are accepted the gain is several times this margin.
constexpr double kStartMargin = 1.15;
// The pass cost model (fit_pass_cost): a drafted row's prior cost is a quarter of a
// plain pass (hopeful: drafting starts only where the shadows measured a high
// acceptance, and the first drafts measure it), and never under kRowFloor of one.
constexpr double kRowPrior = 0.25;
constexpr double kRowFloor = 0.25;
constexpr double kClip = 3.0;
// Prior acceptance (as if this many of that many guesses were accepted): hopeful, so
// that a drafter gets tried; measurements take over within a few passes.
constexpr double kPriorHits = 1.4, kPriorTrials = 2.0;

std::vector<std::unique_ptr<Drafter>> one(std::unique_ptr<Drafter> d) {
  std::vector<std::unique_ptr<Drafter>> v;
  v.push_back(std::move(d));
  return v;
}
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
  // Acceptance by depth, decayed: of the guesses at depth i (0: the first of a draft
  // or shadow) whose guesses before it were right, how many were judged and right.
  // Acceptance is bursty (a repeated stretch, then none), so one long run of right
  // guesses must not count as many independent ones: p(i) is conditional on i.
  double trials[SpecOptions::kMaxDraft] = {}, hits[SpecOptions::kMaxDraft] = {};
  double cost_s = 0, cost_n = 0;    // decayed: drafting time / tokens drafted
  int drafted = 0, accepted = 0;    // totals
  double draft_s = 0;
  int idle = 0;                     // passes since it was last asked
  int probe_every = kProbeEvery;    // passes between shadows of a costly drafter
  int probe_len = kProbeLen;        // tokens in its next shadow
  // Pending shadows: guesses for seq[pos...], not verified; `done` of them judged.
  struct Shadow {
    std::vector<int32_t> g;
    size_t pos = 0, done = 0;
  };
  std::deque<Shadow> shadows;
  int shadow_n = 0, shadow_hits = 0;  // totals: shadow guesses judged / right
  // Acceptance of guess i given guesses 0..i-1 were right: measured, pulled toward
  // depth i-1's (the prior at depth 0: kPriorHits of kPriorTrials).
  double p(int i) const {
    const double prior = i == 0 ? kPriorHits / kPriorTrials : p(i - 1);
    return (hits[i] + prior * kPriorTrials) / (trials[i] + kPriorTrials);
  }
  // p(i) less one standard error. Drafting starts where the first guess's
  // acceptance is high by more than the noise of a few dozen guesses (p_low(0)); a
  // point estimate drafts whenever it happens to be high, which where acceptance is
  // marginal (about what the rows cost) is most often just before a repeated
  // stretch ends. Deeper guesses use p(i): a bound at every depth compounds and cut
  // drafts short on text that repeats (168 passes instead of 126 for 512 tokens of
  // the trained model).
  double p_low(int i) const {
    const double q = p(i);
    return std::max(0.0, q - std::sqrt(q * (1 - q) / (trials[i] + kPriorTrials)));
  }
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

// Expected tokens per second with k guesses: (1 + p0 + p0 p1 + ... + p0..p(k-1))
// tokens for a + (b + c) k seconds; k = 0 is a plain pass. The best k for the
// acceptance at depth i (p_low(0), then p(i); or `hopeful` at every depth when > 0),
// 0 unless it beats a plain pass by kStartMargin.
int Speculator::best_k(const Lane& l, double hopeful, int limit) const {
  const double c = l.cost_per_token();
  double best = kStartMargin / a_, expect = 1.0, prob = 1.0;
  int best_k = 0;
  for (int k = 1; k <= limit; ++k) {
    prob *= hopeful > 0 ? hopeful : k == 1 ? l.p_low(0) : l.p(k - 1);
    expect += prob;
    const double rate = expect / (a_ + (b_ + c) * k);
    if (rate > best * 1.02) {
      best = rate;
      best_k = k;
    }
  }
  return best_k;
}

int Speculator::choose_k(const Lane& l, int limit) const {
  limit = std::min(limit, max_draft_);
  if (!adaptive_) return std::max(0, limit);
  if (limit <= 0 || !have_a_) return 0;  // the first pass is plain: it measures a
  int k = best_k(l, 0, limit);
  // A drafter's first guesses are shadows: its drafting cost is not known yet.
  if (l.cost_n == 0) k = 0;
  return k;
}

// Whether the drafter would pay if kHopeful of its guesses were accepted.
bool Speculator::could_pay(const Lane& l) const {
  return best_k(l, kHopeful, SpecOptions::kMaxDraft) > 0;
}

// One draft or shadow of l, started now: ages what was measured before it.
void Speculator::start(Lane& l) {
  for (int i = 0; i < SpecOptions::kMaxDraft; ++i) {
    l.trials[i] *= kCountDecay;
    l.hits[i] *= kCountDecay;
  }
}

// Guesses [from, to) of one draft or shadow were judged right, and guess `to` wrong
// if `wrong`.
void Speculator::count(Lane& l, int from, int to, bool wrong) {
  for (int i = from; i < to; ++i) {
    l.trials[i] += 1;
    l.hits[i] += 1;
  }
  if (wrong && to < SpecOptions::kMaxDraft) l.trials[to] += 1;
}

// Judges l's pending shadows against seq as far as seq reaches, each guess once; a
// wrong one ends its shadow. A costly drafter's shadow that was right throughout is
// followed by one twice as long.
void Speculator::resolve_shadows(Lane& l, const std::vector<int32_t>& seq) {
  for (auto it = l.shadows.begin(); it != l.shadows.end();) {
    Lane::Shadow& s = *it;
    size_t& i = s.done;
    const size_t i0 = i;
    bool wrong = false;
    for (; i < s.g.size() && s.pos + i < seq.size(); ++i) {
      if (seq[s.pos + i] != s.g[i]) {
        wrong = true;
        break;
      }
    }
    count(l, int(i0), int(i), wrong);
    l.shadow_n += int(i - i0) + (wrong ? 1 : 0);
    l.shadow_hits += int(i - i0);
    if (wrong) {
      l.probe_len = kProbeLen;
    } else if (i == s.g.size()) {
      if (could_pay(l)) {
        l.probe_len = std::min(2 * l.probe_len, SpecOptions::kMaxDraft);
        l.idle = l.probe_every;  // shadow again on the next pass
      }
    } else {
      ++it;
      continue;  // the rest is not emitted yet
    }
    it = l.shadows.erase(it);
  }
}

Status Speculator::draft(const std::vector<int32_t>& seq, SeqState& target, int limit, std::vector<int32_t>* out) {
  out->clear();
  last_lane_ = -1;
  for (auto& l : lanes_) resolve_shadows(*l, seq);
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& l = *lanes_[i];
    const int k = choose_k(l, limit);
    if (k == 0) {
      ++l.idle;
      DF_TRY(maybe_shadow(l, seq, target, limit));
      continue;
    }
    l.probe_every = kProbeEvery;  // it pays: should it stop, shadow soon
    l.probe_len = kProbeLen;
    l.idle = 0;
    DF_TRY(timed_propose(l, seq, target, k, out));
    if (!out->empty()) {
      start(l);
      last_lane_ = int(i);
      return {};
    }
  }
  return {};
}

Status Speculator::timed_propose(Lane& l, const std::vector<int32_t>& seq, SeqState& target, int k,
                                 std::vector<int32_t>* out) {
  const double t0 = now_s();
  DF_TRY(l.d->propose(seq, target, k, out));
  const double dt = now_s() - t0;
  st_.draft_s += dt;
  l.draft_s += dt;
  if (out->size() > size_t(k)) out->resize(size_t(k));
  if (!out->empty()) {
    l.cost_s = l.cost_s * kCountDecay + dt;
    l.cost_n = l.cost_n * kCountDecay + double(out->size());
  }
  return {};
}

// A shadow for a lane that does not draft this pass, when one is due (see above). A
// free drafter shadows on every pass, so that a repetitive stretch is seen from its
// first passes, not when a shadow started before it has been judged to its end.
Status Speculator::maybe_shadow(Lane& l, const std::vector<int32_t>& seq, SeqState& target, int limit) {
  if (!adaptive_ || !have_a_ || limit <= 0) return {};
  const bool free = l.cost_n > 0 && l.cost_per_token() <= kCostlyDraft * a_;
  if (free ? l.shadows.size() >= size_t(SpecOptions::kMaxDraft) : !l.shadows.empty()) return {};
  if (!free && l.cost_n > 0) {
    if (l.idle < l.probe_every) return {};
    l.probe_every = could_pay(l) ? std::min(2 * l.probe_every, kProbeMax) : kProbeMax;
  }
  l.idle = 0;
  // A free drafter's shadow is as long as a draft may be: it costs nothing.
  const int n = free ? SpecOptions::kMaxDraft : l.probe_len;
  Lane::Shadow s;
  DF_TRY(timed_propose(l, seq, target, std::min({limit, max_draft_, n}), &s.g));
  if (s.g.empty()) return {};
  s.pos = seq.size();
  start(l);
  l.shadows.push_back(std::move(s));
  return {};
}

// Pass times swing with the cache (a pass of misses costs many of hits) and with
// the machine's other load, so a and b move slowly (EMA) and a pass time is clipped
// to [1/3, 3] x the model's prediction before it counts: one stall does not switch
// speculation on or off. a starts as the mean of the first plain passes and b as
// kRowPrior x a until a pass with drafts has been measured. A pass with drafts
// updates b from its time beyond a, and a from its time less the rows (more
// weakly): a must stay current while drafts are verified on every pass, or a stale,
// high a makes the rows look free (b ~ 0) and drafting goes on at any acceptance.
// b never falls under kRowFloor x a.
void Speculator::fit_pass_cost(int k, double t) {
  if (have_a_) t = std::clamp(t, (a_ + b_ * k) / kClip, (a_ + b_ * k) * kClip);
  if (k == 0) {
    ++n_plain_;
    a_ += (t - a_) * std::max(kEma, 1.0 / n_plain_);
    if (n_spec_ == 0) b_ = kRowPrior * a_;
    have_a_ = true;
  } else if (have_a_) {
    ++n_spec_;
    // A pass of k rows weighs as k passes of one row would.
    b_ += (1 - std::pow(1 - kEma, k)) * (std::max(0.0, (t - a_) / k) - b_);
    a_ += 0.5 * kEma * (std::max(t - b_ * k, t / (1 + k)) - a_);
  }
  b_ = std::max(b_, kRowFloor * a_);
}

void Speculator::feedback(int n_drafted, int n_accepted, double pass_s) {
  ++st_.passes;
  fit_pass_cost(n_drafted, pass_s);
  if (n_drafted == 0) return;
  ++st_.spec_passes;
  st_.drafted += n_drafted;
  st_.accepted += n_accepted;
  if (last_lane_ < 0) return;
  Lane& l = *lanes_[size_t(last_lane_)];
  l.drafted += n_drafted;
  l.accepted += n_accepted;
  count(l, 0, n_accepted, n_accepted < n_drafted);
}

SpecStats Speculator::stats() const {
  SpecStats s = st_;
  for (const auto& l : lanes_)
    s.per_drafter.push_back(fmt::format(
        "{}: guessed {} tokens, {} right ({:.1f}%); {:.2f} ms to guess a token; its first guess is now right "
        "{:.0f}% of the time; {} trial guesses while it was off, {} right",
        l->d->name(), l->drafted, l->accepted, l->drafted ? 100.0 * l->accepted / l->drafted : 0.0,
        1e3 * l->cost_per_token(), 100.0 * l->p(0), l->shadow_n, l->shadow_hits));
  s.per_drafter.push_back(fmt::format("a checking pass takes about {:.2f} ms + {:.2f} ms per guessed token",
                                      1e3 * a_, 1e3 * b_));
  return s;
}

Result<DrafterFactory> make_drafter_factory(const SpecOptions& opts, Engine& target, const Tokenizer& tok,
                                            int n_ctx, int threads) {
  Model& m = target.model();
  ExpertStore* store = target.streaming_store();
  switch (opts.mode) {
    case SpecMode::Off:
      return DrafterFactory();
    case SpecMode::Ngram:
      return DrafterFactory([] { return one(make_ngram_drafter()); });
    case SpecMode::Self:
      return DrafterFactory([&m] { return one(make_self_drafter(m)); });
    case SpecMode::Mtp:
      if (!m.has_mtp())
        return make_error("--spec mtp: the {} model has no multi-token-prediction (nextn) block", m.info().arch);
      return DrafterFactory([&m] { return one(make_mtp_drafter(m)); });
    case SpecMode::Draft: {
      EngineOptions eo;
      eo.threads = threads;
      eo.env = opts.env;
      DF_ASSIGN(auto de, Engine::open(opts.draft_path, eo));
      DF_ASSIGN(auto make, model_drafters(std::move(de), tok, n_ctx));
      return DrafterFactory([make] { return one(make()); });
    }
    case SpecMode::Auto: {
      // N-gram guesses first (free); the model's own MTP block next where it has one;
      // self-speculation only when experts stream: with every expert resident its
      // draft costs as much as the target.
      const bool mtp = m.has_mtp(), self = opts.auto_self && store;
      return DrafterFactory([&m, mtp, self] {
        std::vector<std::unique_ptr<Drafter>> d;
        d.push_back(make_ngram_drafter());
        if (mtp) d.push_back(make_mtp_drafter(m));
        if (self) d.push_back(make_self_drafter(m));
        return d;
      });
    }
  }
  return DrafterFactory();
}

Result<std::unique_ptr<Speculator>> make_speculator(const SpecOptions& opts, Engine& target, const Tokenizer& tok,
                                                    int n_ctx, int threads) {
  DF_ASSIGN(DrafterFactory make, make_drafter_factory(opts, target, tok, n_ctx, threads));
  if (!make) return std::unique_ptr<Speculator>();
  return std::make_unique<Speculator>(make(), opts.max_draft, opts.adaptive);
}

}  // namespace deltafin
