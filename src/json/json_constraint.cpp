#include "json/json_constraint.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace deltafin {

namespace {

// String lexer states (Lex::sub while Mode::String).
enum : uint8_t {
  kPlain = 0,     // between characters
  kEscape = 1,    // after '\'
  kHex = 2,       // kHex + k: expecting the \u escape's digit k (0..3)
  kUtf8 = 6,      // inside a multi-byte UTF-8 character
  kLowSlash = 7,  // a high surrogate's escape ended: '\' must follow
  kLowU = 8,      // then 'u'
};

// Number grammar states (Lex::sub while Mode::Number); * accepting.
enum : uint8_t { kMinus = 1, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigit };
bool accepting(uint8_t s) { return s == kZero || s == kInt || s == kFrac || s == kExpDigit; }

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The span of `spans` (sorted) that starts at byte `at`, if any.
const JsonSpan* span_at(const std::vector<JsonSpan>& spans, uint32_t at) {
  for (const JsonSpan& t : spans)
    if (t.at >= at) return t.at == at ? &t : nullptr;
  return nullptr;
}

// The ending's bytes matched after one more byte c, given k matched (a KMP step).
uint32_t ending_step(const JsonPart& p, uint32_t k, uint8_t c) {
  for (;;) {
    if (k < p.text.size() && uint8_t(p.text[k]) == c) return k + 1;
    if (k == 0) return 0;
    k = p.border[k];
  }
}

}  // namespace

JsonState::JsonState(const JsonGrammar& g) : g_(&g) { choose(&g.starts(), false); }

void JsonState::choose(const std::vector<uint32_t>* cands, bool end_ok) {
  cands_ = cands;
  end_ok_ = end_ok;
  off_ = 0;
  cur_ = nullptr;
  var_ = kNoVariant;
  const size_t n = cands->size();
  alive_ = Alive{};
  for (size_t i = 0; i < n; ++i) alive_.set(i);
  if (n == 1 && !end_ok) {  // no choice: straight in
    var_ = (*cands)[0];
    enter(0);
  }
}

const JsonPart& JsonState::first_part(size_t i) const { return g_->variant((*cands_)[i]).parts[0]; }

bool JsonState::Alive::any() const {
  return std::any_of(w.begin(), w.end(), [](uint64_t x) { return x != 0; });
}

int JsonState::Alive::count() const {
  int n = 0;
  for (uint64_t x : w) n += std::popcount(x);
  return n;
}

size_t JsonState::Alive::first() const {
  for (size_t k = 0; k < w.size(); ++k)
    if (w[k]) return k * 64 + size_t(std::countr_zero(w[k]));
  return w.size() * 64;
}

const std::vector<JsonPart>& JsonState::parts() const { return g_->variant(var_).parts; }

void JsonState::enter(uint32_t p) {
  const JsonVariant& v = g_->variant(var_);
  const std::vector<JsonPart>& ps = v.parts;
  while (p < ps.size() && ps[p].kind == JsonPart::Kind::Literal && ps[p].text.empty()) ++p;
  if (p == ps.size() && !v.next.empty()) {
    choose(&v.next, v.end);
    return;
  }
  part_ = p;
  cur_ = p < ps.size() ? &ps[p] : nullptr;
  off_ = 0;
  x_ = Lex{};
  depth_ = 0;
}

bool JsonState::prefix_byte(uint8_t c) {
  Alive keep;
  alive_.each([&](size_t i) {
    const JsonPart& p = first_part(i);
    if (off_ < p.text.size() && uint8_t(p.text[off_]) == c && !span_at(p.tokens, off_)) keep.set(i);
  });
  if (!keep.any()) return false;
  alive_ = keep;
  ++off_;
  settle();
  return true;
}

// One candidate left: from here it is read alone (its first part, off_ bytes in).
void JsonState::settle() {
  if (alive_.count() != 1) return;
  var_ = (*cands_)[alive_.first()];
  part_ = 0;
  cur_ = &parts()[0];
  if (off_ == cur_->text.size()) enter(1);
}

