#include "server/chat_prompt.h"

#include "chat/forced_calls.h"
#include "chat/reasoning.h"
#include "chat/xtml.h"

namespace deltafin::server {

Result<ChatPrompter> ChatPrompter::make(const std::string& source, const Tokenizer& tok, json template_kwargs,
                                        bool reasoning) {
  DF_ASSIGN(ChatTemplate t, ChatTemplate::parse(source));
  ChatPrompter p(std::make_unique<ChatTemplate>(std::move(t)), tok);
  p.template_kwargs_ = std::move(template_kwargs);
  p.reasoning_ = reasoning;
  p.format_ = &chat_format_of(source);
  p.template_thinks_ = source.find(p.format_->think_open) != std::string::npos;
  p.template_has_developer_ = source.find("developer") != std::string::npos;
  return p;
}

std::optional<ApiError> ChatPrompter::prepare(ChatRequest& cr, std::vector<int32_t>* out_ids,
                                              ReplyFormat* out_format) const {
  // OpenAI's "developer" role (its newer name for system) where the template has no such
  // role: most would drop the message silently.
  if (!template_has_developer_)
    for (json& m : cr.messages)
      if (m["role"] == "developer") m["role"] = "system";
  json extra = json::object();
  if (tok_->bos() >= 0) extra["bos_token"] = tok_->text(tok_->bos());
  if (tok_->eos() >= 0) extra["eos_token"] = tok_->text(tok_->eos());
  for (auto& [k, v] : template_kwargs_.items()) extra[k] = v;
  if (!cr.tool_choice.is_null()) extra["tool_choice"] = cr.tool_choice;
  if (!cr.reasoning_effort.is_null()) extra["reasoning_effort"] = cr.reasoning_effort;
  // Templates that teach the format read it (Kimi K3 adds a system note with the schema).
  if (!cr.gen.response_format.is_null()) extra["response_format"] = cr.gen.response_format;
  const bool json_reply = cr.gen.json_grammar != nullptr;  // response_format JSON
  // tool_choice "required" or a named function: where the format allows, the reply is
  // constrained to be such a call (forced_calls.h); otherwise the template asks.
  const bool forced_call = !json_reply && (cr.tool_choice == "required" || cr.tool_choice.is_object()) &&
                           format_->forced != nullptr;
  // A constrained reply is the answer: no thinking first (the constraint holds from
  // the first token). chat_template_kwargs may still turn it on.
  if (json_reply || forced_call) extra["thinking"] = false, extra["enable_thinking"] = false;
  if (cr.template_kwargs.is_object())
    for (auto& [k, v] : cr.template_kwargs.items()) extra[k] = v;
  Result<std::string> text = tmpl_->apply(cr.messages, cr.tools, true, extra);
  if (!text.ok())
    return bad_request("messages", "cannot render the conversation with the model's chat template: " +
                                       text.error().message);
  const std::string& prompt = text.value();
  if (forced_call) {  // a named function: one call of it; "required": one or, in parallel, several
    const int max_calls = cr.tool_choice == "required" && cr.parallel_tool_calls ? kMaxForcedCalls : 1;
    cr.gen.json_grammar = forced_call_grammar(format_->id, cr.tools, cr.tool_choice, prompt, *tok_, max_calls);
  }
  std::vector<int32_t> ids;
  const std::string bos = tok_->bos() >= 0 ? tok_->text(tok_->bos()) : std::string();
  if (tok_->add_bos() && tok_->bos() >= 0 && prompt.compare(0, bos.size(), bos) != 0) ids.push_back(tok_->bos());
  std::vector<int32_t> rest = tok_->encode(prompt, false, true);
  ids.insert(ids.end(), rest.begin(), rest.end());
  ReplyFormat f;
  const bool has_tools = cr.tools.is_array() && !cr.tools.empty() && cr.tool_choice != "none";
  if (format_->syntax == CallSyntax::Xtml) {  // Kimi K3: the structure carries everything
    f.xtml = true;
    f.think = reasoning_;
    f.xtml_open = xtml_open_tags(prompt);
  } else {
    f.think = reasoning_ && template_thinks_;
    f.think_open = f.think && prompt_opens_think(prompt);
    if (has_tools) f.tools = format_->id, f.tool_defs = cr.tools;
  }
  if (!cr.parallel_tool_calls) f.max_calls = 1;  // a second call ends the reply
  if (cr.tool_choice == "none") f.max_calls = 0;  // K3's XTML reads calls: one ends the reply
  if (json_reply) f = ReplyFormat{};  // the document, as generated, is the content
  *out_ids = std::move(ids);
  *out_format = std::move(f);
  return {};
}

}  // namespace deltafin::server
