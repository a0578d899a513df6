// Hugging Face tokenizer files <-> GGUF tokenizer keys (format/hf_tokenizer.h):
// write_hf_tokenizer() then hf_tokenizer_to_gguf() gives back the keys the
// converter writes, for the built-in synthetic vocabulary (tokenizer.json and
// tiktoken.model forms) and every vocabulary in ../shared/vocab (byte-level BPE as
// tokenizer.json, SentencePiece as tokenizer.model), and the converted keys
// tokenize the goldens to the golden ids. Also: merges as [a, b] pairs, token types and special ids as llama.cpp's
// converter sets them, tiktoken merges rebuilt from ranks, chat template sources,
// and malformed files rejected with errors naming the file and field.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "format/hf_tokenizer.h"
#include "format/hf_tokenizer_detail.h"
#include "io/byte_source.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("deltafin-hftok-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

HfTokenizerFiles read_folder(const fs::path& dir) {
  HfTokenizerFiles f;
  auto opt = [&](const char* name) { return fs::exists(dir / name) ? slurp(dir / name) : std::string(); };
  f.tokenizer_json = opt("tokenizer.json");
  f.tokenizer_config_json = opt("tokenizer_config.json");
  f.tiktoken_model = opt("tiktoken.model");
  f.tokenizer_model = opt("tokenizer.model");
  f.chat_template_jinja = opt("chat_template.jinja");
  return f;
}

// The keys of `a` the converter writes, compared with `b`: tokenizer.ggml.pre by
// the form it was written in.
void expect_same_keys(const GGUFFile& a, const GGUFFile& b, const std::string& what, bool merges = true) {
  std::vector<std::string> keys = {
      "tokenizer.ggml.model",          "tokenizer.ggml.tokens",           "tokenizer.ggml.token_type",
      "tokenizer.ggml.scores",
      "tokenizer.ggml.merges",         "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",
      "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id",
      "tokenizer.ggml.cls_token_id",   "tokenizer.ggml.mask_token_id",    "tokenizer.ggml.add_bos_token",
      "tokenizer.ggml.add_eos_token",  "tokenizer.chat_template",        "tokenizer.chat_templates"};
  if (!merges) keys.erase(std::find(keys.begin(), keys.end(), "tokenizer.ggml.merges"));
  for (const std::string& k : keys) {
    const GGUFValue* va = a.find(k);
    const GGUFValue* vb = b.find(k);
    ASSERT_EQ(va != nullptr, vb != nullptr) << what << ": key " << k;
    if (!va) continue;
    if (k == "tokenizer.ggml.scores") {
      ASSERT_EQ(va->floats, vb->floats) << what << ": " << k;
      continue;
    }
    if (k == "tokenizer.ggml.tokens" || k == "tokenizer.ggml.merges" || k == "tokenizer.ggml.token_type") {
      ASSERT_EQ(va->array_size(), vb->array_size()) << what << ": " << k;
      for (size_t i = 0; i < va->array_size(); ++i) {
        if (k == "tokenizer.ggml.token_type") {
          // Conversions older than llama.cpp's does_token_look_special() left added
          // tokens such as <|START_OF_TURN_TOKEN|> user-defined; today's are control.
          const int64_t want =
              va->ints[i] == 4 && hf::looks_special(a.find("tokenizer.ggml.tokens")->strings[i]) ? 3 : va->ints[i];
          ASSERT_EQ(want, vb->ints[i]) << what << ": " << k << "[" << i << "] ("
                                             << a.find("tokenizer.ggml.tokens")->strings[i] << ")";
        } else {
          ASSERT_EQ(va->strings[i], vb->strings[i]) << what << ": " << k << "[" << i << "]";
        }
      }
      continue;
    }
    if (va->type == GGUFType::U32 || vb->type == GGUFType::U32) {
      EXPECT_EQ(va->i, vb->i) << what << ": " << k;
      continue;
    }
    EXPECT_TRUE(gguf_values_equal(*va, *vb)) << what << ": " << k;
  }
  if (const GGUFValue* v = a.find("tokenizer.chat_templates")) {
    for (const std::string& n : v->strings)
      EXPECT_EQ(a.string_or("tokenizer.chat_template." + n, "a"), b.string_or("tokenizer.chat_template." + n, "b"))
          << what << ": template " << n;
  }
  EXPECT_EQ(hf::canonical_pre_name(a.string_or("tokenizer.ggml.pre", "default")),
            b.string_or("tokenizer.ggml.pre", "?"))
      << what;
}

