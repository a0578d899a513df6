// Unit tests of the Jinja engine and the chat-template API: error messages name
// the template line, unsupported constructs fail clearly, the render context is
// built as documented, and the JS value semantics the reference relies on.
// (Byte-exact agreement with the reference is in test_chat_template.cpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/chat_template.h"
#include "jinja/jinja.h"
#include "jinja/jinja_text.h"
#include "jinja/jinja_value.h"

using namespace deltafin;
using nlohmann::ordered_json;

namespace {

Result<std::string> render(const std::string& tmpl, const ordered_json& ctx = ordered_json::object()) {
  auto t = jinja::Template::parse(tmpl);
  if (!t) return t.error();
  return t->render(ctx);
}

std::string ok(const std::string& tmpl, const ordered_json& ctx = ordered_json::object()) {
  auto r = render(tmpl, ctx);
  EXPECT_TRUE(r.ok()) << tmpl << " -> " << r.error().message;
  return r.ok() ? *r : "";
}

std::string err(const std::string& tmpl, const ordered_json& ctx = ordered_json::object()) {
  auto r = render(tmpl, ctx);
  EXPECT_FALSE(r.ok()) << tmpl << " rendered " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.error().message;
}

}  // namespace

TEST(JinjaErrors, RuntimeErrorNamesLine) {
  EXPECT_EQ(err("a\nb\n{{ x | min }}", {{"x", {1}}}), "line 3: Unknown ArrayValue filter: min");
}

TEST(JinjaErrors, LineSurvivesTrimBlocks) {
  // trim_blocks removes the newlines after these tags; lines still count them.
  std::string t = "{% if true %}\n{% endif %}\n{% if true %}\n{{ [1] | min }}{% endif %}";
  EXPECT_EQ(err(t), "line 4: Unknown ArrayValue filter: min");
}

TEST(JinjaErrors, ErrorInsideMacroNamesBodyLine) {
  std::string t = "{% macro f() %}\n\n{{ raise_exception('deep') }}\n{% endmacro %}\n{{ f() }}";
  EXPECT_EQ(err(t), "line 3: deep");
}

TEST(JinjaErrors, RaiseExceptionMessage) {
  EXPECT_EQ(err("{% if true %}{{ raise_exception('System role not supported') }}{% endif %}"),
            "line 1: System role not supported");
}

TEST(JinjaErrors, ParseAndLexErrorsNameLine) {
  EXPECT_EQ(err("x\n\n{{ a ! b }}"), "line 3: Unexpected character: !");
  EXPECT_EQ(err("ok\n{% raw %}x{% endraw %}"), "line 2: Unknown statement type: raw");
  EXPECT_NE(err("{% if true %}\nx").find("line 2: Unexpected end of template: missing {% endif %}"),
            std::string::npos);
  EXPECT_NE(err("a {# never closed").find("Missing end of comment tag"), std::string::npos);
}

// Beyond the reference: Python's list.append() and pop() (Kimi K2's templates).
TEST(JinjaErrors, ListAppendAndPopAsPython) {
  EXPECT_EQ(ok("{% set l = [] %}{% set _ = l.append(1) %}{% set _ = l.append('a') %}{{ l | length }}{{ l[1] }}"),
            "2a");
  const ordered_json ns = {{"q", {"x", "y", "z"}}};
  EXPECT_EQ(ok("{{ q.pop(0) }}{{ q.pop() }}{{ q | length }}{{ q[0] }}", ns), "xz1y");
  EXPECT_EQ(ok("{% set n = namespace(ids=[]) %}{% set _ = n.ids.append(3) %}{{ n.ids[0] }}"), "3");
  EXPECT_NE(err("{% set l = [] %}{{ l.pop() }}").find("pop from empty list"), std::string::npos);
  EXPECT_NE(err("{% set l = [1] %}{{ l.pop(3) }}").find("out of range"), std::string::npos);
  EXPECT_NE(err("{% set l = [1] %}{% set _ = l.append() %}").find("exactly one"), std::string::npos);
}

