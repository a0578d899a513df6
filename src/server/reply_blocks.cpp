#include "server/reply_blocks.h"

namespace deltafin::server {

std::string ReplyBlocks::close() {
  if (open_ == Kind::None) return {};
  std::string out = sink_.close();
  open_ = Kind::None;
  return out;
}

std::string ReplyBlocks::reopen(Kind kind, const std::string& call_name) {
  std::string out = close();
  open_ = kind;
  if (kind == Kind::Call) ++n_calls_;
  return out + sink_.open(kind, call_name);
}

std::string ReplyBlocks::push(const ReplyPiece& piece) {
  std::string out;
  if (!piece.reasoning.empty()) {
    if (open_ != Kind::Reasoning) out += reopen(Kind::Reasoning);
    out += sink_.delta(piece.reasoning);
  }
  if (!piece.content.empty()) {
    std::string text = piece.content;
    if (open_ != Kind::Text) {
      held_space_ += text;
      text.clear();
      if (held_space_.find_first_not_of(" \t\r\n") != std::string::npos) {
        out += reopen(Kind::Text);
        text.swap(held_space_);
      }
    }
    if (!text.empty()) out += sink_.delta(text);
  }
  for (const ToolCallDelta& d : piece.calls) {
    if (!d.name.empty()) {
      out += reopen(Kind::Call, d.name);
      held_space_.clear();
    }
    if (open_ == Kind::Call && !d.arguments.empty()) out += sink_.delta(d.arguments);
  }
  return out;
}

}  // namespace deltafin::server
