// Speculative decoding, teacher-forced: what n-gram speculation would buy a model
// that emits a given text, measured with the real verify passes of a real model
// under a memory budget (experts streaming).
//
// A random-weight model does not write the text, so acceptance cannot come from
// its predictions: the replay takes the text's own next tokens as "the model's
// output" and counts a guess as accepted when it equals them. Everything else is
// real: each pass evaluates the pending token and the guesses in one forward pass,
// reading the union of their experts, and the state is truncated after the
// accepted prefix. So the figures are (acceptance of prompt lookup on this text) x
// (cost of verify passes on this model and budget). Plain decoding of the same text
// (one token per pass) is the baseline.
//
//   bench_spec MODEL TEXT_FILE [--mem 1G] [--tokens 256] [--spec-max 8] [--fixed] [--threads N] [--reps R]
//
// With --reps R the plain and speculative replays alternate R times (each in a fresh
// engine, so each starts with a cold cache) and the best and the median of each are
// compared: on a shared machine single runs swing by a quarter.
//
// The text is split at a line "<<<EMIT>>>": the prompt before it, the emitted text
// after it (at most --tokens tokens). bench/spec_texts/ holds a few.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "format/model_file.h"
#include "runtime/engine.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

using namespace deltafin;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool parse_mem(const std::string& s, uint64_t* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return false;
  const std::string u = end;
  double m = 1;
  if (u == "K" || u == "k") m = 1024.0;
  else if (u == "M" || u == "m") m = 1024.0 * 1024;
  else if (u == "G" || u == "g") m = 1024.0 * 1024 * 1024;
  else if (!u.empty()) return false;
  *out = uint64_t(v * m);
  return *out > 0;
}

struct Result1 {
  int emitted = 0, passes = 0, drafted = 0, accepted = 0;
  double seconds = 0;
  uint64_t bytes = 0;
};

