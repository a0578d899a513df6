// Replies in the chat formats of Kimi K2, Kimi K3 (XTML) and DeepSeek V3.1/V3.2: what
// each real template renders from an assistant message (reasoning, content, tool
// calls) reads back into the same message, whole and streamed in pieces cut at every
// position; with the detokenizer showing the markers' control tokens.
#include <gtest/gtest.h>

#include <random>

#include "format/gguf.h"
#include "gen_wait.h"
#include "io/byte_source.h"
#include "chat/reply_parser.h"
#include "tiny_engine.h"
#include "shared_files.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

using namespace deltafin;
using json = nlohmann::ordered_json;

namespace {

const json kCalls = json::parse(R"([
    {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris \"Nord\" & Sud", "days": 2, "hourly": true}}},
    {"id": "b", "type": "function", "function": {"name": "now", "arguments": {}}}])");
const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {}}},
                                   {"type": "function", "function": {"name": "now", "parameters": {}}}])");

struct Rendered {
  std::string prompt;  // up to the generation prompt
  std::string reply;   // what the model writes after it
};

// The conversation up to the assistant's turn (with the generation prompt), and the
// text the template renders for `assistant` after it, up to `end_of_turn`. Where the
// template renders a past turn unlike the generation prompt (DeepSeek V3.2 closes the
// think block there), the reply starts after the last `opens` instead.
Rendered render(const std::string& name, const json& assistant, const json& extra, const std::string& end_of_turn,
                const std::string& opens = {}) {
  auto t = ChatTemplate::parse(read_template(name));
  EXPECT_TRUE(t.ok()) << t.error().message;
  const json user = json{{"role", "user"}, {"content", "Weather in Paris?"}};
  auto prompt = t->apply(json::array({user}), kTools, true, extra);
  auto full = t->apply(json::array({user, assistant}), kTools, false, extra);
  EXPECT_TRUE(prompt.ok() && full.ok());
  Rendered r{*prompt, *full};
  if (!opens.empty()) {
    r.reply.erase(0, r.reply.rfind(opens) + opens.size());
  } else {
    EXPECT_EQ(r.reply.compare(0, r.prompt.size(), r.prompt), 0) << name << ": the history does not extend the prompt\n"
                                                                 << r.prompt << "\n---\n" << r.reply;
    r.reply.erase(0, r.prompt.size());
  }
  const size_t end = r.reply.rfind(end_of_turn);
  if (end != std::string::npos) r.reply.resize(end);
  return r;
}

// A reply read whole.
struct Read {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// Feeds `text` in pieces of `every` bytes.
Read read(const ReplyFormat& f, const std::string& text, size_t every) {
  ReplyParser p(f);
  Read all;
  auto add = [&](const ReplyPiece& t) {
    all.reasoning += t.reasoning;
    all.content += t.content;
    add_deltas(&all.calls, t.calls);
  };
  for (size_t i = 0; i < text.size(); i += every) add(p.push(text.substr(i, every)));
  add(p.finish());
  return all;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \n");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \n") - a + 1);
}

