// tokenizer.json "pre_tokenizer" objects <-> the tokenizer.ggml.pre names llama.cpp
// records. llama.cpp's converter picks the name by hashing what the Hugging Face
// tokenizer makes of a test text; without that library we recognise the
// pre-tokenizer itself: its stages (Split regexes, Digits, Punctuation, ByteLevel
// with GPT-2's regex) must equal one of the forms below, as published in the
// models' tokenizer.json files. Where one form serves several names, config.json's
// model_type picks among them (they share llama.cpp's regexes; only flags such as
// clean_up_tokenization_spaces may differ).
#include <algorithm>

#include "format/hf_tokenizer_detail.h"

namespace deltafin::hf {
namespace {

enum class StageKind { kSplit, kDigits, kDigitsIndividual, kByteLevelRegex, kPunctuation };

struct Stage {
  StageKind kind;
  std::string regex;  // kSplit only
  bool operator==(const Stage&) const = default;
};

struct Form {
  std::vector<std::string> names;  // the first is recorded unless model_type picks another
  std::vector<Stage> stages;
  bool ignore_merges = false;
  std::vector<std::pair<std::string, std::string>> by_model_type = {};  // model_type -> name
};

Stage split(const char* re) { return {StageKind::kSplit, re}; }
const Stage kDigits{StageKind::kDigits, ""};
const Stage kDigitsIndividual{StageKind::kDigitsIndividual, ""};
const Stage kByteLevelRegex{StageKind::kByteLevelRegex, ""};
const Stage kPunctuation{StageKind::kPunctuation, ""};

constexpr const char* kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kContractions = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr const char* kCjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

const std::vector<Form>& forms() {
  static const std::vector<Form> table = [] {
    const std::string c = kContractions;
    std::vector<Form> t;
    t.push_back({{"gpt-2", "mpt", "olmo", "jais"}, {kByteLevelRegex}, false, {{"mpt", "mpt"}, {"olmo", "olmo"}}});
    t.push_back({{"llama-bpe", "llama3", "llama-v3", "dbrx", "smaug-bpe"},
                 {split((c + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                             "\\s+(?!\\S)|\\s+").c_str())},
                 true,
                 {{"dbrx", "dbrx"}}});
    t.push_back({{"qwen2", "deepseek-r1-qwen"},
                 {split((c + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                             "\\s+(?!\\S)|\\s+").c_str())}});
    t.push_back({{"qwen35"},
                 {split((c + "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
                             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+").c_str())}});
    t.push_back({{"deepseek-v3"},
                 {split("\\p{N}{1,3}"), split("[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"),
                  split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                        " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")}});
    const std::string gpt4o_words = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]";
    const std::string gpt4o_lower = "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]";
    t.push_back({{"gpt-4o", "llama4", "minimax-m2"},
                 {split(("[^\\r\\n\\p{L}\\p{N}]?" + gpt4o_words + "*" + gpt4o_lower + "+" + c + "?|[^\\r\\n\\p{L}\\p{N}]?" +
                         gpt4o_words + "+" + gpt4o_lower + "*" + c +
                         "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
                            .c_str())},
                 false,
                 {{"llama4", "llama4"}, {"minimax_m2", "minimax-m2"}}});
    // Kimi K2's pattern (tokenization_kimi.py), for a tokenizer.json written from a
    // kimi-k2 vocabulary; the published model ships tiktoken.model instead.
    const std::string kimi_upper = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]";
    const std::string kimi_lower = "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]";
    t.push_back({{"kimi-k2"},
                 {split(("[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?" + kimi_upper + "*" + kimi_lower + "+" + c +
                         "?|[^\\r\\n\\p{L}\\p{N}]?" + kimi_upper + "+" + kimi_lower + "*" + c +
                         "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
                            .c_str())}});
    t.push_back({{"starcoder", "refact", "command-r", "smollm"},
                 {kDigitsIndividual, kByteLevelRegex},
                 false,
                 {{"gpt_refact", "refact"}, {"cohere", "command-r"}, {"cohere2", "command-r"}, {"llama", "smollm"}}});
    t.push_back({{"falcon"}, {kPunctuation, kByteLevelRegex, kDigits, split("[0-9][0-9][0-9]")}});
    t.push_back({{"deepseek-coder"},
                 {split("[\r\n]"), split("\\s?\\p{L}+"), split("\\s?\\p{P}+"), split(kCjk), kDigitsIndividual}});
    t.push_back(
        {{"deepseek-llm"},
         {split("[\r\n]"),
          split("\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-"
                "\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481"
                "\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-"
                "\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57"
                "\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-"
                "\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-"
                "\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184"
                "\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-"
                "\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-"
                "\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2"
                "\U000118A0-\U000118DF\U0001E900-\U0001E943]+"),
          split("\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"), split("\\s+$"), split(kCjk),
          kDigits}});
    // llama.cpp's "default" (no tokenizer.ggml.pre): its regexes as Split stages.
    t.push_back({{"default"},
                 {split("[\\p{P}\\$\\+<=>\\^~\\|]+"), split(kGpt2Regex), split("\\p{N}+"), split("[0-9][0-9][0-9]")}});
    return t;
  }();
  return table;
}

const Form* find_form(const std::string& name) {
  for (const Form& f : forms())
    if (std::find(f.names.begin(), f.names.end(), name) != f.names.end()) return &f;
  return nullptr;
}

// The stages of a pre_tokenizer object; false (with `why`) for a stage we cannot
// represent. A ByteLevel stage without its regex only maps bytes: not a stage.
bool stages_of(const json& p, std::vector<Stage>* out, std::string* why) {
  if (p.is_null()) return true;
  if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
    *why = "expected an object with a \"type\"";
    return false;
  }
  const std::string type = p["type"].get<std::string>();
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array()) {
      *why = "Sequence without a \"pretokenizers\" array";
      return false;
    }
    for (const json& s : p["pretokenizers"])
      if (!stages_of(s, out, why)) return false;
    return true;
  }
  if (type == "Split") {
    const json* pat = p.contains("pattern") ? &p["pattern"] : nullptr;
    if (!pat || !pat->is_object() || !(pat->contains("Regex") || pat->contains("String"))) {
      *why = "Split without a pattern";
      return false;
    }
    const json& re = pat->contains("Regex") ? (*pat)["Regex"] : (*pat)["String"];
    if (!re.is_string()) {
      *why = "Split pattern is not a string";
      return false;
    }
    out->push_back(split(re.get<std::string>().c_str()));
    return true;
  }
  if (type == "Digits") {
    const bool individual = p.value("individual_digits", false);
    out->push_back(individual ? kDigitsIndividual : kDigits);
    return true;
  }
  if (type == "ByteLevel") {
    if (p.value("use_regex", true)) out->push_back(kByteLevelRegex);
    return true;
  }
  if (type == "Punctuation") {
    out->push_back(kPunctuation);
    return true;
  }
  *why = "pre-tokenizer type '" + type + "' is not supported";
  return false;
}

}  // namespace

std::string pre_name_from_model_type(const std::string& model_type) {
  static const std::pair<const char*, const char*> table[] = {
      {"kimi_k2", "kimi-k2"},     {"kimi_k3", "kimi-k2"},  {"kimi_linear", "kimi-k2"},
      {"deepseek_v3", "deepseek-v3"}, {"qwen2", "qwen2"},  {"qwen2_moe", "qwen2"},
      {"qwen3", "qwen2"},         {"qwen3_moe", "qwen2"},  {"llama4", "llama4"},
  };
  for (const auto& [mt, name] : table)
    if (model_type == mt) return name;
  return "";
}

Result<std::string> pre_name_from_json(const json& pre_tokenizer, const std::string& model_type) {
  std::vector<Stage> stages;
  std::string why;
  const bool parsed = stages_of(pre_tokenizer, &stages, &why);
  if (parsed) {
    for (const Form& f : forms()) {
      if (f.stages != stages) continue;
      for (const auto& [mt, name] : f.by_model_type)
        if (mt == model_type) return name;
      return f.names.front();
    }
    why = "its stages match no pre-tokenizer llama.cpp knows";
  }
  const std::string fallback = pre_name_from_model_type(model_type);
  if (!fallback.empty()) return fallback;
  std::string known;
  for (const Form& f : forms()) known += (known.empty() ? "" : ", ") + f.names.front();
  return make_error("tokenizer.json: pre_tokenizer: {} (recognised: the pre-tokenizers of {}; config.json "
                    "model_type '{}' does not name one either)",
                    why, known, model_type);
}

Result<json> pre_tokenizer_json(const std::string& pre, bool* ignore_merges) {
  const Form* f = find_form(pre.empty() ? "default" : pre);
  if (!f) {
    std::string known;
    for (const Form& g : forms())
      for (const std::string& n : g.names) known += (known.empty() ? "" : ", ") + n;
    return make_error("tokenizer.ggml.pre = '{}': no Hugging Face pre-tokenizer form is known for it (known: {})",
                      pre, known);
  }
  *ignore_merges = f->ignore_merges;
  json seq = json::array();
  bool byte_level = false;
  for (const Stage& s : f->stages) {
    switch (s.kind) {
      case StageKind::kSplit:
        seq.push_back({{"type", "Split"}, {"pattern", {{"Regex", s.regex}}}, {"behavior", "Isolated"}, {"invert", false}});
        break;
      case StageKind::kDigits:
      case StageKind::kDigitsIndividual:
        seq.push_back({{"type", "Digits"}, {"individual_digits", s.kind == StageKind::kDigitsIndividual}});
        break;
      case StageKind::kByteLevelRegex:
        seq.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}});
        byte_level = true;
        break;
      case StageKind::kPunctuation:
        seq.push_back({{"type", "Punctuation"}, {"behavior", "Contiguous"}});
        break;
    }
  }
  if (!byte_level)
    seq.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
  if (seq.size() == 1) return seq[0];
  return json{{"type", "Sequence"}, {"pretokenizers", seq}};
}

std::string canonical_pre_name(const std::string& pre) {
  const Form* f = find_form(pre.empty() ? "default" : pre);
  return f ? f->names.front() : pre;
}

}  // namespace deltafin::hf
