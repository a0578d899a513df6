#include "runtime/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace deltafin {

int32_t argmax(const float* logits, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = int32_t(i);
  return best;
}

TokenLogprob token_logprob(const float* logits, int64_t n_vocab, int32_t id, int top_n) {
  const float mx = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lse = double(mx) + std::log(sum);
  TokenLogprob t;
  t.id = id;
  t.logprob = float(double(logits[id]) - lse);
  top_n = int(std::clamp<int64_t>(top_n, 0, std::min<int64_t>(kMaxTopLogprobs, n_vocab)));
  std::vector<int32_t> best;  // the top_n so far, best first
  best.reserve(size_t(top_n) + 1);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  for (int32_t i = 0; i < n_vocab && top_n > 0; ++i) {
    if (int(best.size()) == top_n && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (int(best.size()) > top_n) best.pop_back();
  }
  for (int32_t b : best) t.top.emplace_back(b, float(double(logits[b]) - lse));
  return t;
}

std::optional<SamplingProblem> check_sampling(const SamplingParams& p) {
  auto bad = [](const char* field, const char* flag, float v, const char* want) {
    return SamplingProblem{field, flag, fmt::format("is {}; it must be {}", v, want)};
  };
  if (!std::isfinite(p.temperature)) return bad("temperature", "--temp", p.temperature, "a finite number");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p", "--top-p", p.top_p, "above 0 and at most 1");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p", "--min-p", p.min_p, "between 0 and 1");
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
    return bad("repeat_penalty", "--repeat-penalty", p.repeat_penalty, "a finite number above 0");
  if (!std::isfinite(p.frequency_penalty))
    return bad("frequency_penalty", "--frequency-penalty", p.frequency_penalty, "a finite number");
  if (!std::isfinite(p.presence_penalty))
    return bad("presence_penalty", "--presence-penalty", p.presence_penalty, "a finite number");
  for (const auto& [id, b] : p.logit_bias)
    if (!std::isfinite(b)) return bad("logit_bias", "--logit-bias", b, "a finite number");
  return std::nullopt;
}

Sampler::Sampler(const SamplingParams& p) : p_(p) {
  rng_.seed(p.seed == 0xFFFFFFFF ? std::random_device{}() : p.seed);
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(p_.seed == 0xFFFFFFFF ? std::random_device{}() : p_.seed);
}

void Sampler::accept(int32_t id) { history_.push_back(id); }

void Sampler::candidates(float* logits, int64_t n_vocab) {
  // Penalties over the last penalty_last_n tokens.
  if (p_.repeat_penalty != 1.0f || p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int> count;
    const size_t n = std::min(history_.size(), size_t(std::max(0, p_.penalty_last_n)));
    for (size_t i = history_.size() - n; i < history_.size(); ++i) ++count[history_[i]];
    for (auto [id, c] : count) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = logits[id];
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= float(c) * p_.frequency_penalty + p_.presence_penalty;
    }
  }
  for (auto [id, b] : p_.logit_bias)
    if (id >= 0 && id < n_vocab) logits[id] += b;

  cands_.clear();
  if (p_.temperature <= 0.0f) {
    cands_.push_back({argmax(logits, n_vocab), 1.0f});
    return;
  }
  // Candidates sorted by logit (descending, lower id first on ties).
  std::vector<int32_t> idx(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) idx[size_t(i)] = int32_t(i);
  auto cmp = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = idx.size();
  if (p_.top_k > 0 && size_t(p_.top_k) < keep) {
    keep = size_t(p_.top_k);
    std::partial_sort(idx.begin(), idx.begin() + long(keep), idx.end(), cmp);
  } else {
    std::sort(idx.begin(), idx.end(), cmp);
  }
  idx.resize(keep);
  // Softmax over the kept candidates (at temperature 1 for the filters, as llama.cpp).
  auto probs = [&](float temp) {
    std::vector<float> p(idx.size());
    const float mx = logits[idx[0]];
    double sum = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
      p[i] = std::exp((logits[idx[i]] - mx) / temp);
      sum += p[i];
    }
    for (float& v : p) v = float(v / sum);
    return p;
  };
  if (p_.top_p < 1.0f) {
    std::vector<float> p = probs(1.0f);
    double cum = 0;
    size_t n = 0;
    while (n < p.size()) {
      cum += p[n++];
      if (cum >= p_.top_p) break;
    }
    idx.resize(std::max<size_t>(1, n));
  }
  if (p_.min_p > 0.0f) {
    const float thresh = logits[idx[0]] + std::log(p_.min_p);
    size_t n = 1;
    while (n < idx.size() && logits[idx[n]] >= thresh) ++n;
    idx.resize(n);
  }
  std::vector<float> p = probs(p_.temperature);
  for (size_t i = 0; i < idx.size(); ++i) cands_.push_back({idx[i], p[i]});
}

int32_t Sampler::sample(float* logits, int64_t n_vocab) {
  candidates(logits, n_vocab);
  if (p_.temperature <= 0.0f) return cands_[0].first;
  std::vector<float> p(cands_.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = cands_[i].second;
  std::discrete_distribution<size_t> dist(p.begin(), p.end());
  return cands_[dist(rng_)].first;
}

int32_t Sampler::verify(float* logits, int64_t n_vocab, int32_t draft, bool* accepted) {
  candidates(logits, n_vocab);
  if (p_.temperature <= 0.0f) {
    *accepted = cands_[0].first == draft;
    return cands_[0].first;
  }
  std::vector<float> p(cands_.size());
  float p_draft = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = cands_[i].second;
    if (cands_[i].first == draft) p_draft = p[i];
  }
  if (p_draft > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < double(p_draft)) {
    *accepted = true;
    return draft;
  }
  *accepted = false;
  for (size_t i = 0; i < p.size(); ++i)
    if (cands_[i].first == draft) p[i] = 0;
  // (p_draft == 1 cannot get here: u < 1.)
  std::discrete_distribution<size_t> dist(p.begin(), p.end());
  return cands_[dist(rng_)].first;
}

}  // namespace deltafin