// The reply read back at every cut gives `reasoning`, `content` and kCalls.
void expect_reads_back(const ReplyFormat& f, const std::string& reply, const std::string& reasoning,
                       const std::string& content) {
  for (size_t every = 1; every <= reply.size(); ++every) {
    const Read got = read(f, reply, every);
    ASSERT_EQ(got.calls.size(), 2u) << "pieces of " << every << "\n" << reply;
    EXPECT_EQ(got.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(got.calls[0].arguments), kCalls[0]["function"]["arguments"]) << got.calls[0].arguments;
    EXPECT_EQ(got.calls[1].name, "now");
    EXPECT_EQ(got.calls[1].arguments, "{}");
    EXPECT_EQ(trim(got.reasoning), reasoning) << "pieces of " << every;
    EXPECT_EQ(trim(got.content), content) << "pieces of " << every;
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace

TEST(ReplyFormats, FormatOfTheTemplate) {
  EXPECT_EQ(tool_format_of(read_template("Kimi-K3.jinja")), ToolFormat::Xtml);
  EXPECT_EQ(tool_format_of(read_template("Kimi-K2-Instruct.jinja")), ToolFormat::KimiK2);
  EXPECT_EQ(tool_format_of(read_template("Kimi-K2-Thinking.jinja")), ToolFormat::KimiK2);
  EXPECT_EQ(tool_format_of(read_template("moonshotai-Kimi-K2.jinja")), ToolFormat::KimiK2);
  EXPECT_EQ(tool_format_of(read_template("deepseek-ai-DeepSeek-V3.1.jinja")), ToolFormat::DeepSeek);
  EXPECT_EQ(tool_format_of(read_template("deepseek-ai-DeepSeek-V3.2.jinja")), ToolFormat::Dsml);
  EXPECT_EQ(tool_format_of(read_template("deepseek-ai-DeepSeek-V4.jinja")), ToolFormat::Dsml);
  EXPECT_EQ(tool_format_of(read_template("Qwen-Qwen3-0.6B.jinja")), ToolFormat::Hermes);
  EXPECT_EQ(tool_format_of(read_template("Qwen3-Coder.jinja")), ToolFormat::QwenXml);
}

TEST(ReplyFormats, KimiK3ThinkingContentAndCalls) {
  const json assistant{{"role", "assistant"}, {"reasoning_content", "The user wants weather."},
                       {"content", "Let me look."}, {"tool_calls", kCalls}};
  const Rendered r = render("Kimi-K3.jinja", assistant, json{{"thinking", true}}, "<|end_of_msg|>");
  ReplyFormat f;
  f.xtml = true;
  f.think = true;
  f.xtml_open = xtml_open_tags(r.prompt);
  ASSERT_EQ(f.xtml_open, (std::vector<std::string>{"message", "think"})) << r.prompt;
  expect_reads_back(f, r.reply, "The user wants weather.", "Let me look.");
  // Without reasoning kept apart, the thinking is content.
  f.think = false;
  const Read all = read(f, r.reply, r.reply.size());
  EXPECT_EQ(all.reasoning, "");
  EXPECT_NE(all.content.find("The user wants weather."), std::string::npos);
}

TEST(ReplyFormats, KimiK3WithoutThinking) {
  const json assistant{{"role", "assistant"}, {"content", "Sunny."}};
  const Rendered r = render("Kimi-K3.jinja", assistant, json{{"thinking", false}}, "<|end_of_msg|>");
  ReplyFormat f;
  f.xtml = true;
  f.think = true;
  f.xtml_open = xtml_open_tags(r.prompt);
  ASSERT_EQ(f.xtml_open, (std::vector<std::string>{"message", "response"})) << r.prompt;
  for (size_t every = 1; every <= r.reply.size(); ++every) {
    const Read got = read(f, r.reply, every);
    EXPECT_EQ(got.content, "Sunny.") << r.reply;
    EXPECT_EQ(got.reasoning, "");
    EXPECT_TRUE(got.calls.empty());
  }
}

// Each format's tool-call turn, as its template renders it, reads back. (Where the
// template renders a past turn unlike its generation prompt, the reply starts after
// the last `opens`.)
TEST(ReplyFormats, ToolCallTurnsReadBack) {
  struct Case {
    const char* tmpl;
    ToolFormat format;
    const char* end_of_turn;
    const char* opens;
  };
  const Case cases[] = {
      {"Kimi-K2-Instruct.jinja", ToolFormat::KimiK2, "<|im_end|>", ""},
      {"moonshotai-Kimi-K2.jinja", ToolFormat::KimiK2, "<|im_end|>", ""},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolFormat::DeepSeek, "<｜end▁of▁sentence｜>", ""},
      {"deepseek-ai-DeepSeek-V3.2.jinja", ToolFormat::Dsml, "<｜end▁of▁sentence｜>", "</think>"},
      {"Qwen3-Coder.jinja", ToolFormat::QwenXml, "<|im_end|>", ""},
  };
  const json assistant{{"role", "assistant"}, {"content", "Let me look."}, {"tool_calls", kCalls}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tmpl);
    const Rendered r = render(c.tmpl, assistant, json::object(), c.end_of_turn, c.opens);
    ReplyFormat f;
    f.tools = c.format;
    expect_reads_back(f, r.reply, "", "Let me look.");
  }
}

