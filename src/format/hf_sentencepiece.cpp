// tokenizer.model (SentencePiece's ModelProto, as Llama 2, Mistral and Mixtral ship
// it) <-> GGUF "llama" vocabularies, as llama.cpp's _set_vocab_sentencepiece() lays
// them out: every piece by id with its score and type (unknown, control, unused,
// byte, else normal), then tokenizer_config.json's added_tokens_decoder over them
// (control when special or looking special, else user-defined; score -1000), and
// "[PAD<id>]" (unused, score -10000) up to config.json's vocab_size.
//
// The protobuf subset read and written: ModelProto.pieces (1) = {piece (1, string),
// score (2, float), type (3, enum)}; trainer_spec (2) and normalizer_spec (3) are
// skipped when read and written minimally (model_type BPE, byte_fallback,
// add_dummy_prefix) so that sentencepiece itself can load the file.
#include <cstring>
#include <map>

#include "format/hf_tokenizer_detail.h"

namespace deltafin::hf {
namespace {

// A bounds-checked protobuf reader over one message.
class ProtoReader {
 public:
  ProtoReader(std::string_view buf, size_t base) : buf_(buf), base_(base) {}
  bool done() const { return pos_ >= buf_.size(); }
  size_t offset() const { return base_ + pos_; }

  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= buf_.size()) return false;
      const uint8_t b = uint8_t(buf_[pos_++]);
      *v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Reads a field's key and value: wire types 0 (varint), 1 (fixed64), 2
  // (length-delimited: `bytes`), 5 (fixed32).
  bool field(uint32_t* number, uint32_t* wire, uint64_t* num, std::string_view* bytes, size_t* bytes_at) {
    uint64_t key;
    if (!varint(&key)) return false;
    *number = uint32_t(key >> 3);
    *wire = uint32_t(key & 7);
    switch (*wire) {
      case 0: return varint(num);
      case 1:
      case 5: {
        const size_t n = *wire == 1 ? 8 : 4;
        if (buf_.size() - pos_ < n) return false;
        *num = 0;
        std::memcpy(num, buf_.data() + pos_, n);  // little-endian hosts
        pos_ += n;
        return true;
      }
      case 2: {
        uint64_t len;
        if (!varint(&len) || len > buf_.size() - pos_) return false;
        *bytes_at = base_ + pos_;
        *bytes = buf_.substr(pos_, size_t(len));
        pos_ += size_t(len);
        return true;
      }
      default: return false;
    }
  }

 private:
  std::string_view buf_;
  size_t base_;
  size_t pos_ = 0;
};

void put_varint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    *out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  *out += char(v);
}
void put_key(uint32_t number, uint32_t wire, std::string* out) { put_varint((uint64_t(number) << 3) | wire, out); }
void put_bytes(uint32_t number, std::string_view b, std::string* out) {
  put_key(number, 2, out);
  put_varint(b.size(), out);
  out->append(b);
}

// sentencepiece's piece types.
enum PieceType { kPieceNormal = 1, kPieceUnknown = 2, kPieceControl = 3, kPieceUserDefined = 4, kPieceUnused = 5,
                 kPieceByte = 6 };

}  // namespace

