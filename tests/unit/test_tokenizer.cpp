// Tokenizers against goldens: for every vocabulary in ../shared/vocab (GGUF with
// NAME.gguf.inp / NAME.gguf.out, the ids the reference tokenizer produces, as
// llama.cpp's test-tokenizer-0 reads them), every string must tokenize to exactly
// the golden ids. Also: decode(encode(x)) == x where the vocabulary can represent
// x, the streaming detokenizer never emits broken UTF-8, special-token splitting
// with its lstrip/rstrip rules, and a synthetic vocabulary that needs no files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>

#include "format/gguf.h"
#include "io/byte_source.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

fs::path vocab_dir() { return fs::path(DELTAFIN_SHARED_DIR) / "vocab"; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Golden {
  std::string text;
  std::vector<int32_t> ids;
};

// test-tokenizer-0's reading: strings separated by "\n__ggml_vocab_test__\n";
// one output line per string, stripped, ids separated by spaces.
std::vector<Golden> read_goldens(const fs::path& gguf) {
  const std::string inp = slurp(gguf.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(gguf.string() + ".out");
  std::vector<Golden> goldens;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    Golden g;
    if (i < texts.size()) g.text = texts[i];
    std::istringstream ls(line);
    for (int32_t id; ls >> id;) g.ids.push_back(id);
    goldens.push_back(std::move(g));
  }
  EXPECT_EQ(goldens.size(), texts.size()) << gguf;
  return goldens;
}

std::vector<std::string> list_vocabs() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(vocab_dir(), ec)) {
    const fs::path p = e.path();
    if (p.extension() == ".gguf" && fs::exists(p.string() + ".inp") && fs::exists(p.string() + ".out"))
      names.push_back(p.stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<GGUFFile> load_meta(const std::string& path) {
  DF_ASSIGN(auto src, open_file_source(path));
  return parse_gguf(*src);
}

// Tokenizers are loaded once per test binary.
const Tokenizer& tokenizer_for(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[name];
  if (!slot) {
    auto meta = load_meta((vocab_dir() / (name + ".gguf")).string());
    if (!meta.ok()) throw std::runtime_error(meta.error().message);
    auto tok = Tokenizer::from_gguf(*meta);
    if (!tok.ok()) throw std::runtime_error(tok.error().message);
    slot = std::make_unique<Tokenizer>(std::move(tok).value());
  }
  return *slot;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// Random text over a mix of scripts, whitespace, digits, punctuation, emoji and
// contractions (valid UTF-8).
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> parts = {
      "the", " The", "it's", " I'M", " we'll", "'re", "Hello", " world", "  ", "   ", "\n", "\n\n", "\r\n",
      "\t", " \t ", "3.14", " 1234567", "2024", "!!", "?", " ...", "(x)", "{\"a\": 1}", "<div>", "</p>",
      "\xC3\xA9t\xC3\xA9", " na\xC3\xAFve", "\xCE\xB1\xCE\xB2\xCE\xB3", " \xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
      "\xE4\xBD\xA0\xE5\xA5\xBD", "\xE4\xB8\x96\xE7\x95\x8C", "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",
      "\xED\x95\x9C\xEA\xB5\xAD", "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7", "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " \xF0\x9F\x87\xBA\xF0\x9F\x87\xB8", "\xE2\x82\xAC", "\xC2\xA0",
      "\xE3\x80\x80", "\xEF\xBC\x91\xEF\xBC\x92", "\xE2\x85\xA0", "e\xCC\x81", "\xE2\x80\x8B", "\xE2\x80\xA8"};
  std::uniform_int_distribution<size_t> pick(0, parts.size() - 1), count(1, 12);
  std::string s;
  for (size_t n = count(rng); n > 0; --n) s += parts[pick(rng)];
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------
// Goldens, per vocabulary.

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, MatchesEveryGolden) {
  const std::string name = GetParam();
  const Tokenizer& tok = tokenizer_for(name);
  const auto goldens = read_goldens(vocab_dir() / (name + ".gguf"));
  ASSERT_FALSE(goldens.empty());
  int pass = 0;
  for (const Golden& g : goldens) {
    const auto ids = tok.encode(g.text, /*add_special=*/false, /*parse_special=*/false);
    if (ids == g.ids) {
      ++pass;
    } else {
      ADD_FAILURE() << name << ": text '" << g.text << "'\n  expected: " << join_ids(g.ids)
                    << "\n  got:      " << join_ids(ids);
    }
  }
  RecordProperty("goldens_passed", pass);
  std::printf("[ goldens  ] %s: %d/%zu\n", name.c_str(), pass, goldens.size());
}

// Decoding the golden ids gives back the text, for every vocabulary that can
// represent it: byte-level BPE always can; SPM can when byte fallback covers it.
TEST_P(TokenizerGolden, DecodeOfGoldenIdsRestoresText) {
  const std::string name = GetParam();
  const Tokenizer& tok = tokenizer_for(name);
  DecodeOptions raw;
  raw.clean_spaces = false;
  for (const Golden& g : read_goldens(vocab_dir() / (name + ".gguf"))) {
    EXPECT_EQ(tok.decode(g.ids, raw), g.text) << name << ": ids " << join_ids(g.ids);
  }
}

TEST_P(TokenizerGolden, RoundTripRandomText) {
  const std::string name = GetParam();
  const Tokenizer& tok = tokenizer_for(name);
  DecodeOptions raw;
  raw.clean_spaces = false;
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_text(rng);
    const auto ids = tok.encode(text, false, false);
    EXPECT_EQ(tok.decode(ids, raw), text) << name << ": ids " << join_ids(ids);
  }
}

// Streaming: every chunk is valid UTF-8, and the chunks together are the
// sanitized concatenation of the pieces, for arbitrary id sequences (which split
// multi-byte characters across tokens all the time).
TEST_P(TokenizerGolden, StreamDecoderNeverEmitsBrokenUtf8) {
  const std::string name = GetParam();
  const Tokenizer& tok = tokenizer_for(name);
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> any_id(0, tok.n_vocab() - 1);
  for (int round = 0; round < 200; ++round) {
    StreamDecoder stream(tok);
    std::string all_pieces, streamed;
    std::vector<int32_t> ids;
    // Half the rounds use real text split into tokens, half random ids.
    if (round % 2 == 0) {
      ids = tok.encode(random_text(rng), false, false);
    } else {
      for (int k = 0; k < 40; ++k) ids.push_back(any_id(rng));
    }
    for (int32_t id : ids) {
      all_pieces += tok.piece(id, false);
      const std::string chunk = stream.push(id);
      ASSERT_TRUE(unicode::is_valid_utf8(chunk)) << name << " round " << round;
      streamed += chunk;
    }
    const std::string rest = stream.flush();
    ASSERT_TRUE(unicode::is_valid_utf8(rest));
    streamed += rest;
    EXPECT_EQ(streamed, unicode::sanitize_utf8(all_pieces)) << name << " round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedVocabs, TokenizerGolden, ::testing::ValuesIn(list_vocabs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(uint8_t(c))) c = '_';
                           return n;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TokenizerGolden);

TEST(Tokenizer, SharedVocabsPresent) {
  if (!fs::exists(vocab_dir())) GTEST_SKIP() << "no " << vocab_dir() << "; golden tests skipped";
  EXPECT_GE(list_vocabs().size(), 13u);
}

// ---------------------------------------------------------------------------
// Behaviour on specific vocabularies.

#define REQUIRE_VOCAB(name)                                                          \
  if (!fs::exists(vocab_dir() / (std::string(name) + ".gguf"))) GTEST_SKIP() << "no " << name

TEST(Tokenizer, SpecialTokensParsedOnlyWhenAsked) {
  REQUIRE_VOCAB("ggml-vocab-qwen2");
  const Tokenizer& tok = tokenizer_for("ggml-vocab-qwen2");
  const int32_t im_start = tok.vocab().find("<|im_start|>");
  ASSERT_NE(im_start, kNoToken);
  const auto parsed = tok.encode("<|im_start|>user\nhi", false, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed[0], im_start);
  const auto plain = tok.encode("<|im_start|>user\nhi", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
  // Control tokens render only when asked.
  EXPECT_EQ(tok.piece(im_start, true), "<|im_start|>");
  EXPECT_TRUE(tok.is_control(im_start));
  EXPECT_EQ(tok.piece(im_start, false), "");
  EXPECT_TRUE(tok.is_eog(tok.vocab().find("<|im_end|>")));
  EXPECT_TRUE(tok.is_eog(tok.vocab().find("<|endoftext|>")));
}

TEST(Tokenizer, Llama3SpecialIdsAndBos) {
  REQUIRE_VOCAB("ggml-vocab-llama-bpe");
  const Tokenizer& tok = tokenizer_for("ggml-vocab-llama-bpe");
  EXPECT_EQ(tok.bos(), 128000);
  EXPECT_EQ(tok.eos(), 128001);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_TRUE(tok.is_eog(128001));
  EXPECT_TRUE(tok.is_eog(128009));  // <|eot_id|>
  EXPECT_FALSE(tok.is_eog(128000));
  const auto ids = tok.encode("Hello", true, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], 128000);
  DecodeOptions skip;
  skip.remove_special = true;
  EXPECT_EQ(tok.decode(ids, skip), "Hello");
  EXPECT_EQ(tok.decode(ids), "Hello");  // BOS is a control token: not rendered
  DecodeOptions show;
  show.unparse_special = true;
  EXPECT_EQ(tok.decode(ids, show), "<|begin_of_text|>Hello");
  EXPECT_EQ(tok.nl(), 198);
}

TEST(Tokenizer, SpmSpacePrefixAndByteFallback) {
  REQUIRE_VOCAB("ggml-vocab-llama-spm");
  const Tokenizer& tok = tokenizer_for("ggml-vocab-llama-spm");
  EXPECT_TRUE(tok.add_bos());
  const auto ids = tok.encode("Hello world", true, false);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(tok.piece(ids[1]), " Hello");
  // llama_detokenize strips the prefixed space only when the first token is text
  // (a leading BOS, rendered or removed, keeps it): " Hello world" here.
  EXPECT_EQ(tok.decode(ids, {}), " Hello world");
  EXPECT_EQ(tok.decode(std::span<const int32_t>(ids).subspan(1), {}), "Hello world");
  // A character without its own token becomes byte tokens <0xXX>.
  const auto emoji = tok.encode("\xF0\x9F\xA6\x99", false, false);  // U+1F999
  for (int32_t id : emoji) EXPECT_TRUE(tok.attr(id) & (kAttrByte | kAttrNormal));
  EXPECT_EQ(tok.decode(emoji, {}), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(tok.nl(), 13);  // <0x0A>
}

// Phi-3 marks its special tokens rstrip (llama.cpp, by model name): whitespace
// after them is swallowed when they are parsed out of text.
TEST(Tokenizer, Phi3RstripAfterSpecialTokens) {
  REQUIRE_VOCAB("ggml-vocab-phi-3");
  const Tokenizer& tok = tokenizer_for("ggml-vocab-phi-3");
  const int32_t user = tok.vocab().find("<|user|>");
  ASSERT_NE(user, kNoToken);
  EXPECT_TRUE(tok.attr(user) & kAttrRstrip);
  const auto a = tok.encode("<|user|>\nHi", false, true);
  const auto b = tok.encode("<|user|>Hi", false, true);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0], user);
}

TEST(Tokenizer, EmptyAndInvalidInput) {
  REQUIRE_VOCAB("ggml-vocab-gpt-2");
  const Tokenizer& tok = tokenizer_for("ggml-vocab-gpt-2");
  EXPECT_TRUE(tok.encode("", false, false).empty());
  // Ill-formed UTF-8 is tokenized as U+FFFD (as llama.cpp does), never crashes.
  const auto ids = tok.encode("a\xFF" "b\xC3", false, false);
  EXPECT_EQ(tok.decode(ids, {}), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(tok.piece(-1), "");
  EXPECT_EQ(tok.piece(tok.n_vocab()), "");
}

// ---------------------------------------------------------------------------
// Without files: a synthetic byte-level BPE vocabulary.

namespace {

GGUFFile synthetic_bpe(const std::string& pre = "gpt-2") {
  GGUFFile f;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(unicode::byte_to_symbol(uint8_t(b)));
  const std::vector<std::string> merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or",
                                           "\xC4\xA0wor l", "\xC4\xA0worl d"};
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ');
    tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
  }
  tokens.push_back("<|endoftext|>");
  std::vector<int64_t> types(tokens.size(), 1);
  types.back() = 3;
  f.set("tokenizer.ggml.model", GGUFValue::str("gpt2"));
  f.set("tokenizer.ggml.pre", GGUFValue::str(pre));
  f.set("tokenizer.ggml.tokens", GGUFValue::string_array(tokens));
  f.set("tokenizer.ggml.token_type", GGUFValue::int_array(GGUFType::I32, types));
  f.set("tokenizer.ggml.merges", GGUFValue::string_array(merges));
  f.set("tokenizer.ggml.eos_token_id", GGUFValue::u32(uint32_t(tokens.size() - 1)));
  return f;
}

}  // namespace

