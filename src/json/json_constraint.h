// Constrained sampling for structured output (response_format json_object and
// json_schema): a byte-level pushdown recognizer for JSON (RFC 8259) following a
// JsonGrammar, and the per-step token mask built on it.
//
//   JsonState         where a document is, byte by byte; copyable. feed(c) is true iff
//                     the bytes so far plus c are a prefix of some document the grammar
//                     allows (every accepted prefix can still be completed).
//   JsonTokenTable    a vocabulary's tokens as the bytes the detokenizer emits for them
//                     (Tokenizer::piece(id, false)), sorted for the mask; built once per
//                     tokenizer and shared by every request (immutable, thread-safe).
//   JsonConstraint    one request's document: mask() sets the logits of every token that
//                     cannot continue it to -inf (end-of-generation tokens are allowed
//                     only once the document is complete, and then only they are), and
//                     advance() takes the token that was emitted.
//
// Beyond RFC 8259, to keep a model from running on forever: documents nest at most
// kMaxDepth containers, a run of whitespace is at most kMaxWhitespace bytes, a number
// is at most kMaxNumberBytes bytes, and nothing (not even whitespace) follows the
// top-level value. Strings must be valid UTF-8, and a \u escape of a surrogate must be
// half of a pair (as strict parsers such as nlohmann::json demand).
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json/json_grammar.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

class JsonState {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxWhitespace = 32;
  static constexpr int kMaxNumberBytes = 32;

  // `g` must outlive the state (and its copies).
  explicit JsonState(const JsonGrammar& g);

  // Takes one byte; false when no allowed document continues with it, and then the
  // state is unspecified (try bytes on a copy).
  bool feed(uint8_t c);
  bool feed(std::string_view bytes);
  // The bytes so far are a whole document (and the grammar's suffix): the generation
  // may end here.
  bool complete() const;
  // Where the literal text around the document has a JsonSpan here (a token that must
  // come whole, which feed() refuses to spell): appends the tokens it may be.
  void forced_tokens(std::vector<int32_t>* ids) const;
  // Takes such a token; false (and no change) when none is expected here.
  bool take_token(int32_t id);
  // The rest of the literal text that must come next (a call's closing tags), and the
  // spans in it that must come as single tokens (positions from its start); empty
  // where the next bytes are not certain.
  std::string literal_ahead(std::vector<JsonSpan>* spans) const;
  // In free text (JsonPart::Text): any bytes without its ending's last byte, *last,
  // keep it there (the ending cannot be completed without it).
  bool in_text(uint8_t* last) const;
  // Between characters of a string whose content is free (no enum, not a declared
  // key): any run of characters other than '"', '\\' and control bytes that is whole
  // UTF-8 keeps it there.
  bool in_free_string() const { return x_.mode == Mode::String && x_.sub == 0; }
  // Copies `o` (same grammar), only the containers it has open: cheaper than `=`.
  void assign(const JsonState& o);

 private:
  enum class Mode : uint8_t { None, String, Number, Literal, Done };
  enum Phase : uint8_t { KeyOrEnd, Key, Colon, Value, CommaOrEnd, ValueOrEnd };
  // An open object or array.
  struct Frame {
    uint32_t node = 0;
    uint32_t count = 0;  // array: items so far; object: the next declared property that may come
    uint16_t key = 0;    // object: the declared property whose value is being read
    Phase phase = KeyOrEnd;
    bool object = false;
  };

  static constexpr uint32_t kNoVariant = UINT32_MAX;
  // Opens a choice between the segments `cands` (and the end, where end_ok).
  void choose(const std::vector<uint32_t>* cands, bool end_ok);
  const JsonPart& first_part(size_t i) const;  // of candidate i of cands_
  bool prefix_byte(uint8_t c);  // several candidates still match their first part
  void settle();                // one is left
  const std::vector<JsonPart>& parts() const;  // the segment's
  void enter(uint32_t p);       // starts part p (skipping empty text; p = size: its successors)
  bool after_value(uint8_t c);  // a Json part's value ended before c
  bool json_byte(uint8_t c);    // in a Json part
  // The literal text the next byte goes to (the current part, or the one after a
  // finished value) and where in it; null when none.
  const JsonPart* literal_now(uint32_t* off) const;