TEST(JinjaErrors, UnsupportedConstructsFailClearly) {
  // Constructs the reference does not support fail instead of rendering something.
  EXPECT_NE(err("{{ '{}'.format(1) }}").find("not a function"), std::string::npos);
  EXPECT_NE(err("{{ 4 is divisibleby }}").find("Unknown test: divisibleby"), std::string::npos);
  EXPECT_NE(err("{% include 'x' %}").find("Unknown statement type: include"), std::string::npos);
  EXPECT_NE(err("{{ {'a': 1} | string }}").find("Unknown ObjectValue filter: string"), std::string::npos);
  EXPECT_NE(err("{{ [1, 2] | select('odd') | list }}").find("Unknown ArrayValue filter: select"), std::string::npos);
  EXPECT_NE(err("{{ x | from_json }}", {{"x", "{}"}}).find("Unknown StringValue filter: from_json"),
            std::string::npos);
  EXPECT_NE(err("{{ range }}").find("function"), std::string::npos);
  EXPECT_NE(err("{{ [] | first }}").find("undefined"), std::string::npos);
  EXPECT_NE(err("a{% break %}").find("outside of a loop"), std::string::npos);
}

TEST(JinjaErrors, ContextCannotRedeclareGlobals) {
  EXPECT_NE(err("{{ range }}", {{"range", 1}}).find("Variable already declared: range"), std::string::npos);
}

TEST(JinjaEngine, WhitespaceControl) {
  EXPECT_EQ(ok("{% if true %}\nA\n{% endif %}\nB\n"), "A\nB");
  EXPECT_EQ(ok("  {% if true %}\n  x\n  {% endif %}"), "  x\n");
  EXPECT_EQ(ok("a   {%- if true -%}   b   {%- endif -%}   c"), "abc");
  EXPECT_EQ(ok("x {{- ' y ' -}} \n z"), "x y z");
}