Result<GGUFFile> round_trip(const GGUFFile& src, bool tiktoken) {
  TempDir dir;
  DF_TRY(write_hf_tokenizer(src, dir.path.string(), tiktoken));
  GGUFFile out;
  DF_TRY(hf_tokenizer_to_gguf(read_folder(dir.path), &out));
  return out;
}

fs::path vocab_dir() { return fs::path(DELTAFIN_SHARED_DIR) / "vocab"; }

// test-tokenizer-0's goldens: strings separated by "\n__ggml_vocab_test__\n", one
// line of ids per string.
std::vector<std::pair<std::string, std::vector<int32_t>>> read_goldens(const fs::path& gguf) {
  const std::string inp = slurp(gguf.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos <= inp.size();) {
    const size_t next = inp.find(sep, pos);
    texts.push_back(inp.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }
  std::ifstream out(gguf.string() + ".out");
  std::vector<std::pair<std::string, std::vector<int32_t>>> g;
  std::string line;
  for (size_t i = 0; std::getline(out, line) && i < texts.size(); ++i) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    g.emplace_back(texts[i], std::move(ids));
  }
  return g;
}

std::vector<std::string> shared_vocabs() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(vocab_dir(), ec)) {
    const fs::path p = e.path();
    if (p.extension() != ".gguf" || !fs::exists(p.string() + ".out")) continue;
    auto src = open_file_source(p.string());
    if (!src.ok()) continue;
    auto g = parse_gguf(**src);
    if (g.ok()) names.push_back(p.stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

GGUFFile synth_meta() {
  GGUFFile meta;
  EXPECT_TRUE(synth_vocab(SynthSpec{}, &meta).ok());
  meta.set("tokenizer.chat_template", GGUFValue::str("{% for m in messages %}{{ m.content }}{% endfor %}"));
  return meta;
}

}  // namespace

TEST(HfTokenizer, SynthVocabRoundTrips) {
  const GGUFFile meta = synth_meta();
  auto back = round_trip(meta, false);
  ASSERT_TRUE(back.ok()) << back.error().message;
  expect_same_keys(meta, *back, "synth");
}

// tiktoken form: the same tokens, types and ids; the merges are rebuilt from the
// ranks, which the synthetic vocabulary's hand-made merges need not follow, so a
// second round trip must give back the first exactly.
TEST(HfTokenizer, SynthVocabRoundTripsAsTiktoken) {
  GGUFFile meta = synth_meta();
  auto once = round_trip(meta, true);
  ASSERT_TRUE(once.ok()) << once.error().message;
  meta.set("tokenizer.ggml.pre", GGUFValue::str("kimi-k2"));
  expect_same_keys(meta, *once, "synth (tiktoken)", /*merges=*/false);
  EXPECT_GT(once->find("tokenizer.ggml.merges")->array_size(), 100u);
  auto twice = round_trip(*once, true);
  ASSERT_TRUE(twice.ok()) << twice.error().message;
  expect_same_keys(*once, *twice, "synth (tiktoken, twice)");
}

class HfTokenizerVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerVocab, RoundTripsAndMatchesGoldens) {
  const fs::path path = vocab_dir() / (GetParam() + ".gguf");
  auto src = open_file_source(path.string());
  ASSERT_TRUE(src.ok());
  auto meta = parse_gguf(**src);
  ASSERT_TRUE(meta.ok()) << meta.error().message;
  auto back = round_trip(*meta, false);
  ASSERT_TRUE(back.ok()) << GetParam() << ": " << back.error().message;
  expect_same_keys(*meta, *back, GetParam());