  bool structural(uint8_t c);
  bool start_value(uint32_t node, uint8_t c);
  bool string_byte(uint8_t c);
  bool number_byte(uint8_t c, bool* ended);
  bool literal_byte(uint8_t c, bool* ended, uint32_t* which);
  // The value at the top ended: the enclosing container expects what follows it.
  void value_done();
  bool push(uint32_t node, bool object);
  // A declared key's candidates (props count .. first required) as a mask.
  uint64_t key_mask(const Frame& f) const;
  const std::string& lit_text(uint32_t i) const;  // candidate i of the current Literal

  // The lexer's state: what the value at the top of the stack has read so far.
  struct Lex {
    Mode mode = Mode::None;
    // String: kPlain between characters, else an escape, \u digit or UTF-8
    // continuation state (string_byte). Number: its grammar state (number_byte).
    uint8_t sub = 0;
    uint8_t ws = 0;          // whitespace bytes in the current run
    uint8_t num_len = 0;     // Number: bytes so far
    bool integer = false;    // Number: an integer only
    bool is_key = false;     // String/Literal: an object's key
    bool want_low = false;   // String: a high surrogate was escaped; its low half must follow
    uint8_t need = 0;        // String: UTF-8 continuation bytes still to come
    uint8_t lo = 0x80, hi = 0xBF;  // String: the range of the next continuation byte
    uint16_t hex = 0;        // String: the \u escape's value so far
    uint16_t lit_pos = 0;    // Literal: bytes matched
    uint32_t lit_node = 0;   // Literal: the node whose literals (or declared keys) match
    uint64_t lit_mask = 0;   // Literal: the candidates still matching
  };

  const JsonGrammar* g_;
  const std::vector<uint32_t>* cands_ = nullptr;  // the open choice's segments (var_ == kNoVariant)
  bool end_ok_ = false;          // ... and whether the document may end instead
  // The candidates (bits: indices into cands_) whose first part matches so far.
  struct Alive {
    std::array<uint64_t, JsonGrammar::kMaxChoices / 64> w{};
    template <class F>
    void each(F f) const {  // f(i) for every candidate i still alive
      for (size_t k = 0; k < w.size(); ++k)
        for (uint64_t m = w[k]; m; m &= m - 1) f(k * 64 + size_t(std::countr_zero(m)));
    }
    void set(size_t i) { w[i / 64] |= uint64_t(1) << (i % 64); }
    bool any() const;
    int count() const;
    size_t first() const;
  };
  Alive alive_;
  uint32_t var_ = kNoVariant;    // the segment being read, once one is left
  uint32_t part_ = 0;            // its part being read (parts().size(): all read)
  const JsonPart* cur_ = nullptr;  // that part (null: none, or all read)
  uint32_t off_ = 0;             // Literal: bytes matched; Text: bytes of its ending matched
  int depth_ = 0;
  Lex x_;
  std::array<Frame, kMaxDepth> stack_;
};

class JsonTokenTable {
 public:
  explicit JsonTokenTable(const Tokenizer& tok);
  int64_t n_vocab() const { return int64_t(bytes_.size()); }

 private:
  friend class JsonConstraint;
  std::vector<std::string> bytes_;  // by id: piece(id, false)
  std::vector<int32_t> order_;      // ids with bytes (not end-of-generation), bytes sorted
  std::vector<uint16_t> lcp_;       // order_[i]'s bytes in common with order_[i-1]'s
  std::vector<uint8_t> plain_;      // by id: whole UTF-8 without '"', '\\' or control bytes
  std::vector<int32_t> eog_;
};

class JsonConstraint {
 public:
  // Both must stay alive as long as the constraint (shared_ptr: one per vocabulary
  // and request, shared by every choice).
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const JsonTokenTable> table);

  // Sets logits[id] = -inf for every token that cannot come next (ids beyond the
  // vocabulary included). False when no token can (the document cannot go on with
  // this vocabulary): the logits are then all -inf.
  bool mask(float* logits, int64_t n_vocab) const;
  // Takes the emitted token; false when it cannot continue the document.
  bool advance(int32_t id);
  bool complete() const { return state_.complete(); }
  bool allows(int32_t id) const;  // (tests) what mask() would leave
  // Up to max_n tokens the document certainly takes next (the rest of a literal, as the
  // tokenizer spells it, its marker tokens whole): a guess to verify, as a speculative
  // draft, since the model may spell the same text otherwise.
  std::vector<int32_t> tokens_ahead(const Tokenizer& tok, int max_n) const;

 private:
  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const JsonTokenTable> table_;
  JsonState state_;
};

}  // namespace deltafin
