// The inventory of a Hugging Face model folder, from its small files and the
// headers of its safetensors shards alone (no tensor data is read): config.json
// (the text config when nested in a multimodal one), the weight_map of
// model.safetensors.index.json (or a single model.safetensors), every shard's
// tensors (shard, byte range, dtype, shape), generation_config.json and the
// tokenizer files. Tensors of parts deltafin does not run (a vision tower, a
// multimodal projector) are counted and skipped.
//
// Every read goes through a SourceOpener called with a file name relative to the
// folder, so a local directory and an HTTP prefix look alike.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/hf_tokenizer.h"
#include "format/model_file.h"
#include "format/safetensors.h"

namespace deltafin {

struct HfTensor {
  std::string name;
  int shard = 0;
  std::string dtype;
  std::vector<int64_t> shape;  // outermost first
  uint64_t offset = 0;         // absolute, in the shard's file
  uint64_t bytes = 0;
};

struct HfFolder {
  std::string location;                 // the folder, for messages
  nlohmann::json config;                // the text model's config (text_config when nested)
  std::string model_type;               // config's model_type
  std::string container_type;           // the outer config's model_type when text_config is nested
  nlohmann::json quantization_config;   // config.json's (top level, else the text config's); null if none
  std::vector<std::string> shard_files;  // relative names
  std::vector<std::shared_ptr<ByteSource>> shards;  // open, in shard_files order
  std::map<std::string, HfTensor> tensors;          // the tensors deltafin may run
  uint64_t skipped_tensors = 0, skipped_bytes = 0;  // other parts (vision tower ...)
  std::vector<int64_t> eos_ids;         // generation_config.json eos_token_id
  nlohmann::json generation_config;     // generation_config.json (sampling defaults); null if none
  HfTokenizerFiles tokenizer;
  uint64_t bytes_read = 0;              // small files and shard headers
};

// Opens every shard through `opener` (relative names) and reads the inventory.
Result<std::shared_ptr<HfFolder>> open_hf_folder(const std::string& location, const SourceOpener& opener);

// Opens DIR/name as a local file.
SourceOpener hf_local_opener(const std::string& dir, FileSourceOptions opts = {});

// A local directory holding config.json (what `run DIR` opens as a Hugging Face model).
bool is_local_hf_folder(const std::string& path);

// Is this tensor part of what deltafin skips (vision tower, multimodal projector)?
bool hf_tensor_skipped(const std::string& name);

}  // namespace deltafin