const JsonPart* JsonState::literal_now(uint32_t* off) const {
  const std::vector<JsonPart>& ps = parts();
  if (part_ >= ps.size()) return nullptr;
  if (ps[part_].kind == JsonPart::Kind::Literal) return *off = off_, &ps[part_];
  if (ps[part_].kind == JsonPart::Kind::Json && x_.mode == Mode::Done && part_ + 1 < ps.size())
    return *off = 0, &ps[part_ + 1];
  return nullptr;
}

void JsonState::forced_tokens(std::vector<int32_t>* ids) const {
  if (var_ == kNoVariant) {
    alive_.each([&](size_t i) {
      if (const JsonSpan* t = span_at(first_part(i).tokens, off_))
        if (std::find(ids->begin(), ids->end(), t->id) == ids->end()) ids->push_back(t->id);
    });
    return;
  }
  uint32_t off = 0;
  if (const JsonPart* p = literal_now(&off))
    if (const JsonSpan* t = span_at(p->tokens, off)) ids->push_back(t->id);
}

bool JsonState::take_token(int32_t id) {
  if (var_ == kNoVariant) {
    Alive keep;
    uint32_t len = 0;
    alive_.each([&](size_t i) {
      const JsonSpan* t = span_at(first_part(i).tokens, off_);
      if (t && t->id == id) keep.set(i), len = t->len;
    });
    if (!keep.any()) return false;
    alive_ = keep;
    off_ += len;
    settle();
    return true;
  }
  uint32_t off = 0;
  const JsonPart* p = literal_now(&off);
  const JsonSpan* t = p ? span_at(p->tokens, off) : nullptr;
  if (!t || t->id != id) return false;
  if (parts()[part_].kind == JsonPart::Kind::Json) enter(part_ + 1);
  off_ += t->len;
  if (off_ == p->text.size()) enter(part_ + 1);
  return true;
}

std::string JsonState::literal_ahead(std::vector<JsonSpan>* spans) const {
  uint32_t off = 0;
  const JsonPart* p = var_ == kNoVariant ? nullptr : literal_now(&off);
  if (!p || off >= p->text.size()) return {};
  for (const JsonSpan& t : p->tokens)
    if (t.at >= off) spans->push_back(JsonSpan{t.at - off, t.len, t.id});
  return p->text.substr(off);
}

bool JsonState::in_text(uint8_t* last) const {
  if (var_ == kNoVariant || part_ >= parts().size()) return false;
  const JsonPart& p = parts()[part_];
  if (p.kind != JsonPart::Kind::Text) return false;
  *last = uint8_t(p.text.back());
  return true;
}

void JsonState::assign(const JsonState& o) {
  g_ = o.g_;
  part_ = o.part_;
  cur_ = o.cur_;
  off_ = o.off_;
  alive_ = o.alive_;
  var_ = o.var_;
  cands_ = o.cands_;
  end_ok_ = o.end_ok_;
  depth_ = o.depth_;
  x_ = o.x_;
  std::copy_n(o.stack_.begin(), depth_, stack_.begin());
}

bool JsonState::complete() const {
  if (var_ == kNoVariant) return off_ == 0 && end_ok_;  // between segments, none begun
  const std::vector<JsonPart>& ps = parts();
  if (part_ >= ps.size()) return true;
  if (part_ + 1 < ps.size() || ps[part_].kind != JsonPart::Kind::Json) return false;
  if (x_.mode == Mode::Done) return true;
  if (depth_ != 0) return false;
  if (x_.mode == Mode::Number) return accepting(x_.sub);
  if (x_.mode == Mode::Literal)
    for (uint64_t m = x_.lit_mask; m; m &= m - 1)
      if (lit_text(uint32_t(std::countr_zero(m))).size() == x_.lit_pos) return true;
  return false;
}

bool JsonState::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(uint8_t(c))) return false;
  return true;
}

// The value of a Json part ended: c belongs to the next part.
bool JsonState::after_value(uint8_t c) {
  if (part_ + 1 >= parts().size()) return false;  // nothing, not even whitespace, follows the document
  enter(part_ + 1);
  return feed(c);
}

