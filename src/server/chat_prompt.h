// A chat request as the model sees it, for every API that ends in a chat (chat
// completions, Responses, Messages): the messages rendered with the model's chat
// template into the prompt's ids, how the reply is read (ReplyFormat: reasoning, the
// template's chat format, formats.h), and for tool_choice "required" or a named
// function the grammar that forces the call (forced_calls.h). No HTTP here.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/formats.h"
#include "chat/reply_parser.h"
#include "core/result.h"
#include "server/api.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::server {

class ChatPrompter {
 public:
  // source: the chat template. template_kwargs: the server's (--chat-template-kwargs).
  // reasoning: keep a thinking model's reasoning apart (--reasoning).
  static Result<ChatPrompter> make(const std::string& source, const Tokenizer& tok, json template_kwargs,
                                   bool reasoning);

  // A validated chat request -> its prompt's ids and how its reply is read; sets
  // cr.gen.json_grammar where a call is forced. The error names the messages when the
  // template cannot render them.
  std::optional<ApiError> prepare(ChatRequest& cr, std::vector<int32_t>* ids, ReplyFormat* format) const;

  const ChatFormat& format() const { return *format_; }

 private:
  ChatPrompter(std::unique_ptr<ChatTemplate> t, const Tokenizer& tok) : tmpl_(std::move(t)), tok_(&tok) {}
  std::unique_ptr<ChatTemplate> tmpl_;
  const Tokenizer* tok_;
  json template_kwargs_;
  bool reasoning_ = false;
  const ChatFormat* format_ = nullptr;  // the chat format the template teaches
  bool template_thinks_ = false;        // it writes the format's reasoning tags
  bool template_has_developer_ = false;  // else a "developer" message is a system one
};

}  // namespace deltafin::server
