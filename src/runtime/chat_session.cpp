#include "runtime/chat_session.h"

#include <algorithm>
#include <optional>

#include "chat/reply_parser.h"

namespace deltafin {

ChatSession::ChatSession(Model& model, const Tokenizer& tok, ChatTemplate tmpl, int n_ctx, bool xtml, bool think)
    : model_(model), tok_(tok), tmpl_(std::move(tmpl)), n_ctx_(n_ctx), state_(model.new_state(n_ctx)),
      xtml_(xtml), think_(think) {}

Result<std::unique_ptr<ChatSession>> ChatSession::create(Model& model, const Tokenizer& tok,
                                                         const std::string& template_source, int n_ctx) {
  if (n_ctx <= 0) return make_error("the context size must be positive (got {})", n_ctx);
  DF_ASSIGN(ChatTemplate t, ChatTemplate::parse(template_source));
  const bool xtml = tool_format_of(template_source) == ToolFormat::Xtml;
  const bool think = template_source.find("<think>") != std::string::npos;
  return std::unique_ptr<ChatSession>(new ChatSession(model, tok, std::move(t), n_ctx, xtml, think));
}

nlohmann::ordered_json ChatSession::messages_json(const std::string* pending_user) const {
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  auto add = [&](const std::string& role, const std::string& content, const std::string& reasoning) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    m["role"] = role;
    m["content"] = content;
    if (!reasoning.empty()) m["reasoning_content"] = reasoning;
    msgs.push_back(std::move(m));
  };
  if (!system_.empty()) add("system", system_, "");
  for (const Message& m : messages_) add(m.role, m.content, m.reasoning);
  if (pending_user) add("user", *pending_user, "");
  return msgs;
}

Result<std::string> ChatSession::render(const std::string* pending_user, bool add_generation_prompt) const {
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  extra["bos_token"] = tok_.bos() >= 0 ? tok_.text(tok_.bos()) : std::string();
  extra["eos_token"] = tok_.eos() >= 0 ? tok_.text(tok_.eos()) : std::string();
  for (const auto& [k, v] : kwargs_.items()) extra[k] = v;
  return tmpl_.apply(messages_json(pending_user), nullptr, add_generation_prompt, extra);
}

std::vector<int32_t> ChatSession::tokenize(const std::string& text) const {
  std::vector<int32_t> ids = tok_.encode(text, /*add_special=*/false, /*parse_special=*/true);
  // Templates usually write the BOS text themselves ({{ bos_token }}); add it only
  // when the model wants one and the template did not, never twice.
  if (tok_.add_bos() && tok_.bos() >= 0 && (ids.empty() || ids[0] != tok_.bos())) ids.insert(ids.begin(), tok_.bos());
  return ids;
}

void ChatSession::reset() {
  messages_.clear();
  cached_.clear();
  state_ = model_.new_state(n_ctx_);
}

Result<ChatTurn> ChatSession::turn(const std::string& user_text, const GenerateParams& params,
                                   const std::function<bool(const std::string&)>& on_text,
                                   const std::function<void(const std::string&)>& on_reasoning) {
  DF_ASSIGN(std::string text, render(&user_text, true));
  std::vector<int32_t> ids = tokenize(text);
  if (ids.empty()) return make_error("the chat template rendered an empty prompt");
  if (int(ids.size()) >= n_ctx_)
    return make_error("the conversation is {} tokens long but the context holds {}", ids.size(), n_ctx_);

  ChatTurn out;
  out.n_prompt = int(ids.size());
  // Reuse the longest common prefix of what the state holds and the new prompt;
  // at least one token must be fed to get the next logits.
  size_t common = 0;
  while (common < cached_.size() && common < ids.size() && cached_[common] == ids[common]) ++common;
  common = std::min(common, ids.size() - 1);
  // A recurrent state goes back only within its window or to the last prompt's end
  // (pinned below): as far as it can (0: nowhere, so the truncation below fails).
  common = size_t(state_->reachable(int(common)));
  if (common < size_t(state_->n_past) && !state_->truncate(int(common)).ok()) {
    state_ = model_.new_state(n_ctx_);
    common = 0;
    out.reprefilled = true;
  }
  cached_.resize(common);
  out.n_reused = int(common);

  std::vector<int32_t> suffix(ids.begin() + std::ptrdiff_t(common), ids.end());
  GenerateParams gp = params;
  gp.pin_prompt = true;
  // The thinking kept apart from the answer: Kimi K3's XTML, or <think> tags.
  std::optional<ReplyParser> reply;
  if (xtml_ || think_) {
    ReplyFormat f;
    f.think = true;
    f.xtml = xtml_;
    if (xtml_) f.xtml_open = xtml_open_tags(text);
    else f.think_open = prompt_opens_think(text);
    reply.emplace(f);
    const std::vector<int32_t> markers = marker_tokens(tok_, f);
    gp.shown_tokens.insert(gp.shown_tokens.end(), markers.begin(), markers.end());
  }
  // Text from the model -> the answer (and the thinking), false to stop.
  auto deliver = [&](const ReplyPiece& t) {
    out.reasoning += t.reasoning;
    if (!t.reasoning.empty() && on_reasoning) on_reasoning(t.reasoning);
    out.answer += t.content;
    return t.content.empty() || on_text(t.content);
  };
  Status st = generate(model_, *state_, tok_, suffix, gp,
                       [&](const std::string& piece) {
                         if (reply) return deliver(reply->push(piece));
                         out.answer += piece;
                         return on_text(piece);
                       },
                       &out.gen);
  if (reply) deliver(reply->finish());
  // Whatever the outcome, record which tokens the state now holds.
  cached_.insert(cached_.end(), suffix.begin(), suffix.end());
  cached_.insert(cached_.end(), out.gen.tokens.begin(), out.gen.tokens.end());
  cached_.resize(std::min(cached_.size(), size_t(std::max(state_->n_past, 0))));
  if (!st.ok()) return st.error();
  // Stopped before a word came out: as if the message had not been sent.
  if (out.gen.stop_reason == "cancelled" && out.answer.empty() && out.reasoning.empty()) return out;

  messages_.push_back(Message{"user", user_text, ""});
  messages_.push_back(Message{"assistant", out.answer, out.reasoning});
  return out;
}

}  // namespace deltafin
