// Helpers shared by the subcommands: error exits, id lists, prompt tokenisation.
#pragma once
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "format/model_file.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"
#include <CLI/CLI.hpp>

namespace deltafin::tools {

// In a subcommand's runner: print the error and return 1.
#define DF_ASSIGN_OR_EXIT(decl, expr)                                              \
  auto DF_CONCAT(r_, __LINE__) = (expr);                                           \
  if (!DF_CONCAT(r_, __LINE__).ok()) {                                             \
    fmt::print(stderr, "error: {}\n", DF_CONCAT(r_, __LINE__).error().message);    \
    return 1;                                                                      \
  }                                                                                \
  decl = std::move(DF_CONCAT(r_, __LINE__)).value()
#define DF_CHECK_OR_EXIT(expr)                                     \
  do {                                                             \
    auto s_ = (expr);                                              \
    if (!s_.ok()) {                                                \
      fmt::print(stderr, "error: {}\n", s_.error().message);       \
      return 1;                                                    \
    }                                                              \
  } while (0)

// The largest -c/--ctx-size a command takes (16M positions): more is a usage
// error, not an allocation to fail.
constexpr int kMaxCtxSize = 1 << 24;

// The prompt of -f/--file for a context of n_ctx tokens: an error naming the file
// when it cannot be read, or when it holds more bytes than n_ctx tokens of `tok`
// can (its longest token's bytes each) — found after reading at most that many, so
// that /dev/zero or a huge file is refused without filling memory.
Result<std::string> read_prompt_file(const std::string& path, int n_ctx, const Tokenizer& tok);

Result<std::vector<int32_t>> parse_ids(const std::string& s);
// Before a command writes `path`: refuses an existing file unless `force` (`flag`
// names the option that gave the path), and creates missing parent directories.
Status prepare_output(const std::string& path, bool force, const std::string& flag);
// Tokenizes a prompt as llama.cpp does for completion: BOS per metadata, special
// tokens parsed.
Result<std::vector<int32_t>> tokenize_prompt(const ModelFile& file, const std::string& text);

// The sampling flags shared by run and chat (llama.cpp's names).
inline void add_sampling_options(CLI::App* sub, SamplingParams& sp) {
  sub->add_option("--temp", sp.temperature, "Temperature (0: greedy)")->capture_default_str();
  sub->add_option("--top-k", sp.top_k, "Top-k (0: off)")->capture_default_str();
  sub->add_option("--top-p", sp.top_p, "Top-p (1: off)")->capture_default_str();
  sub->add_option("--min-p", sp.min_p, "Min-p (0: off)")->capture_default_str();
  sub->add_option("--repeat-penalty", sp.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  sub->add_option("--repeat-last-n", sp.penalty_last_n, "Tokens the penalties look back")->capture_default_str();
  sub->add_option("--frequency-penalty", sp.frequency_penalty, "Frequency penalty");
  sub->add_option("--presence-penalty", sp.presence_penalty, "Presence penalty");
  sub->add_option("-s,--seed", sp.seed, "Random seed");
  // The server's check of the same parameters (NaN, top-p above 1, ...), once parsed.
  sub->final_callback([&sp] {
    if (auto problem = check_sampling(sp)) throw CLI::ValidationError(problem->flag, problem->problem);
  });
}

// The model's recommended sampling (GGUF general.sampling.temp, top_k, top_p, min_p,
// penalty_repeat, which llama.cpp reads too; a Hugging Face folder's
// generation_config.json becomes those keys) for each flag of add_sampling_options
// the command line left out (serve, which has none of those flags, takes them all).
// Returns what it took ("--temp 0.6 --top-p 0.95"), or "".
std::string apply_model_sampling(const CLI::App& sub, const GGUFFile& meta, SamplingParams* sp);

}  // namespace deltafin::tools
