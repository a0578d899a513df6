// The inventory of a Hugging Face folder (hf_folder.h).
#include "format/hf_folder.h"

#include <sys/stat.h>

#include <set>

namespace deltafin {
namespace {

constexpr uint64_t kMaxSmallFile = uint64_t(256) << 20;  // tokenizer.json of a large vocabulary is tens of MB

// A small file's contents; *present false when the opener cannot open it.
Result<std::string> read_small(const SourceOpener& opener, const std::string& loc, const std::string& rel,
                               bool required, uint64_t* read) {
  auto src = opener(rel);
  if (!src.ok()) {
    if (required) return make_error("{}: cannot read {}: {}", loc, rel, src.error().message);
    return std::string();
  }
  const uint64_t n = (*src)->size();
  if (n > kMaxSmallFile) return make_error("{}/{}: {} bytes; over the {} byte limit", loc, rel, n, kMaxSmallFile);
  std::string s(size_t(n), '\0');
  DF_TRY((*src)->read_at(0, s.data(), size_t(n)));
  *read += n;
  return s;
}

Result<nlohmann::json> parse_json(const std::string& text, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error("{}: not a JSON object", what);
  return j;
}

}  // namespace

bool hf_tensor_skipped(const std::string& name) {
  static const char* const prefixes[] = {"vision_tower.", "model.vision_tower.", "vision_model.",
                                         "model.vision_model.", "visual.", "model.visual.",
                                         "mm_projector.", "model.mm_projector.", "multi_modal_projector.",
                                         "model.multi_modal_projector.", "audio_tower.", "model.audio_tower."};
  for (const char* p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

SourceOpener hf_local_opener(const std::string& dir, FileSourceOptions opts) {
  return [dir, opts](const std::string& rel) { return open_file_source(dir + "/" + rel, opts); };
}

bool is_local_hf_folder(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return ::stat((path + "/config.json").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<std::shared_ptr<HfFolder>> open_hf_folder(const std::string& loc, const SourceOpener& opener) {
  auto f = std::make_shared<HfFolder>();
  f->location = loc;
  DF_ASSIGN(std::string cfg_text, read_small(opener, loc, "config.json", true, &f->bytes_read));
  DF_ASSIGN(nlohmann::json cfg, parse_json(cfg_text, loc + "/config.json"));
  // A multimodal config nests the text model's.
  if (auto tc = cfg.find("text_config"); tc != cfg.end() && tc->is_object() && tc->contains("model_type")) {
    f->config = *tc;
    if (auto mt = cfg.find("model_type"); mt != cfg.end() && mt->is_string()) f->container_type = mt->get<std::string>();
  } else
    f->config = cfg;
  if (!f->config.contains("model_type") || !f->config["model_type"].is_string())
    return make_error("{}/config.json: no model_type", loc);
  f->model_type = f->config["model_type"].get<std::string>();
  if (auto q = cfg.find("quantization_config"); q != cfg.end()) f->quantization_config = *q;
  else if (auto qt = f->config.find("quantization_config"); qt != f->config.end()) f->quantization_config = *qt;

  // Shards: the index's weight_map, else one model.safetensors.
  DF_ASSIGN(std::string index_text, read_small(opener, loc, "model.safetensors.index.json", false, &f->bytes_read));
  std::map<std::string, std::string> weight_map;  // tensor -> shard file
  if (!index_text.empty()) {
    DF_ASSIGN(nlohmann::json ix, parse_json(index_text, loc + "/model.safetensors.index.json"));
    auto wm = ix.find("weight_map");
    if (wm == ix.end() || !wm->is_object())
      return make_error("{}/model.safetensors.index.json: no weight_map object", loc);
    std::set<std::string> files;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        return make_error("{}/model.safetensors.index.json: weight_map '{}' is not a file name", loc, it.key());
      const std::string file = it.value().get<std::string>();
      if (file.empty() || file.find("..") != std::string::npos || file[0] == '/')
        return make_error("{}/model.safetensors.index.json: weight_map '{}' names '{}', not a file in the folder",
                          loc, it.key(), file);
      weight_map[it.key()] = file;
      if (files.insert(file).second) f->shard_files.push_back(file);
    }
    std::sort(f->shard_files.begin(), f->shard_files.end());
  } else {
    f->shard_files.push_back("model.safetensors");
  }
  std::map<std::string, int> shard_no;
  for (size_t s = 0; s < f->shard_files.size(); ++s) shard_no[f->shard_files[s]] = int(s);

  for (size_t s = 0; s < f->shard_files.size(); ++s) {
    const std::string& file = f->shard_files[s];
    auto src = opener(file);
    if (!src.ok()) return make_error("{}: shard {} cannot be opened: {}", loc, file, src.error().message);
    std::shared_ptr<ByteSource> shard = std::move(*src);
    auto hdr = parse_safetensors(*shard);
    if (!hdr.ok()) return make_error("{}: shard {}: {}", loc, file, hdr.error().message);
    f->bytes_read += hdr->header_bytes;
    for (SafetensorsTensor& t : hdr->tensors) {
      if (!weight_map.empty()) {
        auto w = weight_map.find(t.name);
        if (w == weight_map.end())
          return make_error("{}: shard {} holds '{}', which the index's weight_map does not list", loc, file, t.name);
        if (w->second != file)
          return make_error("{}: '{}' is in shard {} but the weight_map says {}", loc, t.name, file, w->second);
      }
      if (hf_tensor_skipped(t.name)) {
        ++f->skipped_tensors;
        f->skipped_bytes += t.bytes;
        continue;
      }
      HfTensor h{t.name, int(s), t.dtype, std::move(t.shape), t.offset, t.bytes};
      if (!f->tensors.emplace(t.name, std::move(h)).second)
        return make_error("{}: tensor '{}' appears in more than one shard", loc, t.name);
    }
    f->shards.push_back(std::move(shard));
  }
  if (!weight_map.empty()) {
    for (const auto& [name, file] : weight_map)
      if (!hf_tensor_skipped(name) && !f->tensors.count(name))
        return make_error("{}: the weight_map puts '{}' in {}, but that shard's header does not hold it", loc, name,
                          file);
  }

  DF_ASSIGN(std::string gen_text, read_small(opener, loc, "generation_config.json", false, &f->bytes_read));
  if (!gen_text.empty()) {
    DF_ASSIGN(nlohmann::json gen, parse_json(gen_text, loc + "/generation_config.json"));
    if (auto e = gen.find("eos_token_id"); e != gen.end()) {
      if (e->is_number_integer()) f->eos_ids.push_back(e->get<int64_t>());
      else if (e->is_array())
        for (const auto& x : *e)
          if (x.is_number_integer()) f->eos_ids.push_back(x.get<int64_t>());
    }
    f->generation_config = std::move(gen);
  }
  HfTokenizerFiles& t = f->tokenizer;
  DF_ASSIGN(t.tokenizer_json, read_small(opener, loc, "tokenizer.json", false, &f->bytes_read));
  DF_ASSIGN(t.tokenizer_config_json, read_small(opener, loc, "tokenizer_config.json", false, &f->bytes_read));
  DF_ASSIGN(t.tiktoken_model, read_small(opener, loc, "tiktoken.model", false, &f->bytes_read));
  DF_ASSIGN(t.tokenizer_model, read_small(opener, loc, "tokenizer.model", false, &f->bytes_read));
  DF_ASSIGN(t.chat_template_jinja, read_small(opener, loc, "chat_template.jinja", false, &f->bytes_read));
  t.model_type = f->model_type;
  return f;
}

}  // namespace deltafin
