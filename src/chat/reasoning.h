// Keeps a thinking model's reasoning apart from its answer: text between <think> and
// </think> (the format's row's think_open and think_close, formats.h) goes to reasoning_content, the rest to content (OpenAI-style responses as
// DeepSeek's and llama.cpp's servers send them). Works on streamed pieces: a tag split
// across pieces is held back until it is complete.
//
// The reasoning starts either with a <think> the model writes first (leading
// whitespace allowed) or, when the prompt already ends inside an open <think> (the
// chat template opened it), at the first generated character. Single-threaded.
#pragma once
#include <string>
#include <string_view>

namespace deltafin {

// The tags of reasoning in the formats that write it as text (formats.h's rows).
inline constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

struct SplitText {
  std::string reasoning, content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningSplitter {
 public:
  // enabled = false: everything is content. open, close: the format's tags.
  ReasoningSplitter(bool enabled, bool starts_inside, std::string_view open = kThinkOpen,
                    std::string_view close = kThinkClose);
  SplitText push(const std::string& text);
  SplitText finish();  // what is held back

 private:
  enum class Mode { Start, Reasoning, Content };
  Mode mode_;
  bool trim_content_ = false;  // drop whitespace at the start of the answer
  std::string open_, close_;
  std::string buf_;
};

// Length of the longest suffix of `s` that is a proper prefix of `tag`: what a
// streamed piece must hold back because a tag may begin there.
size_t partial_tag(std::string_view s, std::string_view tag);

// True when `prompt` ends inside an unclosed <think> (after its last </think>, if any).
bool prompt_opens_think(const std::string& prompt);

}  // namespace deltafin