Status sentencepiece_to_conversion(const std::string& model, const json& cfg, int64_t vocab_size, Conversion* c) {
  ProtoReader top(model, 0);
  std::vector<std::string> pieces;
  std::vector<double> scores;
  std::vector<int64_t> types;
  while (!top.done()) {
    uint32_t number, wire;
    uint64_t num = 0;
    std::string_view bytes;
    size_t at = 0;
    const size_t field_at = top.offset();
    if (!top.field(&number, &wire, &num, &bytes, &at))
      return make_error("tokenizer.model: offset {}: not a SentencePiece model (bad protobuf field)", field_at);
    if (number != 1) continue;  // trainer_spec, normalizer_spec, ...
    if (wire != 2) return make_error("tokenizer.model: offset {}: pieces[{}] is not a message", field_at, pieces.size());
    ProtoReader p(bytes, at);
    std::string text;
    float score = 0.0f;
    int64_t type = kPieceNormal;
    while (!p.done()) {
      uint32_t pn, pw;
      uint64_t pv = 0;
      std::string_view pb;
      size_t pat = 0;
      if (!p.field(&pn, &pw, &pv, &pb, &pat))
        return make_error("tokenizer.model: offset {}: pieces[{}]: bad protobuf field", p.offset(), pieces.size());
      if (pn == 1 && pw == 2) text = std::string(pb);
      else if (pn == 2 && pw == 5) std::memcpy(&score, &pv, 4);
      else if (pn == 3 && pw == 0) type = int64_t(pv);
    }
    pieces.push_back(std::move(text));
    scores.push_back(score);
    types.push_back(type);
  }
  if (pieces.empty()) return make_error("tokenizer.model: no pieces; not a SentencePiece model");

  const int64_t n = vocab_size > 0 ? vocab_size : int64_t(pieces.size());
  c->model = "llama";
  c->pre = "default";
  c->has_merges = false;
  c->tokens.resize(size_t(n));
  c->scores.assign(size_t(n), -10000.0);
  c->types.assign(size_t(n), kUnused);
  for (int64_t i = 0; i < n; ++i) c->tokens[size_t(i)] = pad_text(i);
  for (size_t i = 0; i < pieces.size() && int64_t(i) < n; ++i) {
    c->tokens[i] = pieces[i];
    c->scores[i] = scores[i];
    switch (types[i]) {
      case kPieceUnknown: c->types[i] = kUnknown; break;
      case kPieceControl: c->types[i] = kControl; break;
      case kPieceUnused: c->types[i] = kUnused; break;
      case kPieceByte: c->types[i] = kByte; break;
      default: c->types[i] = kNormal; break;  // user-defined pieces too, as the converter reads them
    }
  }
  if (cfg.is_object() && cfg.contains("added_tokens_decoder")) {
    const json& d = cfg["added_tokens_decoder"];
    if (!d.is_object()) return make_error("tokenizer_config.json: added_tokens_decoder: expected an object");
    for (const auto& [key, e] : d.items()) {
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || !e.is_object() || !e.contains("content") ||
          !e["content"].is_string())
        return make_error("tokenizer_config.json: added_tokens_decoder[\"{}\"]: expected an id and {{\"content\": ...}}",
                          key);
      if (id >= n) continue;
      std::string text = e["content"].get<std::string>();
      c->added.emplace_back(text, id);
      if ((e.contains("special") && e["special"].is_boolean() && e["special"].get<bool>()) || looks_special(text)) {
        c->types[size_t(id)] = kControl;
      } else {
        for (size_t p; (p = text.find("\u2581")) != std::string::npos;) text.replace(p, 3, " ");
        c->types[size_t(id)] = kUserDefined;
      }
      c->scores[size_t(id)] = -1000.0;
      c->tokens[size_t(id)] = std::move(text);
    }
  }
  // Special-token names are also looked up among the model's own control and
  // unknown pieces (<s>, </s>, <unk>), which published folders list in
  // tokenizer.json's added_tokens.
  for (size_t i = 0; i < c->types.size(); ++i)
    if (c->types[i] == kControl || c->types[i] == kUnknown) c->added.emplace_back(c->tokens[i], int64_t(i));
  return {};
}

Result<std::string> gguf_to_sentencepiece(const GGUFFile& meta, std::vector<std::pair<int64_t, std::string>>* added) {
  const GGUFValue* toks = meta.find("tokenizer.ggml.tokens");
  const GGUFValue* types = meta.find("tokenizer.ggml.token_type");
  const GGUFValue* scores = meta.find("tokenizer.ggml.scores");
  if (!toks || !toks->is_array() || toks->elem_type != GGUFType::STRING)
    return make_error("tokenizer.ggml.tokens: missing or not an array of strings");
  const size_t n = toks->strings.size();
  auto score_of = [&](size_t i) -> float {
    if (!scores || !scores->is_array() || i >= scores->array_size()) return 0.0f;
    return scores->elem_type == GGUFType::F32 ? float(scores->floats[i]) : float(scores->ints[i]);
  };
  std::string out;
  bool bytes = false;
  for (size_t i = 0; i < n; ++i) {
    const int64_t ty = types && types->is_array() && i < types->ints.size() ? types->ints[i] : kNormal;
    const float score = score_of(i);
    // Added tokens (the converter gives them score -1000) and user-defined tokens
    // go to added_tokens_decoder, which is what marks them on the way back.
    if ((ty == kControl || ty == kUserDefined) && (score == -1000.0f || ty == kUserDefined))
      added->emplace_back(int64_t(i), toks->strings[i]);
    std::string piece;
    put_bytes(1, toks->strings[i], &piece);
    put_key(2, 5, &piece);
    uint32_t bits;
    std::memcpy(&bits, &score, 4);
    for (int k = 0; k < 4; ++k) piece += char((bits >> (8 * k)) & 0xFF);
    int64_t pt = kPieceNormal;
    switch (ty) {
      case kUnknown: pt = kPieceUnknown; break;
      case kControl: pt = kPieceControl; break;
      case kUserDefined: pt = kPieceUserDefined; break;
      case kUnused: pt = kPieceUnused; break;
      case kByte: pt = kPieceByte; bytes = true; break;
      default: break;
    }
    if (pt != kPieceNormal) {
      put_key(3, 0, &piece);
      put_varint(uint64_t(pt), &piece);
    }
    put_bytes(1, piece, &out);
  }
  // trainer_spec: model_type BPE (field 3), byte_fallback (35); normalizer_spec:
  // add_dummy_prefix (3).
  std::string trainer, normalizer;
  put_key(3, 0, &trainer);
  put_varint(2, &trainer);
  put_key(35, 0, &trainer);
  put_varint(bytes ? 1 : 0, &trainer);
  put_bytes(1, "identity", &normalizer);
  put_key(3, 0, &normalizer);
  put_varint(meta.bool_or("tokenizer.ggml.add_space_prefix", true) ? 1 : 0, &normalizer);
  put_bytes(2, trainer, &out);
  put_bytes(3, normalizer, &out);
  return out;
}

}  // namespace deltafin::hf
