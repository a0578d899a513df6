// A conversation with a model through its chat template. Each turn renders the
// whole conversation with the template (as the model was trained), tokenizes it,
// and feeds the model only what the sequence state does not already hold: when the
// tokens cached from the previous turn are a prefix of the new prompt, just the new
// suffix; otherwise the state is rolled back to the longest common prefix (or, if
// the model cannot roll back that far, prefilled again from the start).
//
//   DF_ASSIGN(auto chat, ChatSession::create(model, tok, template_source, n_ctx));
//   chat->set_system("You are terse.");
//   DF_ASSIGN(ChatTurn t, chat->turn("Hi!", gen_params, print_piece));
//
// Single-threaded: one turn at a time. Model and Tokenizer must outlive the session.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

struct ChatTurn {
  GenerateStats gen;     // of the answer (gen.n_prompt: tokens fed this turn)
  int n_prompt = 0;      // tokens of the whole rendered conversation
  int n_reused = 0;      // of those, already in the state from earlier turns
  bool reprefilled = false;  // the state could not be rolled back and was rebuilt
  std::string answer;    // the text streamed out (kept as the assistant message)
  std::string reasoning;  // a thinking model's thinking, kept apart from the answer
};

class ChatSession {
 public:
  // template_source: the Jinja chat template (usually tokenizer.chat_template).
  static Result<std::unique_ptr<ChatSession>> create(Model& model, const Tokenizer& tok,
                                                     const std::string& template_source, int n_ctx);

  // Adds `user_text` as a user message, generates the answer (streamed through
  // on_text, which may return false to stop it) and adds it as the assistant
  // message, also when cancelled (the partial answer stays in the conversation;
  // a turn cancelled before any text came out leaves no messages). With a template
  // whose replies think (XTML as Kimi K3's, or <think> tags), the markers are read, not
  // shown: the thinking goes to on_reasoning (when set) and ChatTurn::reasoning, the
  // answer to on_text, and both into the assistant message (reasoning_content, content).
  // On an error (template, context too small) the user message is dropped again and
  // the conversation is as before.
  Result<ChatTurn> turn(const std::string& user_text, const GenerateParams& params,
                        const std::function<bool(const std::string&)>& on_text,
                        const std::function<void(const std::string&)>& on_reasoning = nullptr);

  // Forgets the messages (keeps the system message) and empties the state.
  void reset();
  // Sets (or with "" removes) the system message; takes effect from the next turn.
  void set_system(const std::string& text) { system_ = text; }
  const std::string& system() const { return system_; }
  // Variables the template gets beside the messages (e.g. {"thinking": false} for Kimi
  // K3); from the next render.
  void set_template_kwargs(nlohmann::ordered_json kwargs) { kwargs_ = std::move(kwargs); }

  // Renders the conversation so far plus an optional pending user message.
  Result<std::string> render(const std::string* pending_user, bool add_generation_prompt) const;
  // Prompt tokens for rendered text: special tokens parsed, BOS added unless the
  // template already wrote it.
  std::vector<int32_t> tokenize(const std::string& text) const;

  int n_past() const { return state_->n_past; }
  int n_ctx() const { return state_->n_ctx; }
  size_t n_messages() const { return messages_.size(); }

 private:
  ChatSession(Model& model, const Tokenizer& tok, ChatTemplate tmpl, int n_ctx, bool xtml, bool think);
  nlohmann::ordered_json messages_json(const std::string* pending_user) const;

  Model& model_;
  const Tokenizer& tok_;
  ChatTemplate tmpl_;
  int n_ctx_;
  std::unique_ptr<SeqState> state_;
  std::vector<int32_t> cached_;  // the tokens held by state_, in order (size == n_past)
  std::string system_;
  nlohmann::ordered_json kwargs_ = nlohmann::ordered_json::object();
  struct Message {
    std::string role, content, reasoning;
  };
  std::vector<Message> messages_;  // no system
  bool xtml_;                      // replies are XTML (Kimi K3)
  bool think_;                     // replies think between <think> tags
};

}  // namespace deltafin