bool JsonState::feed(uint8_t c) {
  if (!cur_) return var_ == kNoVariant ? prefix_byte(c) : false;
  const JsonPart& p = *cur_;
  if (p.kind == JsonPart::Kind::Json) return json_byte(c);
  if (p.kind == JsonPart::Kind::Literal) {
    if (off_ >= p.text.size() || uint8_t(p.text[off_]) != c || span_at(p.tokens, off_)) return false;
    if (++off_ == p.text.size()) enter(part_ + 1);
    return true;
  }
  if (p.kind == JsonPart::Kind::Text) {
    off_ = ending_step(p, off_, c);
    if (off_ == p.text.size()) enter(part_ + 1);
    return true;
  }
  return false;
}

bool JsonState::json_byte(uint8_t c) {
  for (;;) {
    bool ended = false;
    switch (x_.mode) {
      case Mode::Done: return after_value(c);
      case Mode::String: return string_byte(c);
      case Mode::None: return structural(c);
      case Mode::Number:
        if (!number_byte(c, &ended)) return false;
        if (!ended) return true;
        x_.mode = Mode::None;
        value_done();
        continue;  // c follows the number
      case Mode::Literal: {
        uint32_t which = 0;
        if (!literal_byte(c, &ended, &which)) return false;
        if (!ended) return true;
        x_.mode = Mode::None;
        if (x_.is_key) {
          Frame& f = stack_[size_t(depth_ - 1)];
          f.key = uint16_t(which);
          f.count = which + 1;  // declared properties come in order
          f.phase = Colon;
          x_.is_key = false;
        } else {
          value_done();
        }
        continue;  // c follows the literal
      }
    }
  }
}

const std::string& JsonState::lit_text(uint32_t i) const {
  const JsonNode& n = g_->node(x_.lit_node);
  return x_.is_key ? n.props[i].key : n.literals[i];
}

uint64_t JsonState::key_mask(const Frame& f) const {
  const JsonNode& n = g_->node(f.node);
  uint64_t m = 0;
  if (f.count >= n.props.size()) return 0;
  const uint32_t last = std::min<uint32_t>(n.first_required[f.count], uint32_t(n.props.size() - 1));
  for (uint32_t i = f.count; i <= last; ++i) m |= uint64_t(1) << i;
  return m;
}

bool JsonState::push(uint32_t node, bool object) {
  if (depth_ >= kMaxDepth) return false;
  Frame& f = stack_[size_t(depth_++)];
  f = Frame{};
  f.node = node;
  f.object = object;
  f.phase = object ? KeyOrEnd : ValueOrEnd;
  return true;
}

void JsonState::value_done() {
  if (depth_ == 0) {
    x_.mode = Mode::Done;
    return;
  }
  Frame& f = stack_[size_t(depth_ - 1)];
  if (!f.object) ++f.count;
  f.phase = CommaOrEnd;
}

bool JsonState::start_value(uint32_t node, uint8_t c) {
  const JsonNode& n = g_->node(node);
  switch (n.kind) {
    case JsonNode::Kind::AnyOf: {
      const uint32_t alt = n.dispatch[c];
      return alt != JsonGrammar::kNoNode && start_value(alt, c);
    }
    case JsonNode::Kind::Object: return c == '{' && push(node, true);
    case JsonNode::Kind::Array: return c == '[' && push(node, false);
    case JsonNode::Kind::String:
      if (c != '"') return false;
      x_.mode = Mode::String;
      x_.sub = kPlain;
      x_.is_key = false;
      return true;
    case JsonNode::Kind::Number:
    case JsonNode::Kind::Integer:
      if (c == '-') x_.sub = kMinus;
      else if (c == '0') x_.sub = kZero;
      else if (is_digit(c)) x_.sub = kInt;
      else return false;
      x_.mode = Mode::Number;
      x_.integer = n.kind == JsonNode::Kind::Integer;
      x_.num_len = 1;
      return true;
    case JsonNode::Kind::Literal: {
      uint64_t m = 0;
      for (size_t i = 0; i < n.literals.size(); ++i)
        if (uint8_t(n.literals[i][0]) == c) m |= uint64_t(1) << i;
      if (!m) return false;
      x_.mode = Mode::Literal;
      x_.is_key = false;
      x_.lit_node = node;
      x_.lit_mask = m;
      x_.lit_pos = 1;
      return true;
    }
  }
  return false;
}

