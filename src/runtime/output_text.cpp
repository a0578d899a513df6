#include "runtime/output_text.h"

#include <algorithm>

namespace deltafin {

OutputText::OutputText(const Tokenizer& tok, std::vector<std::string> stop, std::vector<int32_t> shown)
    : dec_(tok, false, std::move(shown)), stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
  for (const auto& s : stop_) max_stop_ = std::max(max_stop_, s.size());
}

std::string OutputText::push(int32_t id) {
  if (stopped_) return {};
  const std::string piece = dec_.push(id);
  decoded_ += piece.size();
  held_ += piece;
  for (const auto& s : stop_) {
    const size_t at = held_.find(s);
    if (at != std::string::npos) {
      held_.resize(at);
      stopped_ = true;
      stop_found_ = s;  // a later one found here starts earlier
    }
  }
  // Emit everything that cannot be the beginning of a stop string, without splitting
  // a UTF-8 sequence in what is held back.
  size_t keep = stopped_ ? 0 : std::min(held_.size(), max_stop_ > 0 ? max_stop_ - 1 : 0);
  while (keep > 0 && keep < held_.size() && (uint8_t(held_[held_.size() - keep]) & 0xC0) == 0x80) ++keep;
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  shown_ += out.size();
  return out;
}

std::string OutputText::finish() {
  if (stopped_) return {};
  const std::string tail = dec_.flush();
  decoded_ += tail.size();
  std::string out = std::move(held_) + tail;
  held_.clear();
  shown_ += out.size();
  return out;
}

}  // namespace deltafin
