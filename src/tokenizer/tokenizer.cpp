#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/string_table.h"
#include "tokenizer/unicode.h"

namespace deltafin {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

void escape_spaces(std::string_view in, std::string& out) {
  for (char c : in) {
    if (c == ' ') {
      out += kSpaceMarker;
    } else {
      out += c;
    }
  }
}

std::string unescape_spaces(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    if (in.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out += ' ';
      i += kSpaceMarker.size();
    } else {
      out += in[i++];
    }
  }
  return out;
}

// C isspace() in the "C" locale.
bool is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// A stretch of the input: raw text [off, off + len) or one special token.
struct Fragment {
  int32_t token;  // kNoToken for text
  uint32_t off, len;
};

// Finds every occurrence of every special token text in a string: a byte trie
// over the texts, entered only at bytes that begin some text.
class SpecialMatcher {
 public:
  void build(const Vocab& v) {
    nodes_.assign(1, -1);
    n_ranks_ = v.special_tokens.size();
    for (size_t rank = 0; rank < v.special_tokens.size(); ++rank) {
      const std::string& text = v.tokens[size_t(v.special_tokens[rank])].text;
      first_byte_[uint8_t(text[0])] = true;
      int32_t node = 0;
      for (char c : text) {
        const uint64_t key = edge_key(node, c);
        auto it = edges_.find(key);
        if (it == edges_.end()) {
          it = edges_.emplace(key, int32_t(nodes_.size())).first;
          nodes_.push_back(-1);
        }
        node = it->second;
      }
      nodes_[size_t(node)] = int32_t(rank);
    }
  }

  // (rank in Vocab::special_tokens, byte offset) of each occurrence, sorted.
  void find_all(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out) const {
    std::vector<std::pair<uint32_t, uint32_t>> found;  // in offset order
    for (size_t p = 0; p < s.size(); ++p) {
      if (!first_byte_[uint8_t(s[p])]) continue;
      int32_t node = 0;
      for (size_t q = p; q < s.size(); ++q) {
        auto it = edges_.find(edge_key(node, s[q]));
        if (it == edges_.end()) break;
        node = it->second;
        if (nodes_[size_t(node)] >= 0) found.emplace_back(uint32_t(nodes_[size_t(node)]), uint32_t(p));
      }
    }
    if (found.empty()) return;
    // Stable counting sort by rank: offsets stay ascending within a rank. (Runs
    // of whitespace tokens, as in GPT-NeoX vocabularies, occur everywhere.)
    std::vector<uint32_t> start(n_ranks_ + 1, 0);
    for (const auto& f : found) ++start[f.first + 1];
    for (size_t r = 1; r < start.size(); ++r) start[r] += start[r - 1];
    out.resize(found.size());
    for (const auto& f : found) out[start[f.first]++] = f;
  }

 private:
  static uint64_t edge_key(int32_t node, char c) { return (uint64_t(uint32_t(node)) << 8) | uint8_t(c); }
  std::vector<int32_t> nodes_;  // per trie node: rank of the text ending there, or -1
  std::unordered_map<uint64_t, int32_t> edges_;
  std::array<bool, 256> first_byte_{};
  size_t n_ranks_ = 0;
};

}  // namespace

// Working memory of one encode() call, reused across its text fragments.
struct EncodeState {
  BpeScratch bpe;
  SpmScratch spm;
  WordCache words;
  std::string buf;
  std::vector<uint32_t> cpts, lengths, ends;
};

struct Tokenizer::Impl {
  std::unique_ptr<Vocab> vocab;  // stable address: the models point into it
  std::optional<BpeModel> bpe;
  std::optional<SpmModel> spm;
  PreTokenizer pre;
  SpecialMatcher specials;
  std::vector<std::string> pieces;  // piece(id, special = true)
  int32_t nl = kNoToken;

  std::string make_piece(int32_t id) const;
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void encode_bpe_text(std::string_view text, std::vector<int32_t>& out, EncodeState& st) const;
};

