// Vocab: everything a tokenizer needs from a GGUF file's tokenizer.* metadata,
// interpreted the way llama.cpp interprets it (default special ids per model,
// per-pre-tokenizer flags, the end-of-generation set, auto-detected control
// tokens, the order in which special tokens are split out of text).
//
// Supported models: "gpt2" (byte-level BPE, with the pre-tokenizer named by
// tokenizer.ggml.pre) and "llama" (SentencePiece BPE). Others are an error.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "format/gguf.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/string_table.h"

namespace deltafin {

constexpr int32_t kNoToken = -1;

enum class VocabType { kSpm, kBpe };

// Token attributes, a bit set (llama.cpp's llama_token_attr).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,   // swallow whitespace before the token when splitting it out
  kAttrRstrip = 1u << 8,   // swallow whitespace after it
  kAttrSingleWord = 1u << 9,
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

struct Vocab {
  VocabType type = VocabType::kBpe;
  std::string model;      // tokenizer.ggml.model
  std::string pre;        // tokenizer.ggml.pre ("" if absent)
  std::string name;       // general.name
  PreKind pre_kind = PreKind::kDefault;  // BPE only

  std::vector<TokenData> tokens;  // by id
  StringTable text_to_id;  // token text -> id
  // BPE merges in rank order, split at the first space after the first byte.
  std::vector<std::pair<std::string, std::string>> merges;

  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken;
  int32_t unk = kNoToken, sep = kNoToken, pad = kNoToken, mask = kNoToken;
  int32_t fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken;
  int32_t fim_pad = kNoToken, fim_rep = kNoToken, fim_sep = kNoToken;
  std::set<int32_t> eog;  // tokens that end generation

  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;   // SPM: prefix text with a space (▁)
  bool ignore_merges = false;      // BPE: a word that is a token is taken whole
  bool clean_spaces = false;       // decode: " ." -> "." etc. (clean_up_tokenization_spaces)
  bool escape_whitespaces = false; // BPE: spaces become ▁ before merging

  // Control, user-defined and unknown tokens, longest text first: the order in
  // which they are split out of raw text.
  std::vector<int32_t> special_tokens;

  // Besides tokenizer.ggml.eos/eot/eom_token_id and the texts llama.cpp recognises,
  // the ids under kEogIdsKey end generation: a Hugging Face folder's
  // generation_config.json may list several eos_token_id (Qwen3: <|im_end|> and
  // <|endoftext|>; Llama 3.1: three), where GGUF has one key. Written by the folder's
  // GGUF view and kept by `convert`; llama.cpp ignores the key.
  static constexpr const char* kEogIdsKey = "deltafin.tokenizer.eog_token_ids";
  static Result<Vocab> from_gguf(const GGUFFile& file);

  int32_t n_tokens() const { return int32_t(tokens.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < n_tokens(); }
  // Id of the token with exactly this text, or kNoToken.
  int32_t find(std::string_view text) const {
    return text_to_id.find(text);
  }
  uint32_t attr(int32_t id) const { return tokens[size_t(id)].attr; }
};

}  // namespace deltafin
