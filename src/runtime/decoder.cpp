#include "runtime/decoder.h"

#include <fmt/format.h>

#include <algorithm>

namespace deltafin {

namespace {
// Literal guesses (a document's certain text) go on while the model keeps most of
// them: one that spells the text in other tokens stops them after this many.
constexpr int kLiteralTrial = 8;
}  // namespace

const char* decode_end_name(DecodeEnd e) {
  switch (e) {
    case DecodeEnd::None: return "";
    case DecodeEnd::Eos: return "eos";
    case DecodeEnd::Stop: return "stop";
    case DecodeEnd::Length: return "length";
    case DecodeEnd::Context: return "context";
    case DecodeEnd::Error: return "error";
  }
  return "";
}

Decoder::Decoder(const Tokenizer& tok, const std::vector<int32_t>& prompt, DecoderOptions opts)
    : tok_(tok), o_(std::move(opts)), sampler_(o_.sampling), out_(tok, o_.stop, o_.shown_tokens) {
  for (int32_t id : prompt) sampler_.accept(id);
  if (o_.json) {
    if (!o_.json_table) o_.json_table = std::make_shared<const JsonTokenTable>(tok);
    json_.emplace(o_.json, o_.json_table);
  }
  if (o_.speculator) seq_ = prompt;
}

int32_t Decoder::pick(float* row, int64_t n_vocab, int32_t draft, bool* kept) {
  if (o_.logprobs >= 0) raw_.assign(row, row + n_vocab);
  if (json_ && !json_->mask(row, n_vocab)) {
    if (kept) *kept = false;
    return -1;
  }
  const int32_t id = draft >= 0 ? sampler_.verify(row, n_vocab, draft, kept) : sampler_.sample(row, n_vocab);
  if (o_.logprobs >= 0) lp_next_ = token_logprob(raw_.data(), n_vocab, id, o_.logprobs);
  return id;
}

bool Decoder::take(int32_t id, int pos, DecodeStep* step) {
  auto end = [&](DecodeEnd e) {
    end_ = step->end = e;
    return false;
  };
  if (id < 0) {  // no token can continue the document
    if (json_->complete()) return end(DecodeEnd::Eos);
    step->error = "no token of the vocabulary can continue the JSON document";
    return end(DecodeEnd::Error);
  }
  sampler_.accept(id);
  if ((!o_.ignore_eos || json_) && tok_.is_eog(id)) return end(DecodeEnd::Eos);
  if (json_ && !json_->advance(id)) {
    step->error = fmt::format("token {} does not continue the JSON document", id);
    return end(DecodeEnd::Error);
  }
  tokens_.push_back(id);
  ++step->n_emitted;
  if (o_.speculator) seq_.push_back(id);
  const size_t start = out_.decoded_bytes();
  step->text += out_.push(id);
  if (o_.logprobs >= 0) {
    lp_next_.offset = start;
    lp_.emplace_back(std::move(lp_next_), out_.decoded_bytes());
  }
  take_logprobs(false, step);
  if (out_.stopped()) return end(DecodeEnd::Stop);
  if (o_.max_tokens >= 0 && n_generated() >= o_.max_tokens) return end(DecodeEnd::Length);
  if (pos >= o_.n_ctx) return end(DecodeEnd::Context);  // no place to evaluate it
  pending_ = id;
  return true;
}

void Decoder::take_logprobs(bool all, DecodeStep* step) {
  const size_t shown = out_.shown_bytes();
  // A token goes out with the text it starts in (or, having none, once its place is).
  size_t n = 0;
  while (n < lp_.size() && (all || lp_[n].first.offset < shown || lp_[n].second <= shown)) {
    step->logprobs.push_back(std::move(lp_[n].first));
    ++n;
  }
  lp_.erase(lp_.begin(), lp_.begin() + long(n));
  if (out_.stopped()) lp_.clear();  // the stop string's tokens and any after it
}

DecodeStep Decoder::start(float* row, int64_t n_vocab, int n_past) {
  DecodeStep step;
  if (o_.max_tokens == 0) {
    end_ = step.end = DecodeEnd::Length;
    return step;
  }
  take(pick(row, n_vocab, -1, nullptr), n_past, &step);
  return step;
}

Status Decoder::plan(SeqState& state, std::vector<int32_t>* tokens) {
  base_ = state.n_past;
  pass_.assign(1, pending_);
  literal_ = false;
  Speculator* spec = o_.speculator;
  int limit = state.n_ctx - state.n_past - 1;
  if (o_.max_tokens >= 0) limit = std::min(limit, o_.max_tokens - n_generated() - 1);
  if (spec && limit > 0) {
    std::vector<int32_t> guesses;
    // Where the document's next text is certain (a call's closing tags), it is the
    // guess while the model keeps most such guesses; otherwise the drafters guess.
    const bool spells = literal_drafted_ < kLiteralTrial || 2 * literal_kept_ >= literal_drafted_;
    if (json_ && spells) guesses = json_->tokens_ahead(tok_, std::min(limit, spec->max_draft()));
    literal_ = !guesses.empty();
    if (!literal_) {
      Status ds = spec->draft(seq_, state, limit, &guesses);
      if (!ds.ok()) {
        if (state.n_past != base_) return ds;
        guesses.clear();  // a failed guess only costs the speed-up
      }
    }
    pass_.insert(pass_.end(), guesses.begin(), guesses.end());
  }
  *tokens = pass_;
  return {};
}

DecodeStep Decoder::accept(float* rows, int64_t n_vocab, double pass_s) {
  DecodeStep step;
  const int k = int(pass_.size()) - 1;
  int kept = 0;
  // Row j gives the token after row j's input; guess j stands while the sampler
  // keeps it (Sampler::verify preserves the sampling distribution).
  for (int j = 0; j <= k; ++j) {
    bool ok = false;
    const int32_t id = pick(&rows[size_t(j) * size_t(n_vocab)], n_vocab, j < k ? pass_[size_t(j) + 1] : -1, &ok);
    const bool go = take(id, base_ + 1 + j, &step);
    if (ok) ++kept;
    if (!go || !ok) break;
  }
  step.n_keep = 1 + kept;
  step.n_drafted = k;
  step.n_accepted = kept;
  step.literal = literal_;
  if (literal_) {
    literal_drafted_ += k;
    literal_kept_ += kept;
  } else if (o_.speculator) {
    o_.speculator->feedback(k, kept, pass_s);
  }
  return step;
}

DecodeStep Decoder::finish() {
  DecodeStep step;
  step.end = end_;
  step.text = out_.finish();
  take_logprobs(!out_.stopped(), &step);
  return step;
}

}  // namespace deltafin