// llama_token_to_piece for one token, special tokens rendered.
std::string Tokenizer::Impl::make_piece(int32_t id) const {
  const TokenData& t = vocab->tokens[size_t(id)];
  if (t.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t.text;
  if (t.attr & kAttrNormal) {
    if (vocab->type == VocabType::kSpm || vocab->escape_whitespaces) return unescape_spaces(t.text);
    // Byte-level BPE: each stand-in character is one byte.
    std::string out;
    std::vector<uint32_t> cps;
    unicode::decode_utf8(t.text, cps);
    for (uint32_t cp : cps) {
      const int b = unicode::symbol_to_byte(cp);
      if (b >= 0) {
        out += char(b);
        continue;
      }
      // Not a stand-in: llama.cpp's marker, kept for identical output.
      std::string utf8;
      unicode::append_utf8(cp, utf8);
      out += "[UNK_BYTE_0x";
      for (unsigned char c : utf8) out += fmt::format("{:02x}", c);
      out += t.text + "]";
    }
    return out;
  }
  if (t.attr & kAttrByte) {
    // "<0xXX>"
    unsigned v = 0;
    if (t.text.size() >= 5) {
      for (char c : t.text.substr(3, 2)) {
        v <<= 4;
        if (c >= '0' && c <= '9') v |= unsigned(c - '0');
        else if (c >= 'A' && c <= 'F') v |= unsigned(c - 'A' + 10);
        else if (c >= 'a' && c <= 'f') v |= unsigned(c - 'a' + 10);
      }
    }
    return std::string(1, char(v));
  }
  return {};
}

// Splits special tokens out of text, as llama.cpp's tokenizer_st_partition:
// for each special token in order (longest first), every text fragment is cut
// at each non-overlapping occurrence, left to right.
std::vector<Fragment> Tokenizer::Impl::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({kNoToken, 0, uint32_t(text.size())});
  if (vocab->special_tokens.empty()) return frags;

  std::vector<std::pair<uint32_t, uint32_t>> occ;  // (rank, offset), sorted
  specials.find_all(text, occ);
  std::vector<Fragment> next;
  for (size_t g = 0; g < occ.size();) {
    const uint32_t rank = occ[g].first;
    size_t g_end = g;
    while (g_end < occ.size() && occ[g_end].first == rank) ++g_end;
    std::vector<uint32_t> at;
    at.reserve(g_end - g);
    for (size_t k = g; k < g_end; ++k) at.push_back(occ[k].second);
    g = g_end;

    const int32_t id = vocab->special_tokens[rank];
    const TokenData& tok = vocab->tokens[size_t(id)];
    if (!parse_special && (tok.attr & (kAttrControl | kAttrUnknown))) continue;
    const uint32_t len = uint32_t(tok.text.size());

    next.clear();
    auto it = at.begin();  // fragments and occurrences both ascend
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      uint32_t base = f.off;
      const uint32_t end = f.off + f.len;
      while (base < end) {
        while (it != at.end() && *it < base) ++it;
        if (it == at.end() || *it + len > end) {
          next.push_back({kNoToken, base, end - base});
          break;
        }
        const uint32_t m = *it;
        uint32_t left = m - base;
        if (tok.attr & kAttrLstrip)
          while (left > 0 && is_c_space(text[base + left - 1])) --left;
        if (left > 0) next.push_back({kNoToken, base, left});
        next.push_back({id, m, len});
        base = m + len;
        if (tok.attr & kAttrRstrip)
          while (base < end && is_c_space(text[base])) ++base;
      }
    }
    frags.swap(next);
  }
  return frags;
}

// Byte-level BPE over one stretch of text: pre-tokenize into words, merge each.
void Tokenizer::Impl::encode_bpe_text(std::string_view text, std::vector<int32_t>& out, EncodeState& st) const {
  if (vocab->escape_whitespaces) {
    st.buf.clear();
    escape_spaces(text, st.buf);
    text = st.buf;
  }
  st.cpts.clear();
  unicode::decode_utf8(text, st.cpts);
  st.lengths.clear();
  pre.split(st.cpts, st.lengths);

  // Words are re-encoded from the codepoints: ill-formed input has become U+FFFD.
  std::string canon;
  canon.reserve(text.size());
  st.ends.clear();
  size_t cp = 0;
  for (uint32_t len : st.lengths) {
    for (size_t i = cp; i < cp + len; ++i) unicode::append_utf8(st.cpts[i], canon);
    cp += len;
    st.ends.push_back(uint32_t(canon.size()));
  }
  size_t begin = 0;
  for (uint32_t end : st.ends) {
    const std::string_view word(canon.data() + begin, end - begin);
    begin = end;
    if (!st.words.lookup(word, out)) {
      const size_t first = out.size();
      bpe->encode_word(word, out, st.bpe);
      st.words.store(word, out, first);
    }
  }
}

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::from_gguf(const GGUFFile& file) {
  DF_ASSIGN(Vocab v, Vocab::from_gguf(file));
  return from_vocab(std::move(v));
}