TEST(Tokenizer, SyntheticBpeMerges) {
  auto tok = Tokenizer::from_gguf(synthetic_bpe());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const Vocab& v = tok->vocab();
  const auto ids = tok->encode("hello world!", false, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(v.tokens[size_t(ids[0])].text, "hello");
  EXPECT_EQ(v.tokens[size_t(ids[1])].text, "\xC4\xA0world");
  EXPECT_EQ(tok->piece(ids[1]), " world");
  EXPECT_EQ(tok->piece(ids[2]), "!");
  EXPECT_EQ(tok->decode(ids), "hello world!");
  // Every byte has a token, so any byte string round-trips (ill-formed input
  // becomes U+FFFD first).
  std::mt19937 rng(7);
  DecodeOptions raw;
  raw.clean_spaces = false;
  for (int i = 0; i < 100; ++i) {
    std::string s;
    for (int k = 0; k < 20; ++k) s += char(rng() % 128);
    EXPECT_EQ(tok->decode(tok->encode(s, false, false), raw), s);
  }
  // The end-of-text token is split out only when special tokens are parsed.
  const int32_t eot = tok->eos();
  EXPECT_EQ(tok->encode("hi<|endoftext|>", false, true).back(), eot);
  EXPECT_NE(tok->encode("hi<|endoftext|>", false, false).back(), eot);
  EXPECT_TRUE(tok->is_eog(eot));
}

TEST(Tokenizer, CleanSpacesLikeLlamaCpp) {
  auto tok = Tokenizer::from_gguf(synthetic_bpe());
  ASSERT_TRUE(tok.ok());
  const auto ids = tok->encode("a . b , c ' d 's 'll", false, false);
  EXPECT_EQ(tok->decode(ids), "a. b, c'd's 'll");
  DecodeOptions raw;
  raw.clean_spaces = false;
  EXPECT_EQ(tok->decode(ids, raw), "a . b , c ' d 's 'll");
}

TEST(Tokenizer, RejectsUnsupportedModels) {
  GGUFFile f = synthetic_bpe();
  f.set("tokenizer.ggml.model", GGUFValue::str("none"));
  auto r = Tokenizer::from_gguf(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no vocabulary"), std::string::npos) << r.error().message;

  f.set("tokenizer.ggml.model", GGUFValue::str("bert"));
  r = Tokenizer::from_gguf(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unsupported"), std::string::npos) << r.error().message;

  r = Tokenizer::from_gguf(synthetic_bpe("no-such-pre"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no-such-pre"), std::string::npos) << r.error().message;

  GGUFFile g = synthetic_bpe();
  g.kv.erase("tokenizer.ggml.tokens");
  r = Tokenizer::from_gguf(g);
  ASSERT_FALSE(r.ok());
}

TEST(Tokenizer, EveryPreTokenizerCompiles) {
  for (const char* pre : {"default", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder",
                          "deepseek-v3", "kimi-k2", "gpt-4o", "gpt-2", "falcon", "starcoder", "refact",
                          "command-r", "mpt", "tekken", "chameleon", "viking", "poro-chat", "jais-2",
                          "youtu", "spark2_5", "tiny_aya", "afmoe", "bailingmoe", "seed-coder", "ufakzeka",
                          "grok-2", "laguna", "exaone-moe", "minicpm5", "granite-embed-multi-97m"}) {
    auto tok = Tokenizer::from_gguf(synthetic_bpe(pre));
    ASSERT_TRUE(tok.ok()) << pre << ": " << tok.error().message;
    const std::string text = "Hello, world! it's 12345 \xE4\xBD\xA0\xE5\xA5\xBD  \n\n x";
    DecodeOptions raw;
    raw.clean_spaces = false;
    EXPECT_EQ(tok->decode(tok->encode(text, false, false), raw), text) << pre;
  }
}

// ---------------------------------------------------------------------------
// Pre-tokenizer pieces and Unicode helpers.

namespace {

std::vector<std::string> split_pieces(const PreTokenizer& pre, const std::string& text) {
  std::vector<uint32_t> cpts, lens;
  unicode::decode_utf8(text, cpts);
  pre.split(cpts, lens);
  std::vector<std::string> out;
  size_t at = 0;
  for (uint32_t len : lens) {
    std::string s;
    for (size_t i = at; i < at + len; ++i) unicode::append_utf8(cpts[i], s);
    out.push_back(s);
    at += len;
  }
  return out;
}

}  // namespace

TEST(PreTokenizer, Llama3Pieces) {
  auto pre = PreTokenizer::create(PreKind::kLlama3);
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ(split_pieces(*pre, "Hello world's 12345!!  \n\n  x"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45", "!!", "  \n\n", " ", " x"}));
}

TEST(PreTokenizer, Gpt2Pieces) {
  auto pre = PreTokenizer::create(PreKind::kGpt2);
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ(split_pieces(*pre, "I'm  here\n"),
            (std::vector<std::string>{"I", "'m", " ", " here", "\n"}));
}

TEST(PreTokenizer, KimiK2SeparatesHan) {
  auto pre = PreTokenizer::create(PreKind::kKimiK2);
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ(split_pieces(*pre, "abc\xE4\xBD\xA0\xE5\xA5\xBD" "def it's"),
            (std::vector<std::string>{"abc", "\xE4\xBD\xA0\xE5\xA5\xBD", "def", " it's"}));
}

// llama.cpp's std::wregex sees surrogates (from ill-formed input) as plain
// values inside a range such as AFMoE's U+8C48-U+FAFF; so must we.
TEST(PreTokenizer, SurrogatesFallInsideCodepointRanges) {
  auto pre = PreTokenizer::from_patterns({"[\u8C48-\uFAFF]+"});
  ASSERT_TRUE(pre.ok());
  std::vector<uint32_t> lens;
  pre->split({'a', 0xD800, 0xE000, 'b', 0x10FFFF}, lens);
  EXPECT_EQ(lens, (std::vector<uint32_t>{1, 2, 2}));
}

TEST(PreTokenizer, AsciiCategoryClassesMatchUnicodeData) {
  // Each \p{X} on the collapsed text must accept exactly the ASCII characters
  // whose Unicode category is X.
  const std::pair<const char*, unicode::Category> cats[] = {
      {"\\p{N}", unicode::kNumber}, {"\\p{L}", unicode::kLetter}, {"\\p{P}", unicode::kPunctuation},
      {"\\p{S}", unicode::kSymbol}, {"\\p{M}", unicode::kMark}};
  for (const auto& [pattern, cat] : cats) {
    auto pre = PreTokenizer::from_patterns({pattern});
    ASSERT_TRUE(pre.ok());
    for (uint32_t c = 1; c < 128; ++c) {
      std::vector<uint32_t> lens;
      pre->split({c, c}, lens);  // a match splits "cc" in two; no match keeps one piece
      EXPECT_EQ(lens.size() == 2, unicode::category(c) == cat) << pattern << " char " << c;
    }
  }
}

TEST(Unicode, DecodeLikeLlamaCpp) {
  std::vector<uint32_t> cps;
  unicode::decode_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", cps);
  EXPECT_EQ(cps, (std::vector<uint32_t>{'a', 0xE9, 0x20AC, 0x1F600}));
  cps.clear();
  unicode::decode_utf8("\x80\xC3(\xC0\x80\xED\xA0\x80\xF5\x80\x80\x80", cps);
  // Stray continuation, truncated lead, overlong NUL (accepted), surrogate
  // (accepted), value beyond U+10FFFF (rejected byte by byte).
  EXPECT_EQ(cps, (std::vector<uint32_t>{0xFFFD, 0xFFFD, '(', 0, 0xD800, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));
}

TEST(Unicode, CategoriesAndWhitespace) {
  EXPECT_EQ(unicode::category('a'), unicode::kLetter);
  EXPECT_EQ(unicode::category('7'), unicode::kNumber);
  EXPECT_EQ(unicode::category(0x0301), unicode::kMark);
  EXPECT_EQ(unicode::category(0x20AC), unicode::kSymbol);
  EXPECT_EQ(unicode::category(0x3002), unicode::kPunctuation);
  EXPECT_EQ(unicode::category(0x2EBF0), unicode::kLetter);  // CJK Ext. I (Unicode 15.1)
  EXPECT_EQ(unicode::category(0x0378), unicode::kUndefined);
  EXPECT_TRUE(unicode::is_whitespace(0x3000));
  EXPECT_TRUE(unicode::is_whitespace(0x85));
  EXPECT_FALSE(unicode::is_whitespace(0x200B));
  EXPECT_TRUE(unicode::is_han(0x4E2D));
  EXPECT_FALSE(unicode::is_han(0x3042));
}

TEST(Unicode, StreamingPrefixAndSanitize) {
  EXPECT_EQ(unicode::complete_utf8_prefix("ab\xE4\xBD"), 2u);     // unfinished: held back
  EXPECT_EQ(unicode::complete_utf8_prefix("ab\xE4\xBD\xA0"), 5u);
  EXPECT_EQ(unicode::complete_utf8_prefix("a\xFF"), 2u);          // can never be valid
  EXPECT_EQ(unicode::complete_utf8_prefix("a\xE4" "b"), 3u);
  EXPECT_EQ(unicode::sanitize_utf8("a\xE4" "b\xED\xA0\x80"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(unicode::is_valid_utf8("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(unicode::is_valid_utf8("\xC0\x80"));
  for (int b = 0; b < 256; ++b) {
    std::vector<uint32_t> cps;
    unicode::decode_utf8(unicode::byte_to_symbol(uint8_t(b)), cps);
    ASSERT_EQ(cps.size(), 1u);
    EXPECT_EQ(unicode::symbol_to_byte(cps[0]), b);
  }
}