// The markers reach the parser only if the detokenizer shows their control tokens.
TEST(ReplyFormats, DecoderShowsTheListedControlTokens) {
  auto src = open_file_source(std::string(DELTAFIN_SHARED_DIR) + "/vocab/ggml-vocab-qwen2.gguf");
  ASSERT_TRUE(src.ok());
  auto file = parse_gguf(**src);
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const int32_t start = tok->vocab().find("<|im_start|>"), end = tok->vocab().find("<|im_end|>");
  ASSERT_TRUE(tok->is_control(start) && tok->is_control(end));
  const std::vector<int32_t> ids = tok->encode("<|im_start|>hi<|im_end|>", false, true);
  ASSERT_EQ(ids.front(), start);
  auto decode = [&](std::vector<int32_t> shown) {
    StreamDecoder d(*tok, false, std::move(shown));
    std::string out;
    for (int32_t id : ids) out += d.push(id);
    return out + d.flush();
  };
  EXPECT_EQ(decode({}), "hi");
  EXPECT_EQ(decode({start}), "<|im_start|>hi");
  EXPECT_EQ(decode({start, end}), "<|im_start|>hi<|im_end|>");
}

// GenRequest::shown_tokens reaches the reply's text (the tiny model's only control
// token is its end of text, forced here with a logit bias).
TEST(ReplyFormats, SchedulerShowsTheRequestsMarkers) {
  std::unique_ptr<Engine> engine;
  std::optional<Tokenizer> tok;
  ASSERT_NO_FATAL_FAILURE(open_tiny(1, &engine, &tok));
  const int32_t eos = tok->eos();
  ASSERT_TRUE(tok->is_control(eos));
  SchedulerOptions so;
  so.n_ctx = 64;
  Scheduler sched(engine->model(), *tok, so);
  std::string texts[2];
  for (int shown = 0; shown < 2; ++shown) {
    GenRequest r = greedy_request(tok->encode("one two", true, true), 3);
    r.sampling.logit_bias[eos] = 100.0f;
    if (shown) r.shown_tokens = {eos};
    SubmitError err;
    std::string why;
    auto h = sched.submit(std::move(r), &err, &why);
    ASSERT_TRUE(h) << why;
    wait_done(*h, &texts[shown]);
  }
  EXPECT_EQ(texts[0], "");
  EXPECT_EQ(texts[1], tok->text(eos) + tok->text(eos) + tok->text(eos));
}

// Qwen3-Coder's values are text: the tool's schema says which are strings.
TEST(ReplyFormats, Qwen3CoderValuesTypedByTheSchema) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"code": {"type": "string"}, "n": {"type": "integer"}, "on": {"type": "boolean"},
                     "tags": {"type": "array"}}}}}])");
  const std::string reply =
      "ok\n<tool_call>\n<function=f>\n<parameter=code>\n42\n</parameter>\n<parameter=n>\n42\n</parameter>\n"
      "<parameter=on>\nTrue\n</parameter>\n<parameter=tags>\n[\"a\"]\n</parameter>\n<parameter=other>\n7\n</parameter>\n"
      "<parameter=text>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>";
  std::string content;
  std::vector<ToolCall> calls;
  ASSERT_TRUE(parse_tool_calls(ToolFormat::QwenXml, reply, &content, &calls, &tools));
  EXPECT_EQ(content, "ok");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(json::parse(calls[0].arguments),
            json::parse(R"({"code": "42", "n": 42, "on": true, "tags": ["a"], "other": 7, "text": "two\nlines"})"));
  // Without the schema, what parses as JSON is JSON.
  ASSERT_TRUE(parse_tool_calls(ToolFormat::QwenXml, reply, &content, &calls));
  EXPECT_EQ(json::parse(calls[0].arguments)["code"], 42);
  // Malformed: no function (not a call); cut inside a parameter (the call as read, the
  // rest as written).
  EXPECT_FALSE(parse_tool_calls(ToolFormat::QwenXml, "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", &content, &calls));
  ASSERT_TRUE(parse_tool_calls(ToolFormat::QwenXml, "<tool_call>\n<function=f>\n<parameter=a>\n1", &content, &calls));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].arguments, "{}");
  EXPECT_EQ(content, "<parameter=a>\n1");
}