  back->set("tokenizer.ggml.pre", meta->kv.at("tokenizer.ggml.pre"));  // aliases behave alike; goldens use flags
  auto tok = Tokenizer::from_gguf(*back);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  int checked = 0;
  for (const auto& [text, ids] : read_goldens(path)) {
    EXPECT_EQ(tok->encode(text, false, false), ids) << GetParam() << ": '" << text << "'";
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

// Llama 3's vocabulary was made by tiktoken: written as tiktoken.model, the merges
// rebuilt from its ranks (one per token, where Llama 3's tokenizer.json lists every
// pair that joins into a token) tokenize with its own pre-tokenizer to the goldens.
TEST(HfTokenizer, TiktokenFormOfLlama3) {
  const fs::path path = vocab_dir() / "ggml-vocab-llama-bpe.gguf";
  auto src = open_file_source(path.string());
  if (!src.ok()) GTEST_SKIP() << path << " is missing";
  auto meta = parse_gguf(**src);
  ASSERT_TRUE(meta.ok());
  auto back = round_trip(*meta, true);
  ASSERT_TRUE(back.ok()) << back.error().message;
  GGUFFile expect = *meta;
  expect.set("tokenizer.ggml.pre", GGUFValue::str("kimi-k2"));
  expect_same_keys(expect, *back, "llama-bpe (tiktoken)", /*merges=*/false);
  EXPECT_GT(back->find("tokenizer.ggml.merges")->array_size(), 127000u);
  // (Llama 3 takes a word that is a token whole, as tiktoken does: " Việt" is a
  // token no merge reaches. The merges alone are checked on o200k_base against
  // js-tiktoken in tests/oracle/hf_tokenizer_files.sh.)
  back->set("tokenizer.ggml.pre", meta->kv.at("tokenizer.ggml.pre"));
  auto tok = Tokenizer::from_gguf(*back);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  for (const auto& [text, ids] : read_goldens(path)) EXPECT_EQ(tok->encode(text, false, false), ids) << text;
}

std::string vocab_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(uint8_t(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Shared, HfTokenizerVocab, ::testing::ValuesIn(shared_vocabs()), vocab_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HfTokenizerVocab);

// A tokenizer.json written by hand: merges as pairs, added tokens special or not,
// ids with a gap, ids from tokenizer_config.json, the pre-tokenizer by its regex.
TEST(HfTokenizer, ReadsTokenizerJson) {
  HfTokenizerFiles f;
  f.tokenizer_json = R"({
    "added_tokens": [
      {"id": 6, "content": "<|im_start|>", "special": true},
      {"id": 7, "content": "<think>", "special": false},
      {"id": 8, "content": "<|tool|>", "special": false}],
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 5},
              "merges": [["a", "b"], "Ġ ab"]}})";
  f.tokenizer_config_json = R"({"eos_token": {"content": "<|im_start|>"}, "bos_token": null,
                                "add_bos_token": false, "chat_template": "T"})";
  f.chat_template_jinja = "ignored: tokenizer_config.json's comes first";
  GGUFFile meta;
  auto st = hf_tokenizer_to_gguf(f, &meta);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(meta.string_or("tokenizer.ggml.pre", ""), "qwen2");
  const auto& tokens = meta.find("tokenizer.ggml.tokens")->strings;
  ASSERT_EQ(tokens.size(), 9u);
  EXPECT_EQ(tokens[4], "[PAD4]");
  EXPECT_EQ(meta.find("tokenizer.ggml.token_type")->ints, (std::vector<int64_t>{1, 1, 1, 1, 5, 1, 3, 4, 3}));
  EXPECT_EQ(meta.find("tokenizer.ggml.merges")->strings, (std::vector<std::string>{"a b", "Ġ ab"}));
  EXPECT_EQ(meta.int_or("tokenizer.ggml.eos_token_id", -1), 6);
  EXPECT_EQ(meta.find("tokenizer.ggml.bos_token_id"), nullptr);
  EXPECT_FALSE(meta.bool_or("tokenizer.ggml.add_bos_token", true));
  EXPECT_EQ(meta.string_or("tokenizer.chat_template", ""), "T");

  // config.json: vocab_size pads the list; its ids fill what tokenizer_config.json lacks.
  f.config_json = R"({"model_type": "qwen3_moe", "vocab_size": 12, "bos_token_id": 6})";
  GGUFFile padded;
  ASSERT_TRUE(hf_tokenizer_to_gguf(f, &padded).ok());
  EXPECT_EQ(padded.find("tokenizer.ggml.tokens")->strings.size(), 12u);
  EXPECT_EQ(padded.find("tokenizer.ggml.tokens")->strings[11], "[PAD11]");
  EXPECT_EQ(padded.int_or("tokenizer.ggml.bos_token_id", -1), 6);
}

