// The drafters of runtime/speculative.h: n-gram lookup, self-speculation on the
// resident experts, the model's MTP block, and a separate draft model (one engine
// shared by the drafters of several sequences).
#include <algorithm>

#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

namespace {

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int min_match, int max_match) : min_(min_match), max_(max_match) {}
  const char* name() const override { return "ngram"; }

  // Longest suffix first, latest occurrence first. The continuation may run into
  // the tokens it proposes itself (a loop of period p continues with period p).
  Status propose(const std::vector<int32_t>& seq, SeqState&, int max_n, std::vector<int32_t>* out) override {
    const int L = int(seq.size());
    for (int n = std::min(max_, L - 1); n >= min_; --n) {
      const int32_t* suf = &seq[size_t(L - n)];
      // Occurrences ending at j (exclusive), j < L: seq[j-n, j) == suffix.
      for (int j = L - 1; j >= n; --j) {
        if (!std::equal(suf, suf + n, &seq[size_t(j - n)])) continue;
        const size_t first = out->size();
        for (int i = 0; i < max_n; ++i) {
          const int src = j + i;  // index into seq ++ proposed
          const int32_t t = src < L ? seq[size_t(src)] : (*out)[first + size_t(src - L)];
          out->push_back(t);
        }
        return {};
      }
    }
    return {};
  }

 private:
  int min_, max_;
};

class SelfDrafter final : public Drafter {
 public:
  explicit SelfDrafter(Model& m) : m_(m), logits_(size_t(m.info().n_vocab)) {}
  const char* name() const override { return "self"; }

  // Drafts in place: the pending token and the drafts go into the target's own state
  // in resident-only mode (approximate entries past n_past), which is then truncated
  // back; the verify pass rewrites those positions.
  Status propose(const std::vector<int32_t>& seq, SeqState& target, int max_n, std::vector<int32_t>* out) override {
    const int base = target.n_past;
    int32_t t = seq.back();
    Status s;
    const ForwardOptions resident{.resident_experts_only = true};
    for (int i = 0; i < max_n; ++i) {
      s = m_.forward(target, &t, 1, logits_.data(), false, resident);
      if (!s.ok()) break;
      t = argmax(logits_.data(), int64_t(logits_.size()));
      out->push_back(t);
    }
    DF_TRY(target.truncate(base));
    return s;
  }

 private:
  Model& m_;
  std::vector<float> logits_;
};

class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(std::shared_ptr<Engine> e, int n_ctx, int32_t n_vocab)
      : e_(std::move(e)), n_ctx_(n_ctx), n_vocab_(n_vocab), logits_(size_t(e_->model().info().n_vocab)) {}
  const char* name() const override { return "draft"; }

  // The draft's state holds a prefix of seq plus its last guesses: it keeps the
  // common prefix, evaluates the rest of seq, then drafts greedily.
  Status propose(const std::vector<int32_t>& seq, SeqState&, int max_n, std::vector<int32_t>* out) override {
    Model& m = e_->model();
    if (!st_) st_ = m.new_state(n_ctx_);
    size_t common = 0;
    while (common < in_state_.size() && common < seq.size() && in_state_[common] == seq[common]) ++common;
    if (common == seq.size()) --common;  // the last token's logits are needed
    if (!st_->truncate(int(common)).ok()) {
      // Beyond what the state can roll back (a recurrent draft): start over.
      st_ = m.new_state(n_ctx_);
      common = 0;
    }
    in_state_.resize(common);
    constexpr size_t kBatch = 512;
    for (size_t i = common; i < seq.size(); i += kBatch) {
      const size_t n = std::min(kBatch, seq.size() - i);
      if (st_->n_past + int(n) > st_->n_ctx) return {};  // no room: no guess
      DF_TRY(m.forward(*st_, &seq[i], int(n), logits_.data(), false));
      in_state_.insert(in_state_.end(), seq.begin() + long(i), seq.begin() + long(i + n));
    }
    for (int i = 0; i < max_n; ++i) {
      const int32_t t = argmax(logits_.data(), n_vocab_);  // (padding rows past the vocabulary: never)
      out->push_back(t);
      if (i + 1 == max_n || st_->n_past >= st_->n_ctx) break;
      DF_TRY(m.forward(*st_, &t, 1, logits_.data(), false));
      in_state_.push_back(t);
    }
    return {};
  }

 private:
  std::shared_ptr<Engine> e_;
  int n_ctx_;
  int32_t n_vocab_;
  std::unique_ptr<SeqState> st_;
  std::vector<int32_t> in_state_;  // the tokens st_ holds
  std::vector<float> logits_;
};

// Model::mtp_draft behind the Drafter interface.
class MtpDrafter final : public Drafter {
 public:
  explicit MtpDrafter(Model& m) : m_(m) { m_.enable_mtp(); }
  const char* name() const override { return "mtp"; }
  Status propose(const std::vector<int32_t>& seq, SeqState& target, int max_n, std::vector<int32_t>* out) override {
    return m_.mtp_draft(target, seq, max_n, out);
  }

 private:
  Model& m_;
};

}  // namespace

std::unique_ptr<Drafter> make_mtp_drafter(Model& target) { return std::make_unique<MtpDrafter>(target); }

std::unique_ptr<Drafter> make_ngram_drafter(int min_match, int max_match) {
  return std::make_unique<NgramDrafter>(std::max(1, min_match), std::max(min_match, max_match));
}

std::unique_ptr<Drafter> make_self_drafter(Model& target) {
  return std::make_unique<SelfDrafter>(target);
}

Result<std::function<std::unique_ptr<Drafter>()>> model_drafters(std::shared_ptr<Engine> draft,
                                                                 const Tokenizer& target_vocab, int n_ctx) {
  const std::string& path = draft->file().path();
  DF_ASSIGN(Tokenizer dt, Tokenizer::from_gguf(draft->file().meta()));
  if (dt.n_vocab() != target_vocab.n_vocab() || draft->model().info().n_vocab < target_vocab.n_vocab())
    return make_error("draft model '{}' has a vocabulary of {} tokens, the target {}: they must be the same",
                      path, dt.n_vocab(), target_vocab.n_vocab());
  for (int32_t id = 0; id < dt.n_vocab(); ++id)
    if (dt.text(id) != target_vocab.text(id))
      return make_error("draft model '{}' has another vocabulary than the target: token {} is '{}' there and '{}' "
                        "in the target", path, id, dt.text(id), target_vocab.text(id));
  const int32_t n_vocab = dt.n_vocab();
  return std::function<std::unique_ptr<Drafter>()>([draft = std::move(draft), n_ctx, n_vocab] {
    return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(draft, n_ctx, n_vocab));
  });
}

Result<std::unique_ptr<Drafter>> make_model_drafter(std::shared_ptr<Engine> draft, const Tokenizer& target_vocab,
                                                    int n_ctx) {
  DF_ASSIGN(auto make, model_drafters(std::move(draft), target_vocab, n_ctx));
  return make();
}

}  // namespace deltafin