// Whatever the model writes, where the stream is cut changes nothing: random replies
// made of each format's markers, tag names, JSON pieces and words read the same whole
// and in pieces of 1..7 bytes (and nothing crashes on malformed structure).
TEST(ReplyFormats, RandomRepliesReadTheSameAtEveryCut) {
  const std::vector<std::string> common = {" ", "\n", "a", "word", "{", "}", "\"", ":", ",", "1", "[", "]",
                                           "<think>", "</think>", "<", ">", "=", "x\"y", "é", "true"};
  const std::vector<std::pair<ToolFormat, std::vector<std::string>>> formats = {
      {ToolFormat::Hermes, {"<tool_call>", "</tool_call>", "\"name\"", "\"arguments\"", "{\"name\": \"f\"}"}},
      {ToolFormat::QwenXml, {"<tool_call>", "</tool_call>", "<function=f>", "</function>", "<parameter=k>",
                             "</parameter>"}},
      {ToolFormat::KimiK2, {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                            "<|tool_call_argument_begin|>", "<|tool_call_end|>", "functions.f:0"}},
      {ToolFormat::DeepSeek, {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                              "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"}},
      {ToolFormat::Dsml, {"<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "<｜DSML｜invoke name=\"f\">",
                          "</｜DSML｜invoke>", "<｜DSML｜parameter name=\"k\" string=\"true\">", "</｜DSML｜parameter>"}},
      {ToolFormat::Xtml, {"<|open|>", "<|close|>", "<|sep|>", "think", "response", "tools", "call tool=\"f\"",
                          "argument key=\"k\" type=\"number\"", "json type=\"object\"", "message", "<|open|>call",
                          "<|"}},
  };
  std::mt19937 rng(7);
  for (const auto& [fmt, markers] : formats) {
    ReplyFormat f;
    f.think = true;
    if (fmt == ToolFormat::Xtml) f.xtml = true, f.xtml_open = {"message", "think"};
    else f.tools = fmt;
    for (int n = 0; n < 2000; ++n) {
      std::string reply;
      const int parts = int(rng() % 40);
      for (int i = 0; i < parts; ++i)
        reply += rng() % 2 ? markers[rng() % markers.size()] : common[rng() % common.size()];
      const Read whole = read(f, reply, std::max<size_t>(reply.size(), 1));
      for (size_t every = 1; every <= 7; ++every) {
        const Read cut = read(f, reply, every);
        ASSERT_EQ(cut.reasoning, whole.reasoning) << int(fmt) << " pieces of " << every << ": " << reply;
        ASSERT_EQ(cut.content, whole.content) << int(fmt) << " pieces of " << every << ": " << reply;
        ASSERT_EQ(cut.calls.size(), whole.calls.size()) << int(fmt) << ": " << reply;
        for (size_t i = 0; i < cut.calls.size(); ++i) {
          EXPECT_EQ(cut.calls[i].name, whole.calls[i].name);
          EXPECT_EQ(cut.calls[i].arguments, whole.calls[i].arguments);
        }
      }
    }
  }
}