bool JsonState::structural(uint8_t c) {
  if (is_ws(c)) return !(depth_ == 0 && cur_->bare) && ++x_.ws <= kMaxWhitespace;
  x_.ws = 0;
  if (depth_ == 0) return start_value(cur_->root, c);
  Frame& f = stack_[size_t(depth_ - 1)];
  const JsonNode& n = g_->node(f.node);
  auto close = [&] {
    --depth_;
    value_done();
    return true;
  };
  if (f.object) {
    const bool can_end = n.free || n.first_required[f.count] == n.props.size();
    auto start_key = [&] {
      if (n.free) {
        x_.mode = Mode::String;
        x_.sub = kPlain;
        x_.is_key = true;
        return true;
      }
      const uint64_t m = key_mask(f);
      if (!m) return false;
      x_.mode = Mode::Literal;  // every key begins with the '"' just read
      x_.is_key = true;
      x_.lit_node = f.node;
      x_.lit_mask = m;
      x_.lit_pos = 1;
      return true;
    };
    switch (f.phase) {
      case KeyOrEnd:
        if (c == '}') return can_end && close();
        return c == '"' && start_key();
      case Key: return c == '"' && start_key();
      case Colon:
        if (c != ':') return false;
        f.phase = Value;
        return true;
      case Value: return start_value(n.free ? n.any : n.props[f.key].node, c);
      case CommaOrEnd:
        if (c == '}') return can_end && close();
        if (c != ',' || !(n.free || f.count < n.props.size())) return false;
        f.phase = Key;
        return true;
      default: return false;
    }
  }
  switch (f.phase) {
    case ValueOrEnd:
      if (c == ']') return f.count >= n.min_items && close();
      return f.count < n.max_items && start_value(n.items, c);
    case Value: return start_value(n.items, c);
    case CommaOrEnd:
      if (c == ']') return f.count >= n.min_items && close();
      if (c != ',' || f.count >= n.max_items) return false;
      f.phase = Value;
      return true;
    default: return false;
  }
}

bool JsonState::string_byte(uint8_t c) {
  switch (x_.sub) {
    case kPlain:
      if (c == '"') {
        x_.mode = Mode::None;
        if (x_.is_key) {
          stack_[size_t(depth_ - 1)].phase = Colon;
          x_.is_key = false;
        } else {
          value_done();
        }
        return true;
      }
      if (c == '\\') {
        x_.sub = kEscape;
        return true;
      }
      if (c < 0x20) return false;
      if (c < 0x80) return true;
      // A UTF-8 lead byte and the range of its first continuation byte (no overlong
      // forms, no surrogates, nothing above U+10FFFF).
      x_.lo = 0x80, x_.hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) x_.need = 1;
      else if (c == 0xE0) x_.need = 2, x_.lo = 0xA0;
      else if (c == 0xED) x_.need = 2, x_.hi = 0x9F;
      else if (c >= 0xE1 && c <= 0xEF) x_.need = 2;
      else if (c == 0xF0) x_.need = 3, x_.lo = 0x90;
      else if (c >= 0xF1 && c <= 0xF3) x_.need = 3;
      else if (c == 0xF4) x_.need = 3, x_.hi = 0x8F;
      else return false;
      x_.sub = kUtf8;
      return true;
    case kUtf8:
      if (c < x_.lo || c > x_.hi) return false;
      x_.lo = 0x80, x_.hi = 0xBF;
      if (--x_.need == 0) x_.sub = kPlain;
      return true;
    case kEscape:
      if (c == 'u') {
        x_.sub = kHex;
        x_.hex = 0;
        return true;
      }
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't') return false;
      x_.sub = kPlain;
      return true;
    case kLowSlash:
      if (c != '\\') return false;
      x_.sub = kLowU;
      return true;
    case kLowU:
      if (c != 'u') return false;
      x_.sub = kHex;
      x_.hex = 0;
      return true;
    default: {  // kHex + k
      const int k = x_.sub - kHex;
      const int v = hex_value(c);
      if (v < 0) return false;
      if (x_.want_low) {
        // DC00..DFFF: 'D', then 'C'..'F'.
        if ((k == 0 && v != 0xD) || (k == 1 && v < 0xC)) return false;
      } else if (k == 1 && x_.hex == 0xD && v >= 0xC) {
        return false;  // a low surrogate with no high one before it
      }
      x_.hex = uint16_t(x_.hex * 16 + v);
      if (k < 3) {
        ++x_.sub;
        return true;
      }
      if (x_.want_low) {
        x_.want_low = false;
        x_.sub = kPlain;
      } else if (x_.hex >= 0xD800 && x_.hex <= 0xDBFF) {
        x_.want_low = true;
        x_.sub = kLowSlash;
      } else {
        x_.sub = kPlain;
      }
      return true;
    }
  }
}