// Emits ids[p..p+n) (the first from the prefill) with or without n-gram speculation.
Status replay(const std::string& path, const EngineOptions& eo, const std::vector<int32_t>& ids, int p, int n,
              int spec_max, bool adaptive, bool speculate, Result1* out) {
  DF_ASSIGN(auto engine, Engine::open(path, eo));
  Model& m = engine->model();
  const int64_t V = m.info().n_vocab;
  auto st = m.new_state(p + n + 32);
  std::vector<float> rows(size_t(V) * size_t(spec_max + 1));
  DF_TRY(m.forward(*st, ids.data(), p, rows.data(), false));
  std::vector<std::unique_ptr<Drafter>> d;
  d.push_back(make_ngram_drafter());
  Speculator spec(std::move(d), spec_max, adaptive);
  StreamingExpertStore* store = engine->streaming_store();
  const uint64_t b0 = store ? store->stats().bytes_read : 0;
  const double t0 = now_s();
  int pos = p;  // ids[pos] is pending: emitted, not yet in the state
  Result1 r;
  r.emitted = 1;
  std::vector<int32_t> seq(ids.begin(), ids.begin() + p + 1), drafts, batch;
  while (r.emitted < n) {
    drafts.clear();
    const int limit = n - r.emitted - 1;
    if (speculate && limit > 0) DF_TRY(spec.draft(seq, *st, limit, &drafts));
    const int k = int(drafts.size());
    int a = 0;
    while (a < k && drafts[size_t(a)] == ids[size_t(pos + 1 + a)]) ++a;
    batch.assign(1, ids[size_t(pos)]);
    batch.insert(batch.end(), drafts.begin(), drafts.end());
    const int base = st->n_past;
    const double tp = now_s();
    DF_TRY(m.forward(*st, batch.data(), k + 1, rows.data(), k > 0));
    spec.feedback(k, a, now_s() - tp);
    DF_TRY(st->truncate(base + 1 + a));
    ++r.passes;
    r.drafted += k;
    r.accepted += a;
    r.emitted += a + 1;
    for (int i = 1; i <= a + 1; ++i) seq.push_back(ids[size_t(pos + i)]);
    pos += a + 1;
  }
  r.seconds = now_s() - t0;
  r.bytes = store ? store->stats().bytes_read - b0 : 0;
  *out = r;
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: bench_spec MODEL TEXT_FILE [--mem 1G] [--tokens 256] [--spec-max 8] [--fixed] "
                       "[--threads N] [--reps R]\n");
    return 2;
  }
  const std::string model = argv[1], text_path = argv[2];
  std::string mem = "0";
  int tokens = 256, spec_max = 8, threads = 0, reps = 1;
  bool fixed = false;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--mem") mem = next();
    else if (a == "--tokens") tokens = std::atoi(next().c_str());
    else if (a == "--spec-max") spec_max = std::atoi(next().c_str());
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--fixed") fixed = true;
    else if (a == "--reps") reps = std::max(1, std::atoi(next().c_str()));
    else {
      fmt::print(stderr, "unknown option '{}'\n", a);
      return 2;
    }
  }
  std::ifstream f(text_path, std::ios::binary);
  if (!f) {
    fmt::print(stderr, "cannot read '{}'\n", text_path);
    return 1;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  EngineOptions eo;
  eo.threads = threads;
  if (mem != "0" && !parse_mem(mem, &eo.mem_bytes)) {
    fmt::print(stderr, "bad --mem '{}'\n", mem);
    return 2;
  }
  const std::string text = ss.str(), marker = "\n<<<EMIT>>>\n";
  const size_t cut = text.find(marker);
  if (cut == std::string::npos) {
    fmt::print(stderr, "'{}' has no line <<<EMIT>>> between the prompt and the text to emit\n", text_path);
    return 1;
  }
  std::vector<int32_t> ids;
  int prompt = 0;
  {
    auto file = ModelFile::open(model, local_file_opener());
    if (!file.ok()) {
      fmt::print(stderr, "{}\n", file.error().message);
      return 1;
    }
    auto tok = Tokenizer::from_gguf((*file)->meta());
    if (!tok.ok()) {
      fmt::print(stderr, "{}\n", tok.error().message);
      return 1;
    }
    ids = tok->encode(text.substr(0, cut + 1), true, false);
    prompt = int(ids.size());
    const std::vector<int32_t> rest = tok->encode(text.substr(cut + marker.size()), false, false);
    ids.insert(ids.end(), rest.begin(), rest.end());
    tokens = std::min(tokens, int(rest.size()));
  }
  fmt::print("text: {} (prompt {} tokens, emitted {}), mem {}, spec-max {}{}\n", text_path, prompt, tokens, mem,
             spec_max, fixed ? " fixed" : " adaptive");
  std::vector<double> rate[2];
  Result1 base;
  for (int rep = 0; rep < reps; ++rep)
    for (int s = 0; s < 2; ++s) {
      Result1 r;
      Status st = replay(model, eo, ids, prompt, tokens, spec_max, !fixed, s == 1, &r);
      if (!st.ok()) {
        fmt::print(stderr, "{}\n", st.error().message);
        return 1;
      }
      if (s == 0) base = r;
      rate[s].push_back(r.emitted / r.seconds);
      fmt::print("{:6}: {:7.2f} tok/s  {:6.2f} MB read/token  {:5.2f} tokens/pass  acceptance {:5.1f}% ({}/{})  "
                 "speedup {:.2f}x\n",
                 s ? "ngram" : "plain", r.emitted / r.seconds, r.bytes / 1e6 / r.emitted,
                 double(r.emitted) / r.passes, r.drafted ? 100.0 * r.accepted / r.drafted : 0.0, r.accepted,
                 r.drafted, (r.emitted / r.seconds) / (base.emitted / base.seconds));
    }
  if (reps > 1) {
    auto best = [](std::vector<double> v) { return *std::max_element(v.begin(), v.end()); };
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    fmt::print("best of {}: plain {:.2f}, ngram {:.2f} tok/s: {:.2f}x; median: plain {:.2f}, ngram {:.2f}: {:.2f}x\n",
               reps, best(rate[0]), best(rate[1]), best(rate[1]) / best(rate[0]), median(rate[0]),
               median(rate[1]), median(rate[1]) / median(rate[0]));
    // Each pair ran back to back: its ratio cancels most of the machine's slow drift.
    std::vector<double> pairs;
    for (int r = 0; r < reps; ++r) pairs.push_back(rate[1][size_t(r)] / rate[0][size_t(r)]);
    std::sort(pairs.begin(), pairs.end());
    auto quantile = [&](double q) {  // linear interpolation between order statistics
      const double pos = q * double(pairs.size() - 1);
      const size_t lo = size_t(pos);
      const size_t hi = std::min(lo + 1, pairs.size() - 1);
      return pairs[lo] + (pos - double(lo)) * (pairs[hi] - pairs[lo]);
    };
    fmt::print("pairwise ngram/plain over {} pairs: median {:.2f}x, quartiles {:.2f}x-{:.2f}x, range {:.2f}x-{:.2f}x\n",
               reps, quantile(0.5), quantile(0.25), quantile(0.75), pairs.front(), pairs.back());
  }
  return 0;
}
