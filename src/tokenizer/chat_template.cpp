#include "tokenizer/chat_template.h"

namespace deltafin {

const char* const kFallbackChatTemplate =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

nlohmann::ordered_json chat_template_context(const nlohmann::ordered_json& messages,
                                             const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                             const nlohmann::ordered_json& extra_context) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (!tools.is_null()) ctx["tools"] = tools;
  if (extra_context.is_object())
    for (const auto& [k, v] : extra_context.items()) ctx[k] = v;
  return ctx;
}

Result<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  auto t = jinja::Template::parse(source);
  if (!t) return make_error("chat template: {}", t.error().message);
  return ChatTemplate(std::move(t.value()));
}

Result<std::string> ChatTemplate::apply(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                        bool add_generation_prompt, const nlohmann::ordered_json& extra_context,
                                        const ChatTemplateOptions& options) const {
  if (!messages.is_array()) return Error{"chat template: messages must be a JSON array"};
  if (!extra_context.is_null() && !extra_context.is_object())
    return Error{"chat template: extra context must be a JSON object"};
  auto out = template_.render(chat_template_context(messages, tools, add_generation_prompt, extra_context),
                              options.render);
  if (!out) return make_error("chat template: {}", out.error().message);
  return out;
}

Result<std::string> render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_context,
                                         const ChatTemplateOptions& options) {
  auto t = ChatTemplate::parse(tmpl);
  if (!t) return t.error();
  return t->apply(messages, tools, add_generation_prompt, extra_context, options);
}

}  // namespace deltafin
