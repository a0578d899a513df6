// Hugging Face tokenizer files <-> GGUF tokenizer keys (see hf_tokenizer.h): the
// tokenizer.json reader and writer, and what both file kinds share with
// tokenizer_config.json (special-token ids, add_*_token, chat templates), laid out
// as llama.cpp's convert_hf_to_gguf.py (_set_vocab_gpt2 and gguf-py's SpecialVocab)
// lays them out:
//   tokens by id, ids no token has as "[PAD<id>]" (unused), up to config.json's
//   vocab_size; added tokens marked special, or looking special (<|...|>), are
//   control tokens, other added tokens user-defined; merges as "left right";
//   bos/eos/unk/sep/pad/cls/mask from tokenizer_config.json's *_token, looked up
//   among the added tokens, else config.json's *_token_id; add_bos/add_eos from the
//   TemplateProcessing post-processor, then tokenizer_config.json's add_*_token;
//   the chat template from tokenizer_config.json's chat_template (a string, or a
//   list of named templates), else chat_template.jinja.
#include "format/hf_tokenizer.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include "format/hf_tokenizer_detail.h"

namespace deltafin {
namespace hf {

namespace {

// GPT-2's byte -> code point table and its inverse.
struct ByteTable {
  uint32_t cp[256];
  std::map<uint32_t, uint8_t> byte_of;
  ByteTable() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      cp[b] = keep ? uint32_t(b) : uint32_t(256 + n++);
      byte_of[cp[b]] = uint8_t(b);
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += char(cp);
  } else {
    *out += char(0xC0 | (cp >> 6));
    *out += char(0x80 | (cp & 0x3F));
  }
}

bool starts_ends(std::string_view s, std::string_view a, std::string_view b) {
  return s.size() >= a.size() + b.size() && s.substr(0, a.size()) == a && s.substr(s.size() - b.size()) == b;
}

// A *_token entry of tokenizer_config.json: a string or {"content": ...}.
bool token_content(const json& cfg, const std::string& key, std::string* content) {
  if (!cfg.is_object() || !cfg.contains(key)) return false;
  const json& e = cfg[key];
  if (e.is_string()) {
    *content = e.get<std::string>();
    return true;
  }
  if (e.is_object() && e.contains("content") && e["content"].is_string()) {
    *content = e["content"].get<std::string>();
    return true;
  }
  return false;
}

}  // namespace

std::string bytes_to_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(byte_table().cp[b], &out);
  return out;
}

