// Hugging Face tokenizer files <-> the GGUF tokenizer metadata deltafin's tokenizer
// reads (tokenizer.ggml.*, tokenizer.chat_template), laid out the way llama.cpp's
// convert_hf_to_gguf.py lays them out, so a model opened from a Hugging Face folder
// tokenizes exactly as its GGUF conversion does.
//   tokenizer.json: byte-level BPE (vocab, merges, added tokens, pre-tokenizer);
//   tiktoken.model: Kimi's base64 token ranks, merges rebuilt from the ranks, with
//                   the special tokens of tokenizer_config.json;
//   tokenizer.model: SentencePiece pieces, scores and types ("llama" vocabulary),
//                   taken before a tokenizer.json that is not byte-level BPE.
// The chat template comes from tokenizer_config.json's chat_template (a string, or
// a list of named templates: tokenizer.chat_template.NAME), else
// chat_template.jinja, as llama.cpp's converter takes it.
#pragma once
#include <string>

#include "core/result.h"
#include "format/gguf.h"

namespace deltafin {

// The contents of a folder's tokenizer files ("" when the file is absent).
struct HfTokenizerFiles {
  std::string tokenizer_json;         // tokenizer.json
  std::string tokenizer_config_json;  // tokenizer_config.json
  std::string tiktoken_model;         // tiktoken.model
  std::string tokenizer_model;        // tokenizer.model (SentencePiece; Llama 2, Mistral, Mixtral)
  std::string chat_template_jinja;    // chat_template.jinja
  std::string model_type;             // config.json's model_type (picks the pre-tokenizer where the files do not)
  // Optional. config.json: model_type when the field above is empty, vocab_size
  // (of text_config when nested) and bos/eos..._token_id where
  // tokenizer_config.json names none.
  std::string config_json;
  // The token list is padded with "[PAD<id>]" up to this size (config.json's
  // vocab_size, as the converter does); 0: config.json's, else up to the highest id.
  int64_t vocab_size = 0;
};

// Sets the tokenizer.* keys of `meta` from the files. Errors name the file and the
// field that is wrong or missing.
Status hf_tokenizer_to_gguf(const HfTokenizerFiles& files, GGUFFile* meta);

// The inverse, for `synth --format hf`: writes tokenizer.json and
// tokenizer_config.json (and chat_template.jinja when the model has a template) into
// `dir` from the tokenizer.* keys of `meta`; with `tiktoken`, tiktoken.model in place
// of tokenizer.json; a SentencePiece ("llama") vocabulary as tokenizer.model. hf_tokenizer_to_gguf() of what it writes gives back the same
// keys.
Status write_hf_tokenizer(const GGUFFile& meta, const std::string& dir, bool tiktoken);

}  // namespace deltafin
