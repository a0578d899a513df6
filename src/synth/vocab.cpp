// Tokenizer metadata for synthetic models: a real vocabulary copied from a GGUF, or
// a small built-in byte-level BPE vocabulary (GPT-2 byte mapping, 256 byte tokens,
// a few hundred merges of common English pairs, and end-of-text) so that a model can
// be generated without any external file.
#include <map>
#include <set>

#include "io/byte_source.h"
#include "synth/synth.h"

namespace deltafin {
namespace {

// GPT-2's reversible byte -> printable code point mapping, as UTF-8 strings.
std::vector<std::string> byte_chars() {
  std::vector<int> cps(256, -1);
  auto keep = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); };
  int n = 0;
  for (int b = 0; b < 256; ++b) cps[size_t(b)] = keep(b) ? b : 256 + n++;
  std::vector<std::string> out(256);
  for (int b = 0; b < 256; ++b) {
    int cp = cps[size_t(b)];
    std::string s;
    if (cp < 0x80) {
      s += char(cp);
    } else {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    }
    out[size_t(b)] = s;
  }
  return out;
}

}  // namespace

namespace {

Result<int64_t> base_vocab(const std::string& vocab_path, GGUFFile* meta) {
  if (!vocab_path.empty()) {
    DF_ASSIGN(auto src, open_file_source(vocab_path));
    DF_ASSIGN(GGUFFile v, parse_gguf(*src));
    int64_t n = 0;
    for (const auto& k : v.keys) {
      if (k.rfind("tokenizer.", 0) != 0) continue;
      meta->set(k, v.kv.at(k));
      if (k == "tokenizer.ggml.tokens") n = int64_t(v.kv.at(k).strings.size());
    }
    if (n == 0) return make_error("{}: no tokenizer.ggml.tokens array; not a vocabulary GGUF", vocab_path);
    return n;
  }
  std::vector<std::string> bc = byte_chars();
  std::vector<std::string> tokens = bc;
  std::vector<std::string> merges;
  std::set<std::string> have(tokens.begin(), tokens.end());
  // Merges: space+letter, then common letter pairs, then space+pair words.
  const std::string sp = bc[' '];
  auto add = [&](const std::string& a, const std::string& b) {
    if (!have.count(a) || !have.count(b) || have.count(a + b)) return;
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
    have.insert(a + b);
  };
  const char* letters = "etaoinshrdlcumwfgypbvkjxqz";
  for (const char* c = letters; *c; ++c) add(sp, std::string(1, *c));
  const char* pairs[] = {"th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or",
                         "te", "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha",
                         "as", "ou", "io", "le", "ve", "co", "me", "de", "hi", "ri", "ro", "ic", "ne",
                         "ea", "ra", "ce", "li", "ch", "ll", "be", "ma", "si", "om", "ur"};
  for (const char* p : pairs) add(std::string(1, p[0]), std::string(1, p[1]));
  for (const char* p : pairs) add(sp + p[0], std::string(1, p[1]));
  add(sp + "th", "e");
  add(sp + "an", "d");
  add(sp + "o", "f");
  std::vector<int64_t> types(tokens.size(), 1);  // normal
  std::vector<double> scores(tokens.size(), 0.0);
  tokens.push_back("<|endoftext|>");
  types.push_back(3);  // control
  scores.push_back(0.0);
  const int64_t eos = int64_t(tokens.size()) - 1;
  const int64_t n = int64_t(tokens.size());
  meta->set("tokenizer.ggml.model", GGUFValue::str("gpt2"));
  meta->set("tokenizer.ggml.pre", GGUFValue::str("default"));
  meta->set("tokenizer.ggml.tokens", GGUFValue::string_array(std::move(tokens)));
  meta->set("tokenizer.ggml.token_type", GGUFValue::int_array(GGUFType::I32, std::move(types)));
  meta->set("tokenizer.ggml.merges", GGUFValue::string_array(std::move(merges)));
  meta->set("tokenizer.ggml.bos_token_id", GGUFValue::u32(uint32_t(eos)));
  meta->set("tokenizer.ggml.eos_token_id", GGUFValue::u32(uint32_t(eos)));
  meta->set("tokenizer.ggml.add_bos_token", GGUFValue::boolean(false));
  return n;
}

}  // namespace

Result<int64_t> synth_vocab(const SynthSpec& s, GGUFFile* meta) {
  DF_ASSIGN(const int64_t n, base_vocab(s.vocab_path, meta));
  if (s.n_vocab <= n) return n;
  GGUFValue tokens = meta->kv.at("tokenizer.ggml.tokens");
  GGUFValue types = meta->kv.at("tokenizer.ggml.token_type");
  for (int64_t id = n; id < s.n_vocab; ++id) {
    tokens.strings.push_back("[PAD" + std::to_string(id) + "]");
    types.ints.push_back(5);  // unused
  }
  meta->set("tokenizer.ggml.tokens", std::move(tokens));
  meta->set("tokenizer.ggml.token_type", std::move(types));
  if (const GGUFValue* sc = meta->find("tokenizer.ggml.scores")) {
    GGUFValue scores = *sc;
    scores.floats.resize(size_t(s.n_vocab), 0.0);
    meta->set("tokenizer.ggml.scores", std::move(scores));
  }
  return s.n_vocab;
}

}  // namespace deltafin