bool text_to_bytes(std::string_view text, std::string* bytes) {
  bytes->clear();
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = uint8_t(text[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = (uint32_t(c & 0x1F) << 6) | (uint8_t(text[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;
    }
    auto it = byte_table().byte_of.find(cp);
    if (it == byte_table().byte_of.end()) return false;
    *bytes += char(it->second);
  }
  return true;
}

bool looks_special(std::string_view t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  return starts_ends(t, "<|", "|>") || starts_ends(t, "<\uFF5C", "\uFF5C>") || starts_ends(t, "<unused", ">");
}

std::string pad_text(int64_t id) { return "[PAD" + std::to_string(id) + "]"; }

Result<json> parse_json(const std::string& text, const char* file) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return make_error("{}: not valid JSON: {}", file, e.what());
  }
}

Status write_text(const std::string& dir, const char* name, const std::string& content) {
  const std::string path = (std::filesystem::path(dir) / name).string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return make_error("{}: cannot create the file", path);
  const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  if (std::fclose(f) != 0 || !ok) return make_error("{}: write failed", path);
  return {};
}

Status finish_conversion(Conversion c, const json& cfg, const json& post, const std::string& jinja,
                         const json& config, GGUFFile* meta) {
  const int64_t n = int64_t(c.tokens.size());
  meta->set("tokenizer.ggml.model", GGUFValue::str(c.model));
  meta->set("tokenizer.ggml.pre", GGUFValue::str(c.pre));
  meta->set("tokenizer.ggml.tokens", GGUFValue::string_array(std::move(c.tokens)));
  if (!c.scores.empty()) meta->set("tokenizer.ggml.scores", GGUFValue::float_array(std::move(c.scores)));
  meta->set("tokenizer.ggml.token_type", GGUFValue::int_array(GGUFType::I32, std::move(c.types)));
  if (c.has_merges) meta->set("tokenizer.ggml.merges", GGUFValue::string_array(std::move(c.merges)));

  // Special tokens: tokenizer_config.json's names among the added tokens, then
  // config.json's ids for those still unset.
  struct Special {
    const char* typ;
    const char* key;
  };
  static const Special specials[] = {
      {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"},   {"sep", "tokenizer.ggml.seperator_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"},   {"cls", "tokenizer.ggml.cls_token_id"},
      {"mask", "tokenizer.ggml.mask_token_id"},
  };
  std::map<std::string, std::string> content_of;  // typ -> tokenizer_config.json's text
  for (const Special& s : specials) {
    std::string content;
    if (!token_content(cfg, std::string(s.typ) + "_token", &content)) continue;
    content_of[s.typ] = content;
    for (const auto& [text, id] : c.added) {
      if (text != content) continue;
      if (id < n) meta->set(s.key, GGUFValue::u32(uint32_t(id)));
      break;
    }
  }
  if (config.is_object()) {
    for (const Special& s : specials) {
      const std::string k = std::string(s.typ) + "_token_id";
      if (meta->find(s.key) || !config.contains(k) || !config[k].is_number_integer()) continue;
      const int64_t id = config[k].get<int64_t>();
      if (id >= 0 && id < n) meta->set(s.key, GGUFValue::u32(uint32_t(id)));
    }
  }

  // add_bos/add_eos: the post-processor's template, then tokenizer_config.json.
  std::map<std::string, bool> add;
  const json* proc = nullptr;
  if (post.is_object()) {
    if (post.contains("processors") && post["processors"].is_array()) {
      for (const json& p : post["processors"])
        if (p.is_object() && p.value("type", "") == "TemplateProcessing") proc = &p;
    } else if (post.value("type", "") == "TemplateProcessing") {
      proc = &post;
    }
  }
  if (proc && proc->contains("single") && (*proc)["single"].is_array() && (*proc)["single"].size() > 1) {
    const json& single = (*proc)["single"];
    auto special_id = [](const json& item, std::string* id) {
      if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object()) return false;
      const json& st = item["SpecialToken"];
      if (!st.contains("id") || !st["id"].is_string()) return false;
      *id = st["id"].get<std::string>();
      return true;
    };
    std::string first, last;
    if (special_id(single.front(), &first))
      add["bos"] = (content_of.count("bos") && first == content_of["bos"]) ||
                   (content_of.count("cls") && first == content_of["cls"]) || !cfg.is_object();
    if (special_id(single.back(), &last))
      add["eos"] = (content_of.count("eos") && last == content_of["eos"]) || !cfg.is_object();
  }
  for (const char* typ : {"bos", "eos", "sep"}) {
    const std::string k = std::string("add_") + typ + "_token";
    if (cfg.is_object() && cfg.contains(k) && cfg[k].is_boolean()) add[typ] = cfg[k].get<bool>();
  }
  for (const auto& [typ, on] : add) meta->set("tokenizer.ggml.add_" + typ + "_token", GGUFValue::boolean(on));

  // Chat templates.
  json tmpl = cfg.is_object() && cfg.contains("chat_template") ? cfg["chat_template"] : json();
  if (tmpl.is_null() && !jinja.empty()) tmpl = jinja;
  if (tmpl.is_string()) {
    meta->set("tokenizer.chat_template", GGUFValue::str(tmpl.get<std::string>()));
  } else if (tmpl.is_array()) {
    std::vector<std::string> names;
    for (size_t i = 0; i < tmpl.size(); ++i) {
      const json& e = tmpl[i];
      if (!e.is_object() || !e.contains("template") || !e["template"].is_string())
        return make_error("tokenizer_config.json: chat_template[{}]: expected {{\"name\": ..., \"template\": ...}}", i);
      std::string name = e.value("name", "");
      for (char& ch : name)
        if (!std::isalnum(uint8_t(ch))) ch = '_';
      if (name.empty()) continue;
      if (name == "default") {
        meta->set("tokenizer.chat_template", GGUFValue::str(e["template"].get<std::string>()));
      } else {
        meta->set("tokenizer.chat_template." + name, GGUFValue::str(e["template"].get<std::string>()));
        names.push_back(name);
      }
    }
    if (!names.empty()) meta->set("tokenizer.chat_templates", GGUFValue::string_array(std::move(names)));
  } else if (!tmpl.is_null()) {
    return make_error("tokenizer_config.json: chat_template: expected a string or a list of named templates");
  }
  return {};
}

namespace {

// tokenizer.json (byte-level BPE) -> Conversion.
Status bpe_to_conversion(const json& tj, const std::string& model_type, int64_t vocab_size, Conversion* c) {
  if (!tj.is_object() || !tj.contains("model") || !tj["model"].is_object())
    return make_error("tokenizer.json: no \"model\" object");
  const json& model = tj["model"];
  const std::string type = model.value("type", "");
  if (type != "BPE")
    return make_error("tokenizer.json: model.type '{}' is not supported (byte-level BPE only)", type);
  if (model.value("byte_fallback", false))
    return make_error("tokenizer.json: model.byte_fallback: SentencePiece-style BPE is not supported (byte-level "
                      "BPE only)");
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return make_error("tokenizer.json: model.vocab: expected an object of token -> id");
  const json pre = tj.contains("pre_tokenizer") ? tj["pre_tokenizer"] : json();
  const json dec = tj.contains("decoder") ? tj["decoder"] : json();
  if (pre.dump().find("\"ByteLevel\"") == std::string::npos && dec.dump().find("\"ByteLevel\"") == std::string::npos)
    return make_error("tokenizer.json: pre_tokenizer: no ByteLevel stage; only byte-level BPE is supported");
  DF_ASSIGN(c->pre, pre_name_from_json(pre, model_type));

  // Ids: the model's vocabulary, then the added tokens over it.
  const size_t n_entries = model["vocab"].size() + (tj.contains("added_tokens") ? tj["added_tokens"].size() : 0);
  const int64_t max_id = int64_t(n_entries) * 4 + (int64_t(1) << 20);  // ids far beyond the count: hostile
  std::map<int64_t, std::pair<std::string, int64_t>> by_id;  // id -> (text, type)
  for (const auto& [text, idv] : model["vocab"].items()) {
    if (!idv.is_number_integer() || idv.get<int64_t>() < 0 || idv.get<int64_t>() > max_id)
      return make_error("tokenizer.json: model.vocab[\"{}\"]: expected an id in [0, {}]", text, max_id);
    by_id[idv.get<int64_t>()] = {text, kNormal};
  }
  if (tj.contains("added_tokens") && !tj["added_tokens"].is_null()) {
    const json& at = tj["added_tokens"];
    if (!at.is_array()) return make_error("tokenizer.json: added_tokens: expected an array");
    for (size_t i = 0; i < at.size(); ++i) {
      const json& t = at[i];
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || t["id"].get<int64_t>() < 0 ||
          t["id"].get<int64_t>() > max_id || !t.contains("content") || !t["content"].is_string())
        return make_error("tokenizer.json: added_tokens[{}]: expected {{\"id\": N, \"content\": \"...\"}}", i);
      std::string text = t["content"].get<std::string>();
      const int64_t id = t["id"].get<int64_t>();
      c->added.emplace_back(text, id);
      int64_t ty = kControl;
      if (!t.value("special", false) && !looks_special(text)) {
        ty = kUserDefined;
        // As the converter does for user-defined tokens: SentencePiece's space mark
        // becomes a space.
        for (size_t p; (p = text.find("\u2581")) != std::string::npos;) text.replace(p, 3, " ");
      }
      by_id[id] = {text, ty};
    }
  }
  if (by_id.empty()) return make_error("tokenizer.json: model.vocab is empty");
  const int64_t n = std::max(by_id.rbegin()->first + 1, vocab_size);
  c->tokens.reserve(size_t(n));
  c->types.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      c->tokens.push_back(pad_text(i));
      c->types.push_back(kUnused);
    } else {
      c->tokens.push_back(it->second.first);
      c->types.push_back(it->second.second);
    }
  }

  // Merges: "a b" strings or ["a", "b"] pairs.
  if (model.contains("merges") && !model["merges"].is_null()) {
    const json& merges = model["merges"];
    if (!merges.is_array()) return make_error("tokenizer.json: model.merges: expected an array");
    c->merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& m = merges[i];
      if (m.is_string()) {
        c->merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        c->merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        return make_error("tokenizer.json: model.merges[{}]: expected \"left right\" or [\"left\", \"right\"]", i);
      }
    }
  }
  return {};
}

