#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <unordered_map>
#include <unordered_set>

namespace deltafin {

namespace {

// What tokenizer.ggml.pre selects: the split regexes and the flags llama.cpp
// sets with them.
struct PreInfo {
  std::vector<std::string_view> names;
  PreKind kind;
  bool clean_spaces = true;
  bool ignore_merges = false;
  bool add_bos = false;
  bool no_bos = false;  // the model has no BOS unless the metadata names one
};

const std::vector<PreInfo> kPreTable = {
    {{"default"}, PreKind::kDefault},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
      "jina-v5-nano"},
     PreKind::kLlama3, true, true, true},
    {{"deepseek-llm"}, PreKind::kDeepseekLlm, false},
    {{"deepseek-coder"}, PreKind::kDeepseekCoder, false},
    {{"deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"}, PreKind::kDeepseek3Llm, false},
    {{"spark2_5"}, PreKind::kSpark25, false},
    {{"youtu"}, PreKind::kYoutu, false, true},
    {{"falcon"}, PreKind::kFalcon},
    {{"mpt", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
      "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "olmo", "jais", "exaone4"},
     PreKind::kGpt2},
    {{"trillion", "granite-docling"}, PreKind::kGpt2, false},
    {{"jais-2"}, PreKind::kJais2},
    {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}, PreKind::kStarcoder},
    {{"command-r", "smollm"}, PreKind::kStarcoder, false},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"}, PreKind::kQwen2, false},
    {{"stablelm2", "megrez"}, PreKind::kQwen2},
    {{"qwen35"}, PreKind::kQwen35, false},
    {{"dbrx", "smaug-bpe"}, PreKind::kDbrx},
    {{"poro-chat", "viking"}, PreKind::kPoro, false},
    {{"bloom", "gpt3-finnish"}, PreKind::kPoro},
    {{"glm4", "chatglm-bpe"}, PreKind::kChatglm4, true, false, false, true},
    {{"tekken"}, PreKind::kTekken, false, true, true},
    {{"exaone-moe"}, PreKind::kExaoneMoe},
    {{"chameleon"}, PreKind::kChameleon, false, false, true},
    {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, PreKind::kGpt4o, false},
    {{"granite-embed-multi-97m"}, PreKind::kGraniteEmbMulti, false, true},
    {{"tiny_aya", "cohere2moe"}, PreKind::kTinyAya, false},
    {{"bailingmoe", "bailingmoe2", "llada-moe"}, PreKind::kBailingmoe, false},
    {{"seed-coder"}, PreKind::kSeedCoder, false},
    {{"kimi-k2"}, PreKind::kKimiK2, false},
    {{"ufakzeka"}, PreKind::kUfakzeka, false},
    {{"grok-2"}, PreKind::kGrok2, false},
    {{"afmoe"}, PreKind::kAfmoe, false},
    {{"laguna"}, PreKind::kLaguna, false},
    {{"minicpm5"}, PreKind::kMinicpm5, true, true},
};

const PreInfo* find_pre(std::string_view name) {
  for (const PreInfo& info : kPreTable)
    for (std::string_view n : info.names)
      if (name == n) return &info;
  return nullptr;
}

// The "viking" pre-tokenizer adds a digit split to Poro's regex.
PreKind adjust_kind(std::string_view name, PreKind kind) {
  return name == "viking" ? PreKind::kViking : kind;
}

// GGUF token_type values.
uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

bool contains_any(std::string_view s, std::initializer_list<std::string_view> subs) {
  for (auto sub : subs)
    if (s.find(sub) != std::string_view::npos) return true;
  return false;
}

bool is_one_of(std::string_view s, const std::vector<std::string_view>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

}  // namespace