// One byte of a number; *ended: c does not continue it and the number is whole (c is
// then the caller's to read). Within kMaxNumberBytes a state that is not accepting
// always keeps room for the byte that completes it.
bool JsonState::number_byte(uint8_t c, bool* ended) {
  const bool dig = is_digit(c), exp = (c == 'e' || c == 'E') && !x_.integer;
  uint8_t next = 0;
  switch (x_.sub) {
    case kMinus: next = c == '0' ? kZero : dig ? kInt : 0; break;
    case kZero: next = c == '.' && !x_.integer ? kDot : exp ? kExp : 0; break;
    case kInt: next = dig ? kInt : c == '.' && !x_.integer ? kDot : exp ? kExp : 0; break;
    case kDot: next = dig ? kFrac : 0; break;
    case kFrac: next = dig ? kFrac : exp ? kExp : 0; break;
    case kExp: next = dig ? kExpDigit : (c == '+' || c == '-') ? kExpSign : 0; break;
    case kExpSign:
    case kExpDigit: next = dig ? kExpDigit : 0; break;
  }
  if (!next) {
    *ended = accepting(x_.sub);
    return *ended;
  }
  const int room = accepting(next) ? kMaxNumberBytes : kMaxNumberBytes - 1;
  if (x_.num_len + 1 > room) return false;
  ++x_.num_len;
  x_.sub = next;
  return true;
}

// One byte of a literal (or a declared key); *ended: c continues no candidate and
// candidate *which is whole (c is then the caller's to read).
bool JsonState::literal_byte(uint8_t c, bool* ended, uint32_t* which) {
  uint64_t next = 0;
  for (uint64_t m = x_.lit_mask; m; m &= m - 1) {
    const uint32_t i = uint32_t(std::countr_zero(m));
    const std::string& t = lit_text(i);
    if (t.size() > x_.lit_pos && uint8_t(t[x_.lit_pos]) == c) next |= uint64_t(1) << i;
  }
  if (next) {
    x_.lit_mask = next;
    ++x_.lit_pos;
    return true;
  }
  for (uint64_t m = x_.lit_mask; m; m &= m - 1) {
    const uint32_t i = uint32_t(std::countr_zero(m));
    if (lit_text(i).size() == x_.lit_pos) {
      *ended = true;
      *which = i;
      return true;
    }
  }
  return false;
}

// --- the vocabulary -----------------------------------------------------------

JsonTokenTable::JsonTokenTable(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  bytes_.resize(size_t(n));
  plain_.assign(size_t(n), 0);
  // A token is plain when it keeps a free string between characters: fed after '"'.
  static const JsonGrammar string_only = JsonGrammar::from_schema({{"type", "string"}}).value();
  JsonState in_string(string_only);
  in_string.feed('"');
  JsonState t(string_only);
  for (int32_t id = 0; id < n; ++id) {
    bytes_[size_t(id)] = tok.piece(id, false);
    const std::string& b = bytes_[size_t(id)];
    if (tok.is_eog(id)) {
      eog_.push_back(id);
      continue;
    }
    if (b.empty()) continue;
    order_.push_back(id);
    t.assign(in_string);
    plain_[size_t(id)] = t.feed(b) && t.in_free_string();
  }
  std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  lcp_.assign(order_.size(), 0);
  for (size_t i = 1; i < order_.size(); ++i) {
    const std::string& a = bytes_[size_t(order_[i - 1])];
    const std::string& b = bytes_[size_t(order_[i])];
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_[i] = uint16_t(std::min<size_t>(k, UINT16_MAX));
  }
}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const JsonTokenTable> table)
    : grammar_(std::move(grammar)), table_(std::move(table)), state_(*grammar_) {}

