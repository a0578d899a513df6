// Chat templates: renders a conversation into the prompt text a model was trained
// on, using the model's Jinja chat template (tokenizer.chat_template in GGUF).
// Output matches the Hugging Face JS reference renderer byte for byte
// (tests/unit/test_chat_template.cpp checks ~70 real templates against it).
//
// The render context is {messages, add_generation_prompt, tools (only when not
// null, so `tools is defined` is false without tools), ...extra_context}, where
// extra_context carries bos_token, eos_token, enable_thinking, ... and overrides
// the other keys. Messages are OpenAI-style objects: role, content, and optionally
// tool_calls (function.arguments as an object), tool_call_id, name,
// reasoning_content.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "core/result.h"
#include "jinja/jinja.h"

namespace deltafin {

// One message; ordered_json keeps key order (tool schemas print in given order).
using ChatMessage = nlohmann::ordered_json;

struct ChatTemplateOptions {
  jinja::RenderOptions render;  // e.g. a fixed clock for strftime_now
};

// A parsed chat template; parse once, apply per request. Thread-safe to apply.
class ChatTemplate {
 public:
  static Result<ChatTemplate> parse(const std::string& source);

  Result<std::string> apply(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                            bool add_generation_prompt, const nlohmann::ordered_json& extra_context,
                            const ChatTemplateOptions& options = {}) const;

 private:
  explicit ChatTemplate(jinja::Template t) : template_(std::move(t)) {}
  jinja::Template template_;
};

// The template `chat` and `serve` use for a model whose file carries none (no
// tokenizer.chat_template) and no --chat-template: ChatML, as llama.cpp falls back to.
extern const char* const kFallbackChatTemplate;

// The context object a chat template renders with (see above).
nlohmann::ordered_json chat_template_context(const nlohmann::ordered_json& messages,
                                             const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                             const nlohmann::ordered_json& extra_context);

// Parses and renders in one go. Errors read "chat template: line N: <message>".
Result<std::string> render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_context,
                                         const ChatTemplateOptions& options = {});

}  // namespace deltafin
