// The chat-format table (chat/formats.h), row by row: each row is found again from a
// real chat template that teaches it, and a reply written with the row's own markers
// (reasoning, content, a call with a string and a number argument) reads back through
// ReplyParser, whole and cut at every byte. A new row fails here until its template
// is named below.
#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <set>

#include "chat/formats.h"
#include "chat/reply_parser.h"
#include "shared_files.h"

using namespace deltafin;
using json = nlohmann::ordered_json;

namespace {

// A template in ../shared/templates that teaches each row.
const std::map<std::string_view, std::string> kTemplates = {
    {"xtml", "Kimi-K3.jinja"},
    {"kimi_k2", "Kimi-K2-Instruct.jinja"},
    {"dsml", "deepseek-ai-DeepSeek-V3.2.jinja"},
    {"deepseek", "deepseek-ai-DeepSeek-V3.1.jinja"},
    {"qwen_xml", "Qwen3-Coder.jinja"},
    {"hermes", "Qwen-Qwen3-0.6B.jinja"},
    {"none", "meta-llama-Llama-3.1-8B-Instruct.jinja"},
};

std::string fill(std::string t, std::string_view key, const std::string& value) {
  if (size_t at = t.find(key); at != std::string::npos) t.replace(at, key.size(), value);
  return t;
}

// One call of get_weather(city: "Paris", days: 2), written with the row's markers.
std::string call_text(const ChatFormat& f) {
  const CallWriting& w = *f.forced;
  const std::string name = w.name ? w.name("get_weather") : "get_weather";
  const int index = w.first_index ? w.first_index("") : 0;
  std::string args;
  if (!w.params) {
    args = R"({"city": "Paris", "days": 2})";
  } else if (f.syntax == CallSyntax::DsmlParams) {
    for (auto [k, v, str] : {std::tuple{"city", "Paris", "true"}, std::tuple{"days", "2", "false"}})
      args += std::string(f.param_open) + k + std::string(f.param_key_end) + " string=\"" + str + "\">" + v +
              std::string(f.param_close) + "\n";
  } else {
    for (auto [k, v] : {std::pair{"city", "Paris"}, std::pair{"days", "2"}})
      args += std::string(f.param_open) + k + std::string(f.param_key_end) + "\n" + v + "\n" +
              std::string(f.param_close) + "\n";
  }
  return std::string(w.begin) + fill(fill(std::string(w.call_head), "{index}", std::to_string(index)), "{name}", name) +
         args + std::string(w.call_tail) + std::string(w.close);
}

struct Read {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

Read read(const ReplyFormat& rf, const std::string& text, size_t cut) {
  ReplyParser p(rf);
  Read r;
  auto add = [&](const ReplyPiece& piece) {
    r.reasoning += piece.reasoning;
    r.content += piece.content;
    add_deltas(&r.calls, piece.calls);
  };
  add(p.push(text.substr(0, cut)));
  add(p.push(text.substr(cut)));
  add(p.finish());
  return r;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \n");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \n") - a + 1);
}

}  // namespace

TEST(ChatFormats, EachRowDetectsItsOwnTemplate) {
  std::set<ToolFormat> ids;
  std::set<std::string_view> names;
  for (const ChatFormat& f : chat_formats()) {
    SCOPED_TRACE(std::string(f.name));
    EXPECT_TRUE(ids.insert(f.id).second) << "two rows for one format";
    EXPECT_TRUE(names.insert(f.name).second) << "two rows of one name";
    EXPECT_EQ(&chat_format(f.id), &f);
    auto t = kTemplates.find(f.name);
    ASSERT_NE(t, kTemplates.end()) << "name a template that teaches the format in kTemplates";
    const std::string src = read_template(t->second);
    if (src.empty()) GTEST_SKIP() << "no " << t->second << " in the shared templates directory";
    EXPECT_EQ(chat_format_of(src).name, f.name) << t->second;
    EXPECT_EQ(tool_format_of(src), f.id);
  }
  EXPECT_EQ(chat_formats().back().id, ToolFormat::None) << "None comes last: it detects every template";
}

TEST(ChatFormats, EachRowReadsAReplyInItsOwnMarkers) {
  for (const ChatFormat& f : chat_formats()) {
    SCOPED_TRACE(std::string(f.name));
    ReplyFormat rf;
    rf.think = true;
    rf.tools = f.id;
    rf.xtml = f.syntax == CallSyntax::Xtml;
    if (rf.xtml) rf.xtml_open = {"message"};
    // Every marker the detokenizer must show is one the row's calls are written with.
    const std::string call = f.forced ? call_text(f) : "";
    for (std::string_view m : f.shown) EXPECT_NE(call.find(m), std::string::npos) << m;
    const std::string text = std::string(f.think_open) + "Rain is likely." + std::string(f.think_close) +
                             (rf.xtml ? "<|open|>response<|sep|>Let me look.<|close|>response<|sep|>" : "Let me look.\n") +
                             call;
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      const Read r = read(rf, text, cut);
      ASSERT_EQ(r.reasoning, "Rain is likely.") << "cut at " << cut;
      if (!f.forced) {  // calls are not read: the reply is content
        ASSERT_EQ(r.content, "Let me look.\n") << "cut at " << cut;
        ASSERT_TRUE(r.calls.empty());
        continue;
      }
      ASSERT_EQ(trim(r.content), "Let me look.") << "cut at " << cut;
      ASSERT_EQ(r.calls.size(), 1u) << "cut at " << cut;
      EXPECT_EQ(r.calls[0].name, "get_weather");
      EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city": "Paris", "days": 2})"))
          << r.calls[0].arguments;
    }
  }
}