Result<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  Tokenizer t;
  t.impl_ = std::make_unique<Impl>();
  Impl& im = *t.impl_;
  im.vocab = std::make_unique<Vocab>(std::move(vocab));
  const Vocab& v = *im.vocab;
  if (v.type == VocabType::kBpe) {
    DF_ASSIGN(im.pre, PreTokenizer::create(v.pre_kind));
    im.bpe = BpeModel::build(v);
  } else {
    im.spm = SpmModel::build(v);
  }
  im.specials.build(v);
  im.pieces.resize(v.tokens.size());
  for (int32_t id = 0; id < v.n_tokens(); ++id) im.pieces[size_t(id)] = im.make_piece(id);

  if (v.type == VocabType::kSpm) {
    im.nl = im.spm->byte_token('\n');
    if (im.nl == kNoToken) im.nl = v.pad;
  } else {
    std::vector<int32_t> ids = t.encode("\n", false, false);
    im.nl = ids.empty() ? v.pad : ids[0];
  }
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& im = *impl_;
  const Vocab& v = *im.vocab;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  const std::vector<Fragment> frags = im.partition(text, parse_special);

  EncodeState st;
  if (add_special && v.add_bos && v.bos != kNoToken) out.push_back(v.bos);
  if (v.type == VocabType::kSpm) {
    std::string& buf = st.buf;
    bool after_special = true;  // the text start counts as "after a special token"
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      buf.clear();
      if (v.add_space_prefix && after_special) buf += kSpaceMarker;
      escape_spaces(text.substr(f.off, f.len), buf);
      im.spm->encode(buf, out, st.spm);
      after_special = false;
    }
  } else {
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
      } else {
        im.encode_bpe_text(text.substr(f.off, f.len), out, st);
      }
    }
  }
  if (add_special && v.add_eos && v.eos != kNoToken) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::piece(int32_t id, bool special) const {
  const Impl& im = *impl_;
  if (!im.vocab->valid(id)) return {};
  if (!special && (im.vocab->attr(id) & (kAttrUnknown | kAttrControl))) return {};
  return im.pieces[size_t(id)];
}

namespace {

// llama_detokenize's clean-up of tokenization spaces, three passes over bytes.
std::string clean_up_spaces(const std::string& s) {
  if (s.empty()) return s;
  auto is_punct = [](char c) { return c == '?' || c == '!' || c == '.' || c == ','; };
  // 1: " ?", " !", " .", " ," lose the space.
  std::string a(1, s[0]);
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i - 1] == ' ' && is_punct(s[i])) a.pop_back();
    a += s[i];
  }
  // 2: " ' " becomes "'". The space after is blanked in place, so it also stops
  // the next character from seeing a space before it.
  std::string b(1, a[0]);
  for (size_t i = 1; i < a.size(); ++i) {
    const char x = a[i];
    if (x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      a[++i] = '\0';
    }
    b += x;
  }
  // 3: " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it).
  std::string c(1, b[0]);
  for (size_t i = 1; i < b.size(); ++i) {
    if (b[i - 1] == ' ' && b[i] == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      if (x1 == 's' || x1 == 'm') {
        c.pop_back();
      } else if (x1 != 't' && x1 != 'd' && i + 2 < b.size()) {
        const char x2 = b[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
      }
    }
    c += b[i];
  }
  return c;
}

}  // namespace

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& opts) const {
  const Vocab& v = *impl_->vocab;
  bool strip_space = v.add_space_prefix;  // undo the SPM space prefix on the first token
  if (opts.remove_special && v.add_bos && !ids.empty() && ids.front() == v.bos) {
    strip_space = false;
    ids = ids.subspan(1);
  }
  if (opts.remove_special && v.add_eos && !ids.empty() && ids.back() == v.eos) ids = ids.first(ids.size() - 1);

  std::string out;
  for (int32_t id : ids) {
    std::string p = piece(id, opts.unparse_special);
    if (strip_space && !p.empty() && p[0] == ' ') p.erase(0, 1);
    strip_space = false;
    out += p;
  }
  if (opts.clean_spaces && v.clean_spaces) out = clean_up_spaces(out);
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab->n_tokens(); }
int32_t Tokenizer::bos() const { return impl_->vocab->bos; }
int32_t Tokenizer::eos() const { return impl_->vocab->eos; }
int32_t Tokenizer::eot() const { return impl_->vocab->eot; }
int32_t Tokenizer::eom() const { return impl_->vocab->eom; }
int32_t Tokenizer::unk() const { return impl_->vocab->unk; }
int32_t Tokenizer::pad() const { return impl_->vocab->pad; }
int32_t Tokenizer::sep() const { return impl_->vocab->sep; }
int32_t Tokenizer::nl() const { return impl_->nl; }
bool Tokenizer::add_bos() const { return impl_->vocab->add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab->add_eos; }
bool Tokenizer::is_eog(int32_t id) const { return id != kNoToken && impl_->vocab->eog.count(id) > 0; }
bool Tokenizer::is_control(int32_t id) const {
  return impl_->vocab->valid(id) && (impl_->vocab->attr(id) & kAttrControl);
}
uint32_t Tokenizer::attr(int32_t id) const { return impl_->vocab->valid(id) ? impl_->vocab->attr(id) : 0; }
const std::string& Tokenizer::text(int32_t id) const {
  static const std::string kEmpty;
  return impl_->vocab->valid(id) ? impl_->vocab->tokens[size_t(id)].text : kEmpty;
}
const Vocab& Tokenizer::vocab() const { return *impl_->vocab; }

std::string StreamDecoder::push(int32_t id) {
  const bool show = special_ || std::find(shown_.begin(), shown_.end(), id) != shown_.end();
  pending_ += tok_->piece(id, show);
  const size_t n = unicode::complete_utf8_prefix(pending_);
  std::string out = unicode::sanitize_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = unicode::sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace deltafin
