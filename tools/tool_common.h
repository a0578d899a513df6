// Helpers shared by the subcommands: error exits, id lists, prompt tokenisation.
#pragma once
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/result.h"
#include "format/model_file.h"

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

Result<std::vector<int32_t>> parse_ids(const std::string& s);
// Tokenizes a prompt as llama.cpp does for completion: BOS per metadata, special
// tokens parsed.
Result<std::vector<int32_t>> tokenize_prompt(const ModelFile& file, const std::string& text);

}  // namespace deltafin::tools
