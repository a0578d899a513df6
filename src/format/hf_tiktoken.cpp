// tiktoken.model (Kimi K2/K3) <-> GGUF tokens and merges. The file holds one line
// per token, "BASE64(bytes) RANK"; the rank is the token id. Kimi's tokenizer
// (tokenization_kimi.py) places 256 special tokens right after the ranks, named by
// tokenizer_config.json's added_tokens_decoder, the others "<|reserved_token_ID|>".
// As llama.cpp's converter does for such vocabularies: tokens are the bytes in
// GPT-2's byte-level text, every special token is a control token, and the merges
// are rebuilt from the ranks: a token's merge is the last step of byte-pair
// encoding its own bytes with the merges of lower rank (a token that does not
// come out as exactly two parts gets none).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "format/hf_tokenizer_detail.h"

namespace deltafin::hf {
namespace {

constexpr int kKimiReservedSpecials = 256;

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool b64_decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    const int v = b64_value(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      *out += char((acc >> bits) & 0xFF);
    }
  }
  for (; i < in.size(); ++i)
    if (in[i] != '=') return false;
  return !out->empty();
}

std::string b64_encode(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// Byte-pair encoding of `token` using only ranks below `max_rank`: repeatedly
// joins the adjacent pair whose concatenation has the lowest rank (the leftmost
// on a tie). Returns the parts.
std::vector<std::string_view> bpe_parts(const std::unordered_map<std::string_view, int64_t>& ranks,
                                        std::string_view token, int64_t max_rank) {
  std::vector<std::string_view> parts;
  for (size_t i = 0; i < token.size(); ++i) parts.push_back(token.substr(i, 1));
  while (parts.size() > 1) {
    int64_t best = max_rank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const std::string_view pair(parts[i].data(), parts[i].size() + parts[i + 1].size());
      auto it = ranks.find(pair);
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == max_rank) break;
    parts[at] = std::string_view(parts[at].data(), parts[at].size() + parts[at + 1].size());
    parts.erase(parts.begin() + std::ptrdiff_t(at) + 1);
  }
  return parts;
}

}  // namespace

Status tiktoken_to_conversion(const std::string& text, const json& cfg, int64_t vocab_size, Conversion* c) {
  // Ranks in file order.
  std::vector<std::pair<std::string, int64_t>> entries;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    std::string bytes;
    int64_t rank = -1;
    if (sp != std::string_view::npos && b64_decode(line.substr(0, sp), &bytes)) {
      const std::string r(line.substr(sp + 1));
      char* e = nullptr;
      const long long v = std::strtoll(r.c_str(), &e, 10);
      if (!r.empty() && e && *e == '\0' && v >= 0 && v < (1LL << 26)) rank = v;
    }
    if (rank < 0) return make_error("tiktoken.model: line {}: expected \"BASE64 RANK\"", line_no);
    entries.emplace_back(std::move(bytes), rank);
  }
  if (entries.empty()) return make_error("tiktoken.model: no tokens");

  std::unordered_map<std::string_view, int64_t> ranks;
  ranks.reserve(entries.size());
  int64_t max_rank = 0;
  for (const auto& [bytes, rank] : entries) {
    if (!ranks.emplace(bytes, rank).second)
      return make_error("tiktoken.model: token of rank {} appears twice", rank);
    max_rank = std::max(max_rank, rank);
  }

  // Special tokens: the reserved block after the ranks, named by
  // added_tokens_decoder, and any other id that table names.
  const int64_t n_base = max_rank + 1;  // the count of ranks when they have no gaps, as in Kimi's files
  std::map<int64_t, std::string> specials;
  for (int64_t i = n_base; i < n_base + kKimiReservedSpecials; ++i) specials[i] = "<|reserved_token_" + std::to_string(i) + "|>";
  if (cfg.is_object() && cfg.contains("added_tokens_decoder")) {
    const json& d = cfg["added_tokens_decoder"];
    if (!d.is_object()) return make_error("tokenizer_config.json: added_tokens_decoder: expected an object");
    for (const auto& [key, e] : d.items()) {
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id >= (1LL << 26) || !e.is_object() || !e.contains("content") ||
          !e["content"].is_string())
        return make_error("tokenizer_config.json: added_tokens_decoder[\"{}\"]: expected an id and {{\"content\": ...}}",
                          key);
      if (id < n_base) continue;  // a byte-level token of the ranks keeps its bytes
      specials[id] = e["content"].get<std::string>();
    }
  }
  // Without config.json's vocab_size only the named specials count.
  if (vocab_size == 0) {
    for (auto it = specials.begin(); it != specials.end();) {
      if (it->second.rfind("<|reserved_token_", 0) == 0) it = specials.erase(it);
      else ++it;
    }
  }
  int64_t n = std::max(max_rank + 1, vocab_size);
  if (!specials.empty()) n = std::max(n, specials.rbegin()->first + 1);
  if (vocab_size > 0 && n > vocab_size)
    return make_error("tiktoken.model: {} ids (with the special tokens) exceed config.json's vocab_size {}", n,
                      vocab_size);

  c->pre = "kimi-k2";
  c->tokens.assign(size_t(n), std::string());
  c->types.assign(size_t(n), kUnused);
  std::vector<bool> set(size_t(n), false);
  for (const auto& [bytes, rank] : entries) {
    c->tokens[size_t(rank)] = bytes_to_text(bytes);
    c->types[size_t(rank)] = kNormal;
    set[size_t(rank)] = true;
  }
  for (const auto& [id, name] : specials) {
    if (id >= n) continue;
    c->tokens[size_t(id)] = name;
    c->types[size_t(id)] = kControl;
    set[size_t(id)] = true;
    c->added.emplace_back(name, id);
  }
  for (int64_t i = 0; i < n; ++i)
    if (!set[size_t(i)]) c->tokens[size_t(i)] = pad_text(i);

  c->merges.reserve(entries.size());
  for (const auto& [bytes, rank] : entries) {
    if (bytes.size() < 2) continue;
    const auto parts = bpe_parts(ranks, bytes, rank);
    if (parts.size() == 2) c->merges.push_back(bytes_to_text(parts[0]) + " " + bytes_to_text(parts[1]));
  }
  return {};
}

Result<std::string> gguf_to_tiktoken(const GGUFFile& meta, std::vector<std::pair<int64_t, std::string>>* specials) {
  const GGUFValue* toks = meta.find("tokenizer.ggml.tokens");
  const GGUFValue* types = meta.find("tokenizer.ggml.token_type");
  if (!toks || !toks->is_array() || toks->elem_type != GGUFType::STRING)
    return make_error("tokenizer.ggml.tokens: missing or not an array of strings");
  std::string out, bytes;
  for (size_t i = 0; i < toks->strings.size(); ++i) {
    const std::string& t = toks->strings[i];
    const int64_t ty = types && types->is_array() && i < types->ints.size() ? types->ints[i] : kNormal;
    if (ty == kUnused && t == pad_text(int64_t(i))) continue;
    if (ty == kControl || ty == kUserDefined || ty == kUnused) {
      specials->emplace_back(int64_t(i), t);
      continue;
    }
    if (!text_to_bytes(t, &bytes) || bytes.empty())
      return make_error("tokenizer.ggml.tokens[{}] = '{}': not byte-level BPE text; no tiktoken form", i, t);
    out += b64_encode(bytes);
    out += ' ';
    out += std::to_string(i);
    out += '\n';
  }
  return out;
}

}  // namespace deltafin::hf