// tokenizer_config.json's *_token entries for the special ids of `meta`, plus the
// add_*_token flags.
void special_entries(const GGUFFile& meta, const std::vector<std::string>& tokens, json* cfg) {
  static const std::pair<const char*, const char*> keys[] = {
      {"bos_token", "tokenizer.ggml.bos_token_id"},     {"eos_token", "tokenizer.ggml.eos_token_id"},
      {"unk_token", "tokenizer.ggml.unknown_token_id"}, {"sep_token", "tokenizer.ggml.seperator_token_id"},
      {"pad_token", "tokenizer.ggml.padding_token_id"}, {"cls_token", "tokenizer.ggml.cls_token_id"},
      {"mask_token", "tokenizer.ggml.mask_token_id"},
  };
  for (const auto& [name, key] : keys) {
    auto id = meta.get_int(key);
    if (id.ok() && id.value() >= 0 && id.value() < int64_t(tokens.size())) (*cfg)[name] = tokens[size_t(id.value())];
  }
  for (const char* typ : {"bos", "eos", "sep"}) {
    const std::string key = std::string("tokenizer.ggml.add_") + typ + "_token";
    if (meta.find(key)) (*cfg)[std::string("add_") + typ + "_token"] = meta.bool_or(key, false);
  }
}

}  // namespace
}  // namespace hf

