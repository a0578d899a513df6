// Pieces shared by the Hugging Face tokenizer readers and writers
// (hf_tokenizer.cpp: tokenizer.json and tokenizer_config.json; hf_tiktoken.cpp:
// tiktoken.model): the GPT-2 byte <-> text mapping, the pre-tokenizer forms, the
// token-type rules of llama.cpp's converter, and small file helpers. Internal to
// src/format.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "format/gguf.h"

namespace deltafin::hf {

using json = nlohmann::json;  // std::map objects: an ordered_json object of 200k tokens inserts in quadratic time

// GGUF token types (llama.cpp's gguf.TokenType).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// Byte-level BPE token text: every byte as the printable code point GPT-2 maps it
// to (so "\n" is "Ċ" and " " is "Ġ").
std::string bytes_to_text(std::string_view bytes);
// The inverse; false when `text` holds a code point outside the mapping.
bool text_to_bytes(std::string_view text, std::string* bytes);

// llama.cpp's does_token_look_special(): added tokens it makes control tokens even
// when tokenizer.json does not mark them special.
bool looks_special(std::string_view text);

// "[PAD<id>]", the text the converter gives ids no token has.
std::string pad_text(int64_t id);

// The pre-tokenizer llama.cpp records for a tokenizer.json "pre_tokenizer" object
// (null allowed), refined by config.json's model_type; an error names the file
// and field when it is none llama.cpp knows.
Result<std::string> pre_name_from_json(const json& pre_tokenizer, const std::string& model_type);
// The model_type -> pre-tokenizer fallback alone ("" when none).
std::string pre_name_from_model_type(const std::string& model_type);
// A "pre_tokenizer" object for `pre` that pre_name_from_json() maps back to it (or
// to an alias with the same behaviour), and whether the BPE model ignores merges
// for whole-word tokens; an error when `pre` has no Hugging Face form here.
Result<json> pre_tokenizer_json(const std::string& pre, bool* ignore_merges);
// The name pre_name_from_json() records for the form written for `pre`.
std::string canonical_pre_name(const std::string& pre);

// Parses `text` as JSON; errors name `file`.
Result<json> parse_json(const std::string& text, const char* file);

// What tokenizer.json/tokenizer_config.json and the tiktoken reader produce,
// turned into GGUF keys the same way.
struct Conversion {
  std::string model = "gpt2";  // tokenizer.ggml.model
  std::vector<std::string> tokens;
  std::vector<double> scores;  // "llama" (SentencePiece) only
  std::vector<int64_t> types;
  std::vector<std::string> merges;
  bool has_merges = true;
  std::string pre;
  // Added/special tokens (content, id) in the order special-token names are looked
  // up in: llama.cpp takes the first whose content matches.
  std::vector<std::pair<std::string, int64_t>> added;
};

// Writes `c` and the special-token ids, add_*_token flags and chat templates of
// tokenizer_config.json (and `post_processor`, may be null) into `meta`.
Status finish_conversion(Conversion c, const json& tokenizer_config, const json& post_processor,
                         const std::string& chat_template_jinja, const json& config, GGUFFile* meta);

// tiktoken.model (with tokenizer_config.json's added_tokens_decoder) -> Conversion.
Status tiktoken_to_conversion(const std::string& tiktoken_model, const json& tokenizer_config, int64_t vocab_size,
                              Conversion* c);
// GGUF tokens -> tiktoken.model text; `specials` receives the control and
// user-defined tokens (id, text) that go to added_tokens_decoder instead.
Result<std::string> gguf_to_tiktoken(const GGUFFile& meta, std::vector<std::pair<int64_t, std::string>>* specials);

// tokenizer.model (SentencePiece) with tokenizer_config.json's added_tokens_decoder
// -> Conversion ("llama" model).
Status sentencepiece_to_conversion(const std::string& model, const json& tokenizer_config, int64_t vocab_size,
                                   Conversion* c);
// GGUF "llama" vocabulary -> tokenizer.model bytes; `added` receives the tokens
// that go to added_tokens_decoder (id, text).
Result<std::string> gguf_to_sentencepiece(const GGUFFile& meta, std::vector<std::pair<int64_t, std::string>>* added);

// Writes `content` to dir/name; errors name the path.
Status write_text(const std::string& dir, const char* name, const std::string& content);

}  // namespace deltafin::hf