bool JsonConstraint::allows(int32_t id) const {
  const JsonTokenTable& t = *table_;
  if (id < 0 || id >= t.n_vocab()) return false;
  if (std::find(t.eog_.begin(), t.eog_.end(), id) != t.eog_.end()) return state_.complete();
  JsonState s(*grammar_);
  s.assign(state_);
  if (s.take_token(id)) return true;
  const std::string& b = t.bytes_[size_t(id)];
  return !b.empty() && s.feed(b);
}

bool JsonConstraint::mask(float* logits, int64_t n_vocab) const {
  const JsonTokenTable& t = *table_;
  std::vector<uint8_t> ok(size_t(t.n_vocab()), 0);
  size_t n_ok = 0;
  const bool fast = state_.in_free_string();
  uint8_t ending = 0;
  const bool text = state_.in_text(&ending);  // free text: tokens without its ending's last byte stay in it
  JsonState trial(*grammar_);
  // Tokens in byte order: one that shares the bytes up to where the previous one
  // failed fails there too (a whole first-byte bucket costs one feed when that byte
  // cannot come).
  int fail_at = -1;
  for (size_t i = 0; i < t.order_.size(); ++i) {
    const int32_t id = t.order_[i];
    if (fail_at >= 0 && t.lcp_[i] > fail_at) continue;
    const std::string& b = t.bytes_[size_t(id)];
    if ((fast && t.plain_[size_t(id)]) || (text && b.find(char(ending)) == std::string::npos)) {
      ok[size_t(id)] = 1, ++n_ok, fail_at = -1;
      continue;
    }
    trial.assign(state_);
    size_t k = 0;
    while (k < b.size() && trial.feed(uint8_t(b[k]))) ++k;
    if (k == b.size()) ok[size_t(id)] = 1, ++n_ok, fail_at = -1;
    else fail_at = int(k);
  }
  if (state_.complete())
    for (int32_t id : t.eog_) ok[size_t(id)] = 1, ++n_ok;
  std::vector<int32_t> whole;
  state_.forced_tokens(&whole);
  for (int32_t id : whole)
    if (id >= 0 && id < t.n_vocab()) ok[size_t(id)] = 1, ++n_ok;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t id = 0; id < n_vocab; ++id)
    if (id >= t.n_vocab() || !ok[size_t(id)]) logits[id] = kNegInf;
  return n_ok > 0;
}

std::vector<int32_t> JsonConstraint::tokens_ahead(const Tokenizer& tok, int max_n) const {
  std::vector<JsonSpan> spans;
  const std::string text = state_.literal_ahead(&spans);
  std::vector<int32_t> out;
  uint32_t at = 0;
  auto plain = [&](uint32_t end) {  // text between markers, as the tokenizer spells it
    if (end > at)
      for (int32_t id : tok.encode(text.substr(at, end - at), false, false)) out.push_back(id);
  };
  for (const JsonSpan& t : spans) {
    plain(t.at);
    out.push_back(t.id);
    at = t.at + t.len;
  }
  plain(uint32_t(text.size()));
  if (int(out.size()) > max_n) out.resize(size_t(std::max(0, max_n)));
  return out;
}

bool JsonConstraint::advance(int32_t id) {
  const JsonTokenTable& t = *table_;
  if (id < 0 || id >= t.n_vocab()) return false;
  if (state_.take_token(id)) return true;
  const std::string& b = t.bytes_[size_t(id)];
  return !b.empty() && state_.feed(b);
}

}  // namespace deltafin
