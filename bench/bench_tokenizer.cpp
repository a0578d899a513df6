// Tokenizer throughput: encode MB/s per vocabulary on a fixed 2 MB text (made-up
// prose in several scripts with numbers and code, generated deterministically),
// and decode tokens/s.
// The target is >= 5 MB/s of encode on one core.
//
//   build/bench/bench_tokenizer [--benchmark_filter=encode/llama-bpe]
//
// Vocabularies come from $DELTAFIN_VOCAB_DIR, else ../shared/vocab (run from the
// repository root); without them only the synthetic byte-level vocabulary runs.
#include <benchmark/benchmark.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "io/byte_source.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

// Text with a natural-looking word distribution: a 30k-word lexicon of made-up
// words (Latin, Cyrillic and CJK), drawn Zipf-like, with numbers, punctuation,
// code-like lines and whitespace runs. Repetition is like real text, so the
// encoder's per-call word cache helps about as much as it would there.
std::string make_text(size_t bytes) {
  std::mt19937 rng(42);
  static const char* const kLatin[] = {"ka", "to", "re", "in", "an", "the", "st", "or", "en", "qu", "ly",
                                       "tion", "ex", "pro", "al", "ing", "er", "s", "mo", "di", "ver"};
  static const char* const kCyr[] = {"\xD0\xBF\xD1\x80\xD0\xB8", "\xD0\xB2\xD0\xB5", "\xD1\x82",
                                     "\xD0\xBC\xD0\xB8\xD1\x80", "\xD0\xBD\xD0\xBE"};
  std::vector<std::string> lexicon;
  for (int i = 0; i < 30000; ++i) {
    std::string w;
    const int kind = i % 10;
    const int syl = 1 + int(rng() % 4);
    for (int k = 0; k < syl; ++k) {
      if (kind < 7) {
        w += kLatin[rng() % std::size(kLatin)];
      } else if (kind < 9) {
        w += kCyr[rng() % std::size(kCyr)];
      } else {
        unicode::append_utf8(0x4E00 + rng() % 0x5000, w);  // CJK ideographs
      }
    }
    if (kind < 7 && rng() % 8 == 0) w[0] = char(std::toupper(uint8_t(w[0])));
    lexicon.push_back(std::move(w));
  }
  std::vector<double> weights(lexicon.size());
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 1.0 / double(i + 1);
  std::discrete_distribution<size_t> zipf(weights.begin(), weights.end());
  std::string s;
  while (s.size() < bytes) {
    const unsigned r = rng() % 100;
    if (r < 80) {
      s += ' ';
      s += lexicon[zipf(rng)];
    } else if (r < 85) {
      s += ' ' + std::to_string(rng() % 100000);
    } else if (r < 93) {
      s += ",.;:!?'\"()"[rng() % 10];
    } else if (r < 96) {
      s += "\n";
    } else if (r < 98) {
      s += "\n    x_" + std::to_string(rng() % 100) + " = f(a[i], b->c) + 0x" + std::to_string(rng() % 999) + ";";
    } else {
      s += "'s";
    }
  }
  return s;
}

const std::string& text() {
  static const std::string t = make_text(2 << 20);
  return t;
}

// A byte-level vocabulary with no merges: the pre-tokenizer and per-byte path.
std::unique_ptr<Tokenizer> synthetic() {
  GGUFFile f;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(unicode::byte_to_symbol(uint8_t(b)));
  f.set("tokenizer.ggml.model", GGUFValue::str("gpt2"));
  f.set("tokenizer.ggml.pre", GGUFValue::str("llama-bpe"));
  f.set("tokenizer.ggml.tokens", GGUFValue::string_array(tokens));
  f.set("tokenizer.ggml.merges", GGUFValue::string_array({}));
  auto t = Tokenizer::from_gguf(f);
  return t.ok() ? std::make_unique<Tokenizer>(std::move(t).value()) : nullptr;
}

std::unique_ptr<Tokenizer> load(const fs::path& path) {
  auto src = open_file_source(path.string());
  if (!src.ok()) return nullptr;
  auto meta = parse_gguf(**src);
  if (!meta.ok()) return nullptr;
  auto t = Tokenizer::from_gguf(*meta);
  return t.ok() ? std::make_unique<Tokenizer>(std::move(t).value()) : nullptr;
}

void bench_encode(benchmark::State& state, const Tokenizer* tok) {
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text(), false, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * text().size()));
  state.counters["tokens"] = double(n_tokens);
}

void bench_decode(benchmark::State& state, const Tokenizer* tok) {
  const auto ids = tok->encode(text(), false, false);
  for (auto _ : state) {
    std::string s = tok->decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations() * ids.size()));
}

std::vector<std::unique_ptr<Tokenizer>> g_tokenizers;  // alive for the whole run

void register_all() {
  if (auto t = synthetic()) {
    benchmark::RegisterBenchmark("encode/synthetic-bytes", bench_encode, t.get())->Unit(benchmark::kMillisecond);
    g_tokenizers.push_back(std::move(t));
  }
  const char* env = std::getenv("DELTAFIN_VOCAB_DIR");
  const fs::path dir = env ? fs::path(env) : fs::path(DELTAFIN_SHARED_DIR) / "vocab";
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".gguf") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    auto t = load(p);
    if (!t) continue;
    std::string name = p.stem().string();
    if (name.rfind("ggml-vocab-", 0) == 0) name = name.substr(11);
    benchmark::RegisterBenchmark(("encode/" + name).c_str(), bench_encode, t.get())->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode/" + name).c_str(), bench_decode, t.get())->Unit(benchmark::kMillisecond);
    g_tokenizers.push_back(std::move(t));
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