Result<Vocab> Vocab::from_gguf(const GGUFFile& file) {
  Vocab v;
  DF_ASSIGN(v.model, file.get_string("tokenizer.ggml.model"));
  v.pre = file.string_or("tokenizer.ggml.pre", "");
  v.name = file.string_or("general.name", "");

  // Model type and its default special tokens.
  if (v.model == "llama") {
    v.type = VocabType::kSpm;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (v.model == "gpt2") {
    v.type = VocabType::kBpe;
    v.bos = 11;
    v.eos = 11;
    v.clean_spaces = true;
    const PreInfo* info = v.pre.empty() ? find_pre("default") : find_pre(v.pre);
    if (!info) {
      return make_error("tokenizer.ggml.pre = '{}': unknown pre-tokenizer (supported: llama-bpe, qwen2, "
                        "qwen35, deepseek-llm, deepseek-coder, deepseek-v3, kimi-k2, gpt-4o, gpt-2, falcon, "
                        "starcoder, refact, command-r, mpt and others llama.cpp knows)",
                        v.pre);
    }
    v.pre_kind = adjust_kind(v.pre, info->kind);
    v.clean_spaces = info->clean_spaces;
    v.ignore_merges = info->ignore_merges;
    if (info->add_bos) v.add_bos = true;
    if (info->no_bos) v.bos = kNoToken;
  } else if (v.model == "none" || v.model == "no_vocab") {
    return make_error("tokenizer.ggml.model = '{}': the file has no vocabulary", v.model);
  } else {
    return make_error("tokenizer.ggml.model = '{}': unsupported tokenizer (supported: 'gpt2' byte-level "
                      "BPE, 'llama' SentencePiece)",
                      v.model);
  }
  v.add_space_prefix = file.bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

  // Tokens, scores, types.
  const GGUFValue* toks = file.find("tokenizer.ggml.tokens");
  if (!toks) return make_error("missing metadata key 'tokenizer.ggml.tokens'");
  if (!toks->is_array() || toks->elem_type != GGUFType::STRING)
    return make_error("tokenizer.ggml.tokens: expected an array of strings");
  const size_t n = toks->strings.size();
  if (n == 0 || n > size_t(INT32_MAX)) return make_error("tokenizer.ggml.tokens: {} tokens", n);

  const GGUFValue* scores = file.find("tokenizer.ggml.scores");
  if (scores) {
    if (!scores->is_array() || (scores->elem_type != GGUFType::F32 && scores->elem_type != GGUFType::I32))
      return make_error("tokenizer.ggml.scores: expected an array of f32 or i32");
    if (scores->array_size() < n)
      return make_error("tokenizer.ggml.scores: {} scores for {} tokens", scores->array_size(), n);
  }
  const GGUFValue* types = file.find("tokenizer.ggml.token_type");
  if (types) {
    if (!types->is_array() || types->elem_type != GGUFType::I32)
      return make_error("tokenizer.ggml.token_type: expected an array of i32");
    if (types->ints.size() < n)
      return make_error("tokenizer.ggml.token_type: {} types for {} tokens", types->ints.size(), n);
  }

  v.tokens.resize(n);
  size_t text_bytes = 0;
  for (const std::string& t : toks->strings) text_bytes += t.size();
  v.text_to_id.reserve(n, text_bytes);
  size_t duplicates = 0;
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = v.tokens[i];
    t.text = toks->strings[i];
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";
    if (scores) t.score = scores->elem_type == GGUFType::F32 ? float(scores->floats[i]) : float(scores->ints[i]);
    t.attr = types ? attr_from_type(types->ints[i]) : kAttrNormal;
    if (!v.text_to_id.insert(t.text, int32_t(i))) ++duplicates;
  }
  if (duplicates) return make_error("tokenizer.ggml.tokens: {} of {} tokens repeat an earlier text", duplicates, n);

  // Merges: "left right", split at the first space after the first byte.
  if (v.type == VocabType::kBpe) {
    const GGUFValue* merges = file.find("tokenizer.ggml.merges");
    if (!merges) {
      if (v.pre != "kimi-k2") return make_error("missing metadata key 'tokenizer.ggml.merges'");
    } else {
      if (!merges->is_array() || merges->elem_type != GGUFType::STRING)
        return make_error("tokenizer.ggml.merges: expected an array of strings");
      v.merges.reserve(merges->strings.size());
      for (const std::string& m : merges->strings) {
        const size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) {
          v.merges.emplace_back();  // keeps the ranks of later merges; never matches
        } else {
          v.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
        }
      }
    }
  }

  // Special token ids from the metadata; an id outside the vocabulary keeps the
  // default, and a default outside it means "none".
  struct SpecialKey {
    const char* key;
    int32_t* id;
  };
  const SpecialKey special_keys[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},
      {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.seperator_token_id", &v.sep},  // sic: the key's spelling
      {"tokenizer.ggml.padding_token_id", &v.pad},
      {"tokenizer.ggml.mask_token_id", &v.mask},
      {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
      {"tokenizer.ggml.prefix_token_id", &v.fim_pre},  // deprecated spellings
      {"tokenizer.ggml.suffix_token_id", &v.fim_suf},
      {"tokenizer.ggml.middle_token_id", &v.fim_mid},
  };
  for (const SpecialKey& sk : special_keys) {
    if (*sk.id != kNoToken && !v.valid(*sk.id)) *sk.id = kNoToken;
    auto r = file.get_int(sk.key);
    if (r.ok() && r.value() >= 0 && r.value() < int64_t(n)) *sk.id = int32_t(r.value());
  }
  v.add_bos = file.bool_or("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = file.bool_or("tokenizer.ggml.add_eos_token", v.add_eos);

  // Recognise end-of-turn, FIM and end-of-generation tokens by their text, as
  // llama.cpp does for conversions that did not record them; such tokens become
  // control tokens.
  auto mark_control = [&](int32_t id) { v.tokens[size_t(id)].attr |= kAttrControl; };
  // llama.cpp scans the token map once, filling each empty slot with the first
  // text in map order that its list names.
  struct Detect {
    int32_t* slot;
    std::vector<std::string_view> texts;
  };
  const Detect detects[] = {
      {&v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                "<EOT>", "_<EOT>", "[EOT]", "<\uFF5Cend\u2581of\u2581sentence\uFF5C>", "<end_of_utterance>"}},
      {&v.eom, {"<|eom_id|>"}},
      {&v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\uFF5Cfim\u2581begin\uFF5C>", "<PRE>",
                    "\u2581<PRE>", "<|code_prefix|>", "<|prefix|>"}},
      {&v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\uFF5Cfim\u2581hole\uFF5C>", "<SUF>",
                    "\u2581<SUF>", "<|code_suffix|>", "<|suffix|>"}},
      {&v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\uFF5Cfim\u2581end\uFF5C>", "<MID>",
                    "\u2581<MID>", "<|code_middle|>", "<|middle|>"}},
      {&v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {&v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&v.fim_sep, {"<|file_sep|>"}},
  };
  const std::vector<std::string_view> eog_texts = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
      "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
      "<\uFF5Cend\u2581of\u2581sentence\uFF5C>", "[e~["};
  // Only tokens whose text is named somewhere matter. Where a slot has several
  // candidates, llama.cpp's choice follows the iteration order of its
  // std::unordered_map<std::string, llama_token>; rebuild that map (same inserts,
  // same library) to visit the candidates in that order.
  std::vector<std::pair<std::string_view, int32_t>> candidates;
  {
    std::unordered_set<std::string_view> named(eog_texts.begin(), eog_texts.end());
    for (const Detect& d : detects) named.insert(d.texts.begin(), d.texts.end());
    for (std::string_view text : named) {
      const int32_t id = v.find(text);
      if (id != kNoToken) candidates.emplace_back(text, id);
    }
    bool ambiguous = false;
    for (const Detect& d : detects) {
      int hits = 0;
      for (const auto& c : candidates) hits += is_one_of(c.first, d.texts);
      ambiguous |= *d.slot == kNoToken && hits > 1;
    }
    if (ambiguous) {
      std::unordered_map<std::string, int32_t> llama_order;
      for (size_t i = 0; i < n; ++i) llama_order[v.tokens[i].text] = int32_t(i);
      candidates.clear();
      for (const auto& [text, id] : llama_order)
        if (named.count(text)) candidates.emplace_back(v.tokens[size_t(id)].text, id);
    }
  }

  for (const auto& [text, id] : candidates) {
    for (const Detect& d : detects) {
      if (*d.slot == kNoToken && is_one_of(text, d.texts)) {
        *d.slot = id;
        mark_control(id);
      }
    }
  }

  // Control tokens named "unused..." are unused.
  for (TokenData& t : v.tokens) {
    if ((t.attr & kAttrControl) && t.text.find("unused") != std::string::npos) t.attr |= kAttrUnused;
  }

  // End-of-generation tokens.
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep})
    if (id != kNoToken) v.eog.insert(id);
  for (const auto& [text, id] : candidates) {
    if (is_one_of(text, eog_texts)) {
      v.eog.insert(id);
      mark_control(id);
    }
  }
  // gpt-oss: these structural tokens are always rendered.
  for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    int32_t id = v.find(text);
    if (id != kNoToken) v.tokens[size_t(id)].attr = kAttrUserDefined;
  }
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id != kNoToken) v.eog.insert(id);
  if (const GGUFValue* ids = file.find(kEogIdsKey); ids != nullptr && ids->is_array())
    for (int64_t id : ids->ints)
      if (id >= 0 && id < int64_t(n)) v.eog.insert(int32_t(id));
  // o200k_harmony / solar-open: "<|end|>" ends a message, not generation.
  {
    auto has = [&](const char* text) {
      int32_t id = v.find(text);
      return id != kNoToken && v.eog.count(id) ? id : kNoToken;
    };
    const int32_t end = has("<|end|>");
    const bool ret = has("<|return|>") != kNoToken, call = has("<|call|>") != kNoToken || has("<|calls|>") != kNoToken;
    const bool flush = has("<|flush|>") != kNoToken;
    if (end != kNoToken && ((ret && call) || (call && flush))) {
      v.eog.erase(end);
      v.tokens[size_t(end)].attr = kAttrUserDefined;
    }
    // Gemma 4: "</s>" is not an end of generation there.
    const int32_t s = has("</s>");
    if (s != kNoToken && has("<|tool_response>") != kNoToken) {
      v.eog.erase(s);
      v.tokens[size_t(s)].attr = kAttrNormal;
    }
  }

  // Tokens split out of raw text before tokenizing, longest first. std::sort is
  // not stable; with the same input order and comparator it orders ties as
  // llama.cpp's std::sort does, which decides between overlapping equal-length
  // matches.
  for (int32_t id = 0; id < int32_t(n); ++id) {
    if (v.tokens[size_t(id)].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.special_tokens.push_back(id);
  }
  std::sort(v.special_tokens.begin(), v.special_tokens.end(), [&](int32_t a, int32_t b) {
    return v.tokens[size_t(a)].text.size() > v.tokens[size_t(b)].text.size();
  });

  // Per-model whitespace stripping around special tokens.
  std::string lname = v.name;
  std::transform(lname.begin(), lname.end(), lname.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const std::string arch = file.string_or("general.architecture", "");
  auto set_attr = [&](const char* text, uint32_t bit, bool on) {
    int32_t id = v.find(text);
    if (id == kNoToken) return;
    uint32_t& a = v.tokens[size_t(id)].attr;
    a = on ? (a | bit) : (a & ~bit);
  };
  if (contains_any(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set_attr("<mask>", kAttrLstrip, true);
  } else if (contains_any(lname, {"phi-3", "phi3"})) {
    for (int32_t id : v.special_tokens) v.tokens[size_t(id)].attr |= kAttrRstrip;
    set_attr("</s>", kAttrRstrip, true);
    for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(text, kAttrRstrip, false);
  } else if (contains_any(lname, {"modern-bert"})) {
    set_attr("[MASK]", kAttrLstrip, true);
  }
  return v;
}

}  // namespace deltafin
