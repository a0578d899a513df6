// The Qwen2 vocabulary of the shared vocab directory, for tests of constrained output
// over a real ~151k-token vocabulary.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "io/byte_source.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

// The Qwen2 vocabulary, with `extra` tokens of type `type` appended (3: control, 4:
// user-defined), as a model with tool-call markers has them. Null where the vocabulary
// file is missing or does not load.
inline std::unique_ptr<Tokenizer> qwen2_with(const std::vector<std::string>& extra, int64_t type) {
  std::unique_ptr<Tokenizer> t;
  const auto path = std::filesystem::path(DELTAFIN_SHARED_DIR) / "vocab" / "ggml-vocab-qwen2.gguf";
  if (!std::filesystem::exists(path)) return t;
  auto src = open_file_source(path.string());
  if (!src.ok()) return t;
  auto meta = parse_gguf(**src);
  if (!meta.ok()) return t;
  for (const std::string& e : extra) {
    meta->kv.at("tokenizer.ggml.tokens").strings.push_back(e);
    meta->kv.at("tokenizer.ggml.token_type").ints.push_back(type);
  }
  auto r = Tokenizer::from_gguf(*meta);
  if (r.ok()) t = std::make_unique<Tokenizer>(std::move(r).value());
  return t;
}

// The plain Qwen2 vocabulary, loaded once per process.
inline const Tokenizer* qwen2_tokenizer() {
  static std::unique_ptr<Tokenizer> tok = qwen2_with({}, 0);
  return tok.get();
}

}  // namespace deltafin