TEST(JinjaEngine, LoopsAndScopes) {
  EXPECT_EQ(ok("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
               {{"xs", {"a", "b"}}}),
            "1a,2b");
  // An iteration that hits continue/break drops its partial output (reference behaviour).
  EXPECT_EQ(ok("{% for x in [1, 2, 3] %}a{{ x }}{% if x == 2 %}{% continue %}{% endif %}b{% endfor %}"), "a1ba3b");
  EXPECT_EQ(ok("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(ok("{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "3");
}

TEST(JinjaEngine, MacrosAndCallBlocks) {
  EXPECT_EQ(ok("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}"), "1B12");
  EXPECT_EQ(ok("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(ok("{% filter upper %}abc{% endfilter %}"), "ABC");
}

TEST(JinjaEngine, ValueFormatting) {
  EXPECT_EQ(ok("{{ 1.0 }} {{ 2.5 }} {{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ none }}|{{ [1, 'a', none] }}"),
            "1.0 2.5 3 3.5 -1 |[1, \"a\", null]");
  EXPECT_EQ(ok("{{ x | tojson }}", {{"x", {{"b", 1}, {"a", {1.5, true, nullptr}}}}}), R"({"b": 1, "a": [1.5, true, null]})");
  EXPECT_EQ(ok("{{ x | tojson(indent=2) }}", {{"x", {{"a", {1}}}}}), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(ok("{{ 'é' | tojson }} {{ 'é' | tojson(ensure_ascii=true) }}"), "\"é\" \"\\u00e9\"");
}

TEST(JinjaEngine, TemplateIsReusable) {
  auto t = jinja::Template::parse("{{ a }}-{{ b | default('x') }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->render({{"a", 1}}).value(), "1-x");
  EXPECT_EQ(t->render({{"a", 2}, {"b", "y"}}).value(), "2-y");
}

TEST(JinjaEngine, StrftimeNowUsesClock) {
  auto t = jinja::Template::parse("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  jinja::RenderOptions opt;
  opt.now = [] {
    std::tm tm{};
    tm.tm_year = 124;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    return tm;
  };
  EXPECT_EQ(t->render(ordered_json::object(), opt).value(), "26 Jul 2024");
  auto live = t->render(ordered_json::object());  // system clock
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->size(), 11u) << *live;
}

TEST(JinjaText, NumberFormattingMatchesJavaScript) {
  using jinja::js_number_to_string;
  EXPECT_EQ(js_number_to_string(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(js_number_to_string(1e21), "1e+21");
  EXPECT_EQ(js_number_to_string(1e20), "100000000000000000000");
  EXPECT_EQ(js_number_to_string(1.5e-7), "1.5e-7");
  EXPECT_EQ(js_number_to_string(0.000001), "0.000001");
  EXPECT_EQ(js_number_to_string(-0.0), "0");
  EXPECT_EQ(js_number_to_string(12345678901234567890.0), "12345678901234567000");
  EXPECT_EQ(js_number_to_string(1.0 / 0.0), "Infinity");
}

TEST(JinjaText, CaseMappingMatchesJavaScript) {
  // Expected strings from node: s.toUpperCase() / s.toLowerCase() (ΐ uppercases to
  // three code points, written as bytes).
  const std::string s = "ǅǈǋǲ Ǎǎ ǞǸȢ ḀẠỳ ΣΑΣ ΣΑΣ. Σ aΣb ΑΣ1 ǉ ǌ ǳ ß ẞ ﬁ ŉ ǰ ΐ";
  EXPECT_EQ(jinja::js_to_upper(s), "ǄǇǊǱ ǍǍ ǞǸȢ ḀẠỲ ΣΑΣ ΣΑΣ. Σ AΣB ΑΣ1 Ǉ Ǌ Ǳ SS ẞ FI ʼN J̌ " "\xCE\x99\xCC\x88\xCC\x81");
  EXPECT_EQ(jinja::js_to_lower(s), "ǆǉǌǳ ǎǎ ǟǹȣ ḁạỳ σας σας. σ aσb ας1 ǉ ǌ ǳ ß ß ﬁ ŉ ǰ ΐ");
}

TEST(JinjaValue, LooseEqualityIsJavaScripts) {
  using jinja::Value;
  EXPECT_TRUE(jinja::loose_equals(Value::integer(1), Value::string("1")));
  EXPECT_TRUE(jinja::loose_equals(Value::null(), Value::undefined()));
  EXPECT_FALSE(jinja::loose_equals(Value::array({}), Value::array({})));  // identity
  Value a = Value::array({Value::integer(1)});
  EXPECT_TRUE(jinja::loose_equals(a, a));
  EXPECT_TRUE(jinja::loose_equals(a, Value::string("1")));
}

TEST(ChatTemplateApi, ContextIsBuiltAsDocumented) {
  const std::string t =
      "{{ tools is defined }}|{{ add_generation_prompt }}|{{ bos_token }}|{{ messages | length }}|"
      "{{ enable_thinking is defined }}";
  ordered_json msgs = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  auto r = render_chat_template(t, msgs, nullptr, true, {{"bos_token", "<s>"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "false|true|<s>|1|false");
  r = render_chat_template(t, msgs, ordered_json::array(), false, {{"add_generation_prompt", true}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "true|true||1|false");  // extra_context overrides
}

TEST(ChatTemplateApi, ToolSchemaKeyOrderIsKept) {
  ordered_json tool = ordered_json::parse(R"({"type": "function", "function": {"name": "f", "a": 1}})");
  auto r = render_chat_template("{{ tools[0] | tojson }}", ordered_json::array(), ordered_json::array({tool}), false,
                                nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, R"({"type": "function", "function": {"name": "f", "a": 1}})");
}

TEST(ChatTemplateApi, Errors) {
  auto r = render_chat_template("{{ x", ordered_json::array(), nullptr, false, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("chat template: line 1: ", 0), 0u) << r.error().message;
  r = render_chat_template("x", ordered_json::object(), nullptr, false, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("messages must be a JSON array"), std::string::npos);
}

TEST(ChatTemplateApi, ConcurrentApplyAndLongConversation) {
  const std::string t =
      "{%- for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% if m.tool_calls %}"
      "{{ m.tool_calls | tojson }}{% endif %}\n{%- endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
  auto ct = ChatTemplate::parse(t);
  ASSERT_TRUE(ct.ok());
  ordered_json msgs = ordered_json::array();
  for (int i = 0; i < 2000; ++i)
    msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", " message " + std::to_string(i) + " "}});
  auto start = std::chrono::steady_clock::now();
  auto ref = ct->apply(msgs, nullptr, true, nullptr);
  ASSERT_TRUE(ref.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  std::vector<std::thread> threads;
  std::vector<std::string> outs(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] { outs[i] = ct->apply(msgs, nullptr, true, nullptr).value(); });
  for (auto& th : threads) th.join();
  for (const auto& o : outs) EXPECT_EQ(o, *ref);
}