Status hf_tokenizer_to_gguf(const HfTokenizerFiles& files, GGUFFile* meta) {
  using namespace hf;
  json cfg, config;
  if (!files.tokenizer_config_json.empty()) {
    DF_ASSIGN(cfg, parse_json(files.tokenizer_config_json, "tokenizer_config.json"));
    if (!cfg.is_object()) return make_error("tokenizer_config.json: expected a JSON object");
  }
  if (!files.config_json.empty()) {
    DF_ASSIGN(config, parse_json(files.config_json, "config.json"));
    if (!config.is_object()) return make_error("config.json: expected a JSON object");
  }
  // config.json's model_type and vocab_size (of the text model inside a
  // multimodal config).
  std::string model_type = files.model_type;
  int64_t vocab_size = files.vocab_size;
  for (const json* c : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
    if (!c || !c->is_object()) continue;
    if (model_type.empty() && c->contains("model_type") && (*c)["model_type"].is_string())
      model_type = (*c)["model_type"].get<std::string>();
    if (vocab_size == 0 && c->contains("vocab_size") && (*c)["vocab_size"].is_number_integer())
      vocab_size = (*c)["vocab_size"].get<int64_t>();
  }
  if (vocab_size < 0 || vocab_size > (int64_t(1) << 26))
    return make_error("config.json: vocab_size {} is out of range", vocab_size);

  Conversion c;
  json post;
  // SentencePiece's tokenizer.model first, as llama.cpp's Llama/Mistral converter
  // does, unless tokenizer.json is byte-level BPE (a folder may carry both).
  bool spm = !files.tokenizer_model.empty();
  json tj;
  if (!files.tokenizer_json.empty()) {
    DF_ASSIGN(tj, parse_json(files.tokenizer_json, "tokenizer.json"));
    if (spm && tj.is_object() && tj.contains("model") && tj["model"].is_object() &&
        !tj["model"].value("byte_fallback", false) && tj.dump().find("\"ByteLevel\"") != std::string::npos)
      spm = false;
  }
  if (spm) {
    DF_TRY(sentencepiece_to_conversion(files.tokenizer_model, cfg, vocab_size, &c));
    // Published folders list <s>, </s>, <unk> in tokenizer.json's added_tokens.
    if (tj.is_object() && tj.contains("added_tokens") && tj["added_tokens"].is_array())
      for (const json& t : tj["added_tokens"])
        if (t.is_object() && t.contains("content") && t["content"].is_string() && t.contains("id") &&
            t["id"].is_number_integer())
          c.added.insert(c.added.begin(), {t["content"].get<std::string>(), t["id"].get<int64_t>()});
    if (tj.is_object() && tj.contains("post_processor")) post = tj["post_processor"];
  } else if (!files.tokenizer_json.empty()) {
    DF_TRY(bpe_to_conversion(tj, model_type, vocab_size, &c));
    if (tj.is_object() && tj.contains("post_processor")) post = tj["post_processor"];
  } else if (!files.tiktoken_model.empty()) {
    DF_TRY(tiktoken_to_conversion(files.tiktoken_model, cfg, vocab_size, &c));
  } else {
    return make_error("no tokenizer: none of tokenizer.json, tokenizer.model, tiktoken.model is present");
  }
  // A special token id in config.json is a fallback for the config's names only.
  return finish_conversion(std::move(c), cfg, post, files.chat_template_jinja, config, meta);
}

