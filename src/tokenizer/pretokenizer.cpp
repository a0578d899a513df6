#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <span>

#include "tokenizer/unicode.h"

namespace deltafin {

namespace {

// ---------------------------------------------------------------------------
// The regexes, per kind, as llama.cpp lists them (llama-vocab.cpp). Two entries
// name splitters rather than regexes: "\p{AFMoE_digits}" and the tiny_aya digit
// pattern both mean kDigitGroups; Kimi-K2's "\p{Han}+" means kKimiK2Pattern below.

// Llama 3 (and DBRX, Smaug, ChatGLM4).
constexpr const char* kLlama3[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kJais2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
};
constexpr const char* kDeepseekLlm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
    "\\s+$",
    "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
    "\\p{N}+",
};
// DeepSeek V3 (and Hunyuan-dense, JoyAI, HY-V4).
constexpr const char* kDeepseek3Llm[] = {
    "\\p{N}{1,3}",
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kSpark25[] = {
    "\\p{N}{1,3}",
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}",
};
constexpr const char* kYoutu[] = {
    "[\uAC00-\uD7A3\u3131-\u318E]+|[\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B\uFF0C\u3001-\u303F\uFE30-\uFE4F]+|[\u3105-\u312F]+|[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kDeepseekCoder[] = {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
    "\\p{N}",
};
constexpr const char* kFalcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
};
// StarCoder (and Refact, Command-R, SmolLM, CodeShell, EXAONE, Minerva, Mellum2).
constexpr const char* kStarcoder[] = {
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
// GPT-2 (and MPT, OLMo, JAIS, Trillion, Granite-Docling).
constexpr const char* kGpt2[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
// Qwen2 (and StableLM2, Hunyuan, Solar-Open, Grok-2).
constexpr const char* kQwen2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kQwen35[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
// Poro (and BLOOM, GPT3-Finnish).
constexpr const char* kPoro[] = {
    " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+",
};
constexpr const char* kViking[] = {
    " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+",
    "\\p{N}",
};
constexpr const char* kTekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kChameleon[] = {
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
};
// GPT-4o (and Llama 4, MiniMax-M2).
constexpr const char* kGpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kGraniteEmbMulti[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kTinyAya[] = {
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kKimiK2[] = {
    "\\p{Han}+",
};
constexpr const char* kBailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
};
constexpr const char* kSeedCoder[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kUfakzeka[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kAfmoe[] = {
    "\\p{AFMoE_digits}",
    "[\u4E00-\u9FFF\u3400-\u4DBF\u8C48-\uFAFF\u3040-\u309F\u30A0-\u30FF\uFF65-\uFF9F\u2F00-\u2FDF\u0E40-\u0E7F\u0E80-\u0EFF\u1780-\u17FF\u1000-\u109F\uAA60-\uAA7F\uA9E0-\uA9FF\uAC00-\uD7AF\u1100-\u11FF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kLaguna[] = {
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
constexpr const char* kExaoneMoe[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
};
constexpr const char* kMinicpm5[] = {
    "\\p{N}{1,3}",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
// Used when tokenizer.ggml.pre is missing or "default".
constexpr const char* kDefault[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
};

std::span<const char* const> patterns_for(PreKind kind) {
  switch (kind) {
    case PreKind::kDefault: return kDefault;
    case PreKind::kLlama3: return kLlama3;
    case PreKind::kJais2: return kJais2;
    case PreKind::kDbrx: return kLlama3;
    case PreKind::kDeepseekLlm: return kDeepseekLlm;
    case PreKind::kDeepseek3Llm: return kDeepseek3Llm;
    case PreKind::kSpark25: return kSpark25;
    case PreKind::kYoutu: return kYoutu;
    case PreKind::kDeepseekCoder: return kDeepseekCoder;
    case PreKind::kFalcon: return kFalcon;
    case PreKind::kStarcoder: return kStarcoder;
    case PreKind::kGpt2: return kGpt2;
    case PreKind::kQwen2: return kQwen2;
    case PreKind::kQwen35: return kQwen35;
    case PreKind::kPoro: return kPoro;
    case PreKind::kChatglm4: return kLlama3;
    case PreKind::kViking: return kViking;
    case PreKind::kTekken: return kTekken;
    case PreKind::kChameleon: return kChameleon;
    case PreKind::kGpt4o: return kGpt4o;
    case PreKind::kGraniteEmbMulti: return kGraniteEmbMulti;
    case PreKind::kTinyAya: return kTinyAya;
    case PreKind::kKimiK2: return kKimiK2;
    case PreKind::kBailingmoe: return kBailingmoe;
    case PreKind::kSeedCoder: return kSeedCoder;
    case PreKind::kUfakzeka: return kUfakzeka;
    case PreKind::kGrok2: return kQwen2;
    case PreKind::kAfmoe: return kAfmoe;
    case PreKind::kLaguna: return kLaguna;
    case PreKind::kExaoneMoe: return kExaoneMoe;
    case PreKind::kMinicpm5: return kMinicpm5;
  }
  return {};
}

// llama.cpp's Kimi-K2 splitter as a regex over the collapsed text in which Han
// ideographs get a byte of their own: Han runs; letter runs without Han, with an
// optional leading non-letter/non-digit and an optional English contraction;
// digits in threes; punctuation runs; whitespace as in Llama 3.
constexpr const char* kKimiK2Pattern =
    "\\p{Han}+"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L_not_Han}+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// ---------------------------------------------------------------------------
// Collapsed text: one byte per codepoint. ASCII stays itself; other codepoints
// become a byte naming their class. The class bytes are above 0x7F and so never
// collide with ASCII.
constexpr uint8_t kByteOther = 0xD0;
constexpr uint8_t kByteNumber = 0xD1;
constexpr uint8_t kByteLetter = 0xD2;
constexpr uint8_t kBytePunct = 0xD3;
constexpr uint8_t kByteMark = 0xD4;
constexpr uint8_t kByteSymbol = 0xD5;
constexpr uint8_t kByteHan = 0xD6;  // Kimi-K2 only
constexpr uint8_t kByteSpace = 0x0B;  // non-ASCII whitespace stands in as \v

uint8_t collapse(uint32_t cp, bool han_distinct) {
  if (cp < 0x80) return uint8_t(cp);
  const uint8_t f = unicode::flags(cp);
  if (han_distinct && (f & unicode::kHanBit)) return kByteHan;
  if (f & unicode::kWhitespaceBit) return kByteSpace;
  switch (unicode::Category(f & unicode::kCategoryMask)) {
    case unicode::kNumber: return kByteNumber;
    case unicode::kLetter: return kByteLetter;
    case unicode::kPunctuation: return kBytePunct;
    case unicode::kMark: return kByteMark;
    case unicode::kSymbol: return kByteSymbol;
    default: return kByteOther;
  }
}

// Class contents (without brackets) for \p{..} on the collapsed text: the class
// byte plus the ASCII members of the category. Unknown names give nullptr.
const char* category_class(std::string_view name, bool han_distinct) {
  static constexpr const char* kLetters = "\\xD2A-Za-z";
  static constexpr const char* kLettersHan = "\\xD2\\xD6A-Za-z";
  if (name == "N") return "\\xD10-9";
  if (name == "L" || name == "Lu" || name == "Ll" || name == "Lt" || name == "Lm" || name == "Lo")
    return han_distinct ? kLettersHan : kLetters;
  if (name == "P") return "\\xD3\\x21-\\x23\\x25-\\x2A\\x2C-\\x2F\\x3A\\x3B\\x3F\\x40\\x5B-\\x5D\\x5F\\x7B\\x7D";
  if (name == "M") return "\\xD4";
  if (name == "S") return "\\xD5\\x24\\x2B\\x3C-\\x3E\\x5E\\x60\\x7C\\x7E";
  if (han_distinct && name == "Han") return "\\xD6";
  if (han_distinct && name == "L_not_Han") return kLetters;
  return nullptr;
}

bool uses_categories(std::string_view pattern) {
  for (const char* name : {"\\p{N}", "\\p{L}", "\\p{P}", "\\p{M}", "\\p{S}", "\\p{Lu}", "\\p{Ll}",
                           "\\p{Lt}", "\\p{Lm}", "\\p{Lo}", "\\p{Han}"}) {
    if (pattern.find(name) != std::string_view::npos) return true;
  }
  return false;
}

// PCRE2's UTF mode rejects surrogates, but llama.cpp's std::wregex sees them as
// plain values (and one of its ranges, U+8C48-U+FAFF, spans them). So the
// codepoint view and its patterns move every value from U+D800 up by 0x800:
// order is kept and surrogates become ordinary characters. The top 2048 private
// use codepoints (U+10F800 and above) all land on U+10FFFF; no pattern tells
// them apart.
uint32_t shift_past_surrogates(uint32_t cp) {
  if (cp < 0xD800) return cp;
  return std::min<uint32_t>(cp + 0x800, unicode::kMaxCodepoint);
}

// A llama.cpp-style pattern for the codepoint view: literal non-ASCII
// characters from U+D800 up become \x{..} escapes of their shifted values.
std::string shift_pattern(std::string_view pattern) {
  std::vector<uint32_t> cps;
  unicode::decode_utf8(pattern, cps);
  std::string out;
  for (uint32_t cp : cps) {
    if (cp < 0xD800) {
      unicode::append_utf8(cp, out);
    } else {
      out += fmt::format("\\x{{{:X}}}", shift_past_surrogates(cp));
    }
  }
  return out;
}

enum class View { kCollapsed, kCollapsedHan, kCodepoints };
enum class StageKind { kRegex, kDigitGroups };

// Per-thread PCRE2 match state: match data, a match context and a JIT stack
// large enough for the lookahead-heavy patterns on long words.
struct MatchScratch {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* js = nullptr;
  MatchScratch() {
    md = pcre2_match_data_create(1, nullptr);
    mc = pcre2_match_context_create(nullptr);
    js = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    if (mc && js) pcre2_jit_stack_assign(mc, nullptr, js);
  }
  ~MatchScratch() {
    if (js) pcre2_jit_stack_free(js);
    if (mc) pcre2_match_context_free(mc);
    if (md) pcre2_match_data_free(md);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

// The text of one split() call in the forms the stages need, built on demand.
struct Views {
  const std::vector<uint32_t>& cpts;
  std::string collapsed, collapsed_han, utf8;
  std::vector<uint32_t> cp_to_byte;  // utf8 offset of codepoint i (size n+1)
  std::vector<uint32_t> byte_to_cp;  // codepoint index at a char start (size bytes+1)
  bool have_collapsed = false, have_collapsed_han = false, have_utf8 = false;

  explicit Views(const std::vector<uint32_t>& c) : cpts(c) {}

  const std::string& get_collapsed(bool han) {
    std::string& s = han ? collapsed_han : collapsed;
    bool& have = han ? have_collapsed_han : have_collapsed;
    if (!have) {
      s.resize(cpts.size());
      for (size_t i = 0; i < cpts.size(); ++i) s[i] = char(collapse(cpts[i], han));
      have = true;
    }
    return s;
  }

  void build_utf8() {
    if (have_utf8) return;
    utf8.reserve(cpts.size());
    cp_to_byte.resize(cpts.size() + 1);
    for (size_t i = 0; i < cpts.size(); ++i) {
      cp_to_byte[i] = uint32_t(utf8.size());
      uint32_t cp = cpts[i];
      if (cp >= 0x80 && unicode::is_whitespace(cp)) cp = kByteSpace;
      unicode::append_utf8(shift_past_surrogates(cp), utf8);
    }
    cp_to_byte[cpts.size()] = uint32_t(utf8.size());
    byte_to_cp.assign(utf8.size() + 1, 0);
    for (size_t i = 0; i <= cpts.size(); ++i) byte_to_cp[cp_to_byte[i]] = uint32_t(i);
    have_utf8 = true;
  }
};

}  // namespace

struct PreTokenizer::Stage {
  StageKind kind = StageKind::kRegex;
  View view = View::kCollapsed;
  pcre2_code* code = nullptr;
  bool jit = false;  // JIT-compiled: matched with pcre2_jit_match (no option checks)

  ~Stage() {
    if (code) pcre2_code_free(code);
  }

  // Finds the first match in subject[0, n) at or after `start`; returns false if
  // none. `options` adds PCRE2 match options.
  bool match(const uint8_t* subject, size_t n, size_t start, uint32_t options, size_t* ms,
             size_t* me) const {
    MatchScratch& s = scratch();
    if (view == View::kCodepoints) options |= PCRE2_NO_UTF_CHECK;
    // pcre2_jit_match skips pcre2_match's checks; it cannot anchor at match time.
    int rc = jit && !(options & PCRE2_ANCHORED) ? pcre2_jit_match(code, subject, n, start, options, s.md, s.mc)
                                                : pcre2_match(code, subject, n, start, options, s.md, s.mc);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && rc != PCRE2_ERROR_PARTIAL) {
      // JIT stack exhausted or similar: retry with the interpreter (heap frames).
      rc = pcre2_match(code, subject, n, start, options | PCRE2_NO_JIT, s.md, s.mc);
    }
    // A match that still fails (resource limits) ends the splitting of this
    // piece: the rest of it stays one piece.
    if (rc < 0) return false;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    *ms = ov[0];
    *me = ov[1];
    return true;
  }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::string PreTokenizer::collapsed_pattern(std::string_view pattern, bool han_distinct) {
  if (!uses_categories(pattern)) return {};
  std::string out;
  bool in_class = false;
  size_t class_start = 0;  // index of the first member in the current class
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      if (pattern[i + 1] == 'p' && i + 2 < pattern.size() && pattern[i + 2] == '{') {
        const size_t close = pattern.find('}', i + 3);
        if (close != std::string_view::npos) {
          const char* cls = category_class(pattern.substr(i + 3, close - i - 3), han_distinct);
          if (cls) {
            if (!in_class) out += '[';
            out += cls;
            if (!in_class) out += ']';
            i = close;
            continue;
          }
        }
      }
      out += c;
      out += pattern[++i];
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      class_start = i + 1;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out += '^';
        ++i;
        class_start = i + 1;
      }
      continue;
    }
    if (in_class && c == ']' && i != class_start) in_class = false;
    out += c;
  }
  return out;
}

Result<PreTokenizer> PreTokenizer::from_patterns(const std::vector<std::string>& patterns) {
  PreTokenizer pre;
  for (const std::string& pattern : patterns) {
    auto stage = std::make_unique<Stage>();
    if (pattern == "\\p{AFMoE_digits}" || pattern == "\\d{1,3}(?=(?:\\d{3})*\\b)") {
      stage->kind = StageKind::kDigitGroups;
      pre.stages_.push_back(std::move(stage));
      continue;
    }
    std::string compiled;
    uint32_t options = PCRE2_DOLLAR_ENDONLY;
    if (pattern == "\\p{Han}+") {
      stage->view = View::kCollapsedHan;
      compiled = collapsed_pattern(kKimiK2Pattern, true);
    } else if (uses_categories(pattern)) {
      for (unsigned char ch : pattern) {
        if (ch >= 0x80) {
          return make_error("pre-tokenizer regex mixes Unicode categories and non-ASCII characters: {}",
                            pattern);
        }
      }
      stage->view = View::kCollapsed;
      compiled = collapsed_pattern(pattern, false);
    } else {
      stage->view = View::kCodepoints;
      compiled = shift_pattern(pattern);
      options |= PCRE2_UTF;
    }
    int err = 0;
    PCRE2_SIZE err_off = 0;
    stage->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), options,
                                &err, &err_off, nullptr);
    if (!stage->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return make_error("pre-tokenizer regex does not compile at offset {}: {} (regex: {})", err_off,
                        reinterpret_cast<const char*>(msg), pattern);
    }
    // The interpreter remains if JIT is unavailable.
    stage->jit = pcre2_jit_compile(stage->code, PCRE2_JIT_COMPLETE) == 0;
    pre.stages_.push_back(std::move(stage));
  }
  return pre;
}

Result<PreTokenizer> PreTokenizer::create(PreKind kind) {
  std::vector<std::string> patterns;
  for (const char* p : patterns_for(kind)) patterns.emplace_back(p);
  return from_patterns(patterns);
}

namespace {

// Digit grouping (AFMoE, tiny_aya): a run of N digits is cut so that the groups
// after the first have 3 digits; the first group (N mod 3 digits, or 3) also
// carries any non-digit text before it in the piece, as llama.cpp's splitter does.
void split_digit_groups(const std::vector<uint32_t>& cpts, const std::vector<uint32_t>& in,
                        std::vector<uint32_t>& out) {
  size_t start = 0;
  for (uint32_t len : in) {
    const size_t end = start + len;
    size_t prev = start;
    auto emit = [&](size_t to) {
      if (to > prev) out.push_back(uint32_t(to - prev));
      prev = to;
    };
    size_t pos = start;
    while (pos < end) {
      if (unicode::category(cpts[pos]) != unicode::kNumber) {
        ++pos;
        continue;
      }
      const size_t run = pos;
      while (pos < end && unicode::category(cpts[pos]) == unicode::kNumber) ++pos;
      size_t cur = run;
      const size_t rem = (pos - run) % 3;
      if (rem) emit(cur += rem);
      while (cur < pos) emit(cur += 3);
    }
    emit(end);
    start = end;
  }
}

}  // namespace

void PreTokenizer::split(const std::vector<uint32_t>& cpts, std::vector<uint32_t>& lengths) const {
  if (cpts.empty()) return;
  std::vector<uint32_t> cur{uint32_t(cpts.size())}, next;
  Views views(cpts);

  for (const auto& stage : stages_) {
    next.clear();
    next.reserve(cur.size() * 2);
    if (stage->kind == StageKind::kDigitGroups) {
      split_digit_groups(cpts, cur, next);
      cur.swap(next);
      continue;
    }

    const bool bytes_are_cps = stage->view != View::kCodepoints;
    const uint8_t* text;
    if (bytes_are_cps) {
      text = reinterpret_cast<const uint8_t*>(views.get_collapsed(stage->view == View::kCollapsedHan).data());
    } else {
      views.build_utf8();
      text = reinterpret_cast<const uint8_t*>(views.utf8.data());
    }
    // Offsets inside a piece are code units of the view; convert to codepoints.
    auto to_cp = [&](size_t base_unit, size_t unit) -> size_t {
      return bytes_are_cps ? base_unit + unit : views.byte_to_cp[base_unit + unit];
    };

    size_t piece_cp = 0;
    for (uint32_t len : cur) {
      const size_t base = bytes_are_cps ? piece_cp : views.cp_to_byte[piece_cp];
      const size_t n = bytes_are_cps ? len : views.cp_to_byte[piece_cp + len] - base;
      const uint8_t* subject = text + base;
      size_t prev_cp = piece_cp;  // end of what has been emitted, as a codepoint index
      auto emit_to = [&](size_t cp) {
        if (cp > prev_cp) next.push_back(uint32_t(cp - prev_cp));
        prev_cp = cp;
      };
      size_t pos = 0;
      while (pos <= n) {
        size_t ms, me;
        if (!stage->match(subject, n, pos, 0, &ms, &me)) break;
        if (me == ms) {
          // An empty match only marks a boundary; then, as std::regex_iterator
          // does, look for a non-empty match at the same place before moving on.
          emit_to(to_cp(base, ms));
          if (stage->match(subject, n, ms, PCRE2_ANCHORED | PCRE2_NOTEMPTY_ATSTART, &ms, &me) && me > ms) {
            emit_to(to_cp(base, me));
            pos = me;
            continue;
          }
          if (ms >= n) break;
          pos = ms + (bytes_are_cps ? 1 : unicode::utf8_len(subject[ms]));
          continue;
        }
        emit_to(to_cp(base, ms));
        emit_to(to_cp(base, me));
        pos = me;
      }
      emit_to(piece_cp + len);
      piece_cp += len;
    }
    cur.swap(next);
  }
  lengths.insert(lengths.end(), cur.begin(), cur.end());
}

}  // namespace deltafin