// A folder with both tokenizer.model and a byte-level tokenizer.json reads the
// latter; a SentencePiece one (byte_fallback) the former.
TEST(HfTokenizer, PicksTheTokenizerFile) {
  TempDir bpe, spm;
  ASSERT_TRUE(write_hf_tokenizer(synth_meta(), bpe.path.string(), false).ok());
  auto src = open_file_source((vocab_dir() / "ggml-vocab-llama-spm.gguf").string());
  if (!src.ok()) GTEST_SKIP() << "../shared/vocab/ggml-vocab-llama-spm.gguf is missing";
  auto llama = parse_gguf(**src);
  ASSERT_TRUE(llama.ok());
  ASSERT_TRUE(write_hf_tokenizer(*llama, spm.path.string(), false).ok());
  HfTokenizerFiles f = read_folder(bpe.path);
  f.tokenizer_model = read_folder(spm.path).tokenizer_model;
  GGUFFile m;
  ASSERT_TRUE(hf_tokenizer_to_gguf(f, &m).ok());
  EXPECT_EQ(m.string_or("tokenizer.ggml.model", ""), "gpt2");
  f.tokenizer_json = R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}, "merges": []},
                         "added_tokens": [{"id": 2, "content": "</s>", "special": true}]})";
  f.tokenizer_config_json = R"({"eos_token": "</s>", "add_bos_token": true})";
  GGUFFile s;
  ASSERT_TRUE(hf_tokenizer_to_gguf(f, &s).ok());
  EXPECT_EQ(s.string_or("tokenizer.ggml.model", ""), "llama");
  EXPECT_EQ(s.find("tokenizer.ggml.tokens")->strings.size(), 32000u);
  EXPECT_EQ(s.int_or("tokenizer.ggml.eos_token_id", -1), 2);
  EXPECT_TRUE(s.bool_or("tokenizer.ggml.add_bos_token", false));
}

TEST(HfTokenizer, ChatTemplateSources) {
  const GGUFFile base = synth_meta();
  TempDir dir;
  ASSERT_TRUE(write_hf_tokenizer(base, dir.path.string(), false).ok());
  HfTokenizerFiles f = read_folder(dir.path);
  ASSERT_FALSE(f.chat_template_jinja.empty());
  f.chat_template_jinja = "J";
  GGUFFile m;
  ASSERT_TRUE(hf_tokenizer_to_gguf(f, &m).ok());
  EXPECT_EQ(m.string_or("tokenizer.chat_template", ""), "J");
  f.chat_template_jinja.clear();
  GGUFFile none;
  ASSERT_TRUE(hf_tokenizer_to_gguf(f, &none).ok());
  EXPECT_EQ(none.find("tokenizer.chat_template"), nullptr);

  // Named templates: a list in tokenizer_config.json.
  GGUFFile named = base;
  named.set("tokenizer.chat_templates", GGUFValue::string_array({"tool_use", "rag"}));
  named.set("tokenizer.chat_template.tool_use", GGUFValue::str("TU"));
  named.set("tokenizer.chat_template.rag", GGUFValue::str("RAG"));
  auto back = round_trip(named, false);
  ASSERT_TRUE(back.ok()) << back.error().message;
  expect_same_keys(named, *back, "named templates");
}

// Merges rebuilt from ranks: the last step of encoding each token with the
// merges of lower rank.
TEST(HfTokenizer, TiktokenMergesFromRanks) {
  auto b64 = [](const std::string& s) {
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < s.size(); i += 3) {
      uint32_t v = uint8_t(s[i]) << 16;
      if (i + 1 < s.size()) v |= uint8_t(s[i + 1]) << 8;
      if (i + 2 < s.size()) v |= uint8_t(s[i + 2]);
      for (size_t k = 0; k < 4; ++k) out += (k <= s.size() - i) ? a[(v >> (18 - 6 * k)) & 63] : '=';
    }
    return out;
  };
  // Ranks: a b c, then "bc", "ab", "abc" (from a+bc: "bc" outranks "ab"), " a".
  const std::vector<std::string> toks = {"a", "b", "c", " ", "bc", "ab", "abc", " a"};
  HfTokenizerFiles f;
  for (size_t i = 0; i < toks.size(); ++i) f.tiktoken_model += b64(toks[i]) + " " + std::to_string(i) + "\n";
  f.tokenizer_config_json = R"({"bos_token": "[BOS]", "eos_token": "[EOS]",
      "added_tokens_decoder": {"8": {"content": "[BOS]", "special": true}, "9": {"content": "[EOS]", "special": true}}})";
  f.vocab_size = 8 + 256 + 2;
  GGUFFile meta;
  auto st = hf_tokenizer_to_gguf(f, &meta);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(meta.string_or("tokenizer.ggml.pre", ""), "kimi-k2");
  EXPECT_EQ(meta.find("tokenizer.ggml.merges")->strings, (std::vector<std::string>{"b c", "a b", "a bc", "Ġ a"}));
  const auto& tokens = meta.find("tokenizer.ggml.tokens")->strings;
  const auto& types = meta.find("tokenizer.ggml.token_type")->ints;
  ASSERT_EQ(tokens.size(), 266u);
  EXPECT_EQ(tokens[3], "Ġ");
  EXPECT_EQ(tokens[8], "[BOS]");
  EXPECT_EQ(tokens[10], "<|reserved_token_10|>");
  EXPECT_EQ(types[10], 3);
  EXPECT_EQ(tokens[264], "[PAD264]");
  EXPECT_EQ(types[264], 5);
  EXPECT_EQ(meta.int_or("tokenizer.ggml.bos_token_id", -1), 8);
  EXPECT_EQ(meta.int_or("tokenizer.ggml.eos_token_id", -1), 9);
}