Status write_hf_tokenizer(const GGUFFile& meta, const std::string& dir, bool tiktoken) {
  using namespace hf;
  const std::string model = meta.string_or("tokenizer.ggml.model", "");
  if (model != "gpt2" && model != "llama")
    return make_error("tokenizer.ggml.model = '{}': only byte-level BPE ('gpt2') and SentencePiece ('llama') have a "
                      "Hugging Face form here",
                      model);
  if (model == "llama" && tiktoken)
    return make_error("tokenizer.ggml.model = 'llama': a SentencePiece vocabulary has no tiktoken form");
  const GGUFValue* toks = meta.find("tokenizer.ggml.tokens");
  const GGUFValue* types = meta.find("tokenizer.ggml.token_type");
  const GGUFValue* merges = meta.find("tokenizer.ggml.merges");
  if (!toks || !toks->is_array() || toks->elem_type != GGUFType::STRING)
    return make_error("tokenizer.ggml.tokens: missing or not an array of strings");
  const std::vector<std::string>& tokens = toks->strings;
  auto type_of = [&](size_t i) -> int64_t {
    return types && types->is_array() && i < types->ints.size() ? types->ints[i] : kNormal;
  };
  const std::string pre = meta.string_or("tokenizer.ggml.pre", "default");

  json cfg = json::object();
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  special_entries(meta, tokens, &cfg);
  json decoder = json::object();  // id -> added token, as transformers writes it
  auto added_entry = [&](size_t i) {
    return json{{"content", tokens[i]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                {"normalized", false}, {"special", type_of(i) != kUserDefined}};
  };

  if (model == "llama") {
    std::vector<std::pair<int64_t, std::string>> added;
    DF_ASSIGN(std::string proto, gguf_to_sentencepiece(meta, &added));
    for (const auto& [id, text] : added) decoder[std::to_string(id)] = added_entry(size_t(id));
    DF_TRY(write_text(dir, "tokenizer.model", proto));
  } else if (tiktoken) {
    std::vector<std::pair<int64_t, std::string>> specials;
    DF_ASSIGN(std::string ranks, gguf_to_tiktoken(meta, &specials));
    for (const auto& [id, text] : specials) decoder[std::to_string(id)] = added_entry(size_t(id));
    DF_TRY(write_text(dir, "tiktoken.model", ranks));
  } else {
    if (!merges || !merges->is_array() || merges->elem_type != GGUFType::STRING)
      return make_error("tokenizer.ggml.merges: missing or not an array of strings");
    bool ignore_merges = false;
    DF_ASSIGN(json pre_json, pre_tokenizer_json(pre, &ignore_merges));
    json vocab = json::object();
    json added = json::array();
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int64_t ty = type_of(i);
      if (ty == kUnused && tokens[i] == pad_text(int64_t(i))) continue;
      if (ty == kControl || ty == kUserDefined || ty == kUnused) {
        json e = added_entry(i);
        json a = {{"id", i}};
        for (const auto& [k, v] : e.items()) a[k] = v;
        added.push_back(a);
        decoder[std::to_string(i)] = e;
      } else {
        vocab[tokens[i]] = i;
      }
    }
    json tj;
    tj["version"] = "1.0";
    tj["truncation"] = nullptr;
    tj["padding"] = nullptr;
    tj["added_tokens"] = std::move(added);
    tj["normalizer"] = nullptr;
    tj["pre_tokenizer"] = std::move(pre_json);
    tj["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                            {"use_regex", false}};
    tj["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                     {"use_regex", false}};
    tj["model"] = {{"type", "BPE"},           {"dropout", nullptr},
                   {"unk_token", nullptr},    {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                   {"byte_fallback", false},  {"ignore_merges", ignore_merges},
                   {"vocab", std::move(vocab)}, {"merges", merges->strings}};
    std::string text;
    try {
      text = tj.dump(1);
    } catch (const json::exception& e) {
      return make_error("tokenizer.ggml.tokens: cannot be written as JSON: {}", e.what());
    }
    DF_TRY(write_text(dir, "tokenizer.json", text));
  }
  cfg["added_tokens_decoder"] = std::move(decoder);

  // Chat templates: named ones as tokenizer_config.json's list, a lone default as
  // chat_template.jinja.
  const std::string tmpl = meta.string_or("tokenizer.chat_template", "");
  const GGUFValue* names = meta.find("tokenizer.chat_templates");
  if (names && names->is_array() && names->elem_type == GGUFType::STRING && !names->strings.empty()) {
    json list = json::array();
    if (meta.find("tokenizer.chat_template")) list.push_back({{"name", "default"}, {"template", tmpl}});
    for (const std::string& n : names->strings)
      list.push_back({{"name", n}, {"template", meta.string_or("tokenizer.chat_template." + n, "")}});
    cfg["chat_template"] = std::move(list);
  } else if (meta.find("tokenizer.chat_template")) {
    DF_TRY(write_text(dir, "chat_template.jinja", tmpl));
  }
  std::string text;
  try {
    text = cfg.dump(2);
  } catch (const json::exception& e) {
    return make_error("tokenizer_config.json: cannot be written as JSON: {}", e.what());
  }
  return write_text(dir, "tokenizer_config.json", text);
}

}  // namespace deltafin
