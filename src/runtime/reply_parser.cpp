#include "runtime/reply_parser.h"

namespace deltafin {

std::vector<int32_t> marker_tokens(const Tokenizer& tok, const ReplyFormat& f) {
  std::vector<std::string_view> texts;
  if (f.think) texts = {"<think>", "</think>"};
  for (std::string_view m : tool_markers(f.xtml ? ToolFormat::Xtml : f.tools)) texts.push_back(m);
  std::vector<int32_t> ids;
  for (std::string_view t : texts)
    if (int32_t id = tok.vocab().find(t); id >= 0) ids.push_back(id);
  return ids;
}

ReplyParser::ReplyParser(const ReplyFormat& f)
    : split_(f.think && !f.xtml, f.think_open), tools_(f.xtml ? ToolFormat::None : f.tools, f.tool_defs) {
  if (f.xtml) xtml_.emplace(f.xtml_open, f.think);
}

ReplyPiece ReplyParser::push(const std::string& text) {
  if (xtml_) {
    SplitText t = xtml_->push(text);
    return ReplyPiece{std::move(t.reasoning), std::move(t.content), {}};
  }
  SplitText t = split_.push(text);
  return ReplyPiece{std::move(t.reasoning), tools_.push(t.content), {}};
}

ReplyPiece ReplyParser::finish() {
  if (xtml_) {
    SplitText t = xtml_->finish();
    return ReplyPiece{std::move(t.reasoning), std::move(t.content), xtml_->calls()};
  }
  SplitText t = split_.finish();
  ReplyPiece out{std::move(t.reasoning), tools_.push(t.content), {}};
  std::string rest;
  out.calls = tools_.finish(&rest);
  out.content += rest;
  return out;
}

}  // namespace deltafin
