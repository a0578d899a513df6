#include "chat/reasoning.h"

namespace deltafin {

namespace {
constexpr std::string_view kOpen = kThinkOpen, kClose = kThinkClose;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

bool prompt_opens_think(const std::string& prompt) {
  const size_t open = prompt.rfind(kOpen);
  if (open == std::string::npos) return false;
  const size_t close = prompt.rfind(kClose);
  return close == std::string::npos || close < open;
}

ReasoningSplitter::ReasoningSplitter(bool enabled, bool starts_inside, std::string_view open, std::string_view close)
    : mode_(!enabled ? Mode::Content : starts_inside ? Mode::Reasoning : Mode::Start), open_(open), close_(close) {}

SplitText ReasoningSplitter::push(const std::string& text) {
  SplitText out;
  buf_ += text;
  for (;;) {
    if (mode_ == Mode::Start) {
      size_t i = 0;
      while (i < buf_.size() && is_space(buf_[i])) ++i;
      const std::string rest = buf_.substr(i);
      if (rest.size() >= open_.size() && rest.compare(0, open_.size(), open_) == 0) {
        buf_ = rest.substr(open_.size());
        mode_ = Mode::Reasoning;
        continue;
      }
      if (rest.size() < open_.size() && open_.compare(0, rest.size(), rest) == 0) return out;  // undecided
      mode_ = Mode::Content;
      continue;
    }
    if (mode_ == Mode::Reasoning) {
      const size_t at = buf_.find(close_);
      if (at != std::string::npos) {
        out.reasoning += buf_.substr(0, at);
        buf_ = buf_.substr(at + close_.size());
        mode_ = Mode::Content;
        trim_content_ = true;
        continue;
      }
      const size_t keep = partial_tag(buf_, close_);
      out.reasoning += buf_.substr(0, buf_.size() - keep);
      buf_.erase(0, buf_.size() - keep);
      return out;
    }
    // Content.
    if (trim_content_) {
      size_t i = 0;
      while (i < buf_.size() && is_space(buf_[i])) ++i;
      buf_.erase(0, i);
      if (buf_.empty()) return out;
      trim_content_ = false;
    }
    out.content += buf_;
    buf_.clear();
    return out;
  }
}

SplitText ReasoningSplitter::finish() {
  SplitText out;
  if (mode_ == Mode::Reasoning) out.reasoning = buf_;
  else out.content = buf_;
  buf_.clear();
  return out;
}

}  // namespace deltafin
