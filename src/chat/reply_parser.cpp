#include "chat/reply_parser.h"

namespace deltafin {

namespace {
const ChatFormat& row_of(const ReplyFormat& f) { return chat_format(f.xtml ? ToolFormat::Xtml : f.tools); }
}  // namespace

std::vector<int32_t> marker_tokens(const Tokenizer& tok, const ReplyFormat& f) {
  std::vector<std::string_view> texts;
  if (f.think) texts = {kThinkOpen, kThinkClose};  // K3's vocabulary too, where it has them
  for (std::string_view m : row_of(f).shown) texts.push_back(m);
  std::vector<int32_t> ids;
  for (std::string_view t : texts)
    if (int32_t id = tok.vocab().find(t); id >= 0) ids.push_back(id);
  return ids;
}

ReplyParser::ReplyParser(const ReplyFormat& f)
    : split_(f.think && !f.xtml, f.think_open, row_of(f).think_open, row_of(f).think_close),
      tools_(f.xtml ? ToolFormat::None : f.tools, f.tool_defs),
      max_calls_(f.max_calls) {
  if (f.xtml) xtml_.emplace(f.xtml_open, f.think);
}

ReplyPiece ReplyParser::cap(ReplyPiece p) {
  if (full_) return {};
  if (max_calls_ < 0) return p;
  for (size_t i = 0; i < p.calls.size(); ++i)
    if (p.calls[i].index >= size_t(max_calls_)) {
      p.calls.resize(i);  // the calls' deltas come in order: the rest belong to later calls
      full_ = true;
      break;
    }
  return p;
}

ReplyPiece ReplyParser::push(const std::string& text) {
  if (full_) return {};
  if (xtml_) {
    SplitText t = xtml_->push(text);
    return cap(ReplyPiece{std::move(t.reasoning), std::move(t.content), xtml_->take_calls()});
  }
  SplitText t = split_.push(text);
  ToolText c = tools_.push(t.content);
  return cap(ReplyPiece{std::move(t.reasoning), std::move(c.content), std::move(c.calls)});
}

ReplyPiece ReplyParser::finish() {
  if (full_) return {};
  if (xtml_) {
    SplitText t = xtml_->finish();
    return cap(ReplyPiece{std::move(t.reasoning), std::move(t.content), xtml_->take_calls()});
  }
  SplitText t = split_.finish();
  ToolText c = tools_.push(t.content), end = tools_.finish();
  c.content += end.content;
  c.calls.insert(c.calls.end(), end.calls.begin(), end.calls.end());
  return cap(ReplyPiece{std::move(t.reasoning), std::move(c.content), std::move(c.calls)});
}

}  // namespace deltafin