TEST(HfTokenizer, MalformedFilesNameFileAndField) {
  auto err = [](HfTokenizerFiles f) {
    GGUFFile m;
    auto st = hf_tokenizer_to_gguf(f, &m);
    return st.ok() ? std::string("ok") : st.error().message;
  };
  const std::string good_pre =
      R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  HfTokenizerFiles f;
  EXPECT_NE(err(f).find("none of tokenizer.json, tokenizer.model, tiktoken.model"), std::string::npos) << err(f);
  f.tokenizer_json = "{";
  EXPECT_NE(err(f).find("tokenizer.json: not valid JSON"), std::string::npos) << err(f);
  f.tokenizer_json = "{" + good_pre + R"(, "model": {"type": "Unigram", "vocab": []}})";
  EXPECT_NE(err(f).find("model.type 'Unigram'"), std::string::npos) << err(f);
  f.tokenizer_json = "{" + good_pre + R"(, "model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})";
  EXPECT_NE(err(f).find("tokenizer.json: model.vocab[\"a\"]"), std::string::npos) << err(f);
  f.tokenizer_json = "{" + good_pre + R"(, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}})";
  EXPECT_NE(err(f).find("tokenizer.json: model.merges[0]"), std::string::npos) << err(f);
  f.tokenizer_json = "{" + good_pre + R"(, "added_tokens": [{"id": -1, "content": "x"}], "model": {"type": "BPE", "vocab": {"a": 0}}})";
  EXPECT_NE(err(f).find("tokenizer.json: added_tokens[0]"), std::string::npos) << err(f);
  f.tokenizer_json = R"({"pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0}}})";
  EXPECT_NE(err(f).find("tokenizer.json: pre_tokenizer"), std::string::npos) << err(f);
  f.tokenizer_json = "{" + good_pre + R"(, "model": {"type": "BPE", "vocab": {"a": 0}}})";
  f.tokenizer_config_json = "[1]";
  EXPECT_NE(err(f).find("tokenizer_config.json"), std::string::npos) << err(f);
  f.tokenizer_config_json = R"({"chat_template": 5})";
  EXPECT_NE(err(f).find("tokenizer_config.json: chat_template"), std::string::npos) << err(f);
  f.tokenizer_config_json = "";
  f.config_json = R"({"vocab_size": -3})";
  EXPECT_NE(err(f).find("config.json: vocab_size"), std::string::npos) << err(f);

  HfTokenizerFiles s;
  s.tokenizer_model = std::string("\x0a\x05\x0a\x01", 4);  // a piece whose text runs past the message
  EXPECT_NE(err(s).find("tokenizer.model: offset 0"), std::string::npos) << err(s);
  s.tokenizer_model = std::string("\x12\x00", 2);  // a trainer_spec and no pieces
  EXPECT_NE(err(s).find("tokenizer.model: no pieces"), std::string::npos) << err(s);

  HfTokenizerFiles t;
  t.tiktoken_model = "YQ== 0\nnot base64! 1\n";
  EXPECT_NE(err(t).find("tiktoken.model: line 2"), std::string::npos) << err(t);
  t.tiktoken_model = "YQ== 0\nYQ== 1\n";
  EXPECT_NE(err(t).find("tiktoken.model: token of rank 1 appears twice"), std::string::npos) << err(t);
  t.tiktoken_model = "YQ== 0\n";
  t.tokenizer_config_json = R"({"added_tokens_decoder": {"x": {"content": "a"}}})";
  EXPECT_NE(err(t).find("tokenizer_config.json: added_tokens_decoder[\"x\"]"), std::string::npos) << err(t);
}
