// Chat templates against the reference renderer (npm @huggingface/jinja):
//  - every real template in shared/templates x every conversation case of
//    tests/templates/conversations.json must render byte-exactly as the goldens in
//    tests/templates/expected/ (or fail where the reference fails);
//  - every construct snippet of tests/templates/snippets.json must match
//    tests/templates/expected/snippets.json.
// Goldens come from tests/templates/regen.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "jinja/jinja.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using namespace deltafin;

namespace {

const fs::path kTestDir = fs::path(DELTAFIN_SOURCE_DIR) / "tests" / "templates";
const fs::path kTemplateDir = fs::path(DELTAFIN_SHARED_DIR) / "templates";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

ordered_json load_json(const fs::path& p) { return ordered_json::parse(slurp(p)); }

// "2025-03-14T09:26:53Z" -> broken-down UTC time (the goldens render with TZ=UTC).
std::tm parse_iso_utc(const std::string& iso) {
  std::tm t{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s);
  t.tm_year = y - 1900;
  t.tm_mon = mo - 1;
  t.tm_mday = d;
  t.tm_hour = h;
  t.tm_min = mi;
  t.tm_sec = s;
  return t;
}

jinja::RenderOptions pinned_clock(const ordered_json& conv) {
  jinja::RenderOptions opt;
  std::tm now = parse_iso_utc(conv.at("now").get<std::string>());
  opt.now = [now] { return now; };
  return opt;
}

std::string strip_newlines(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The reference threw a JS TypeError from inside its own code (reading a property
// of undefined); our message says what went wrong instead, so only the failure
// itself must match.
bool is_js_internal_error(const std::string& msg) { return msg.rfind("Cannot read properties of undefined", 0) == 0; }

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kTemplateDir, ec))
    if (e.path().extension() == ".jinja") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> snippet_names() {
  std::vector<std::string> names;
  const ordered_json snippets = load_json(kTestDir / "snippets.json");
  for (const auto& [name, _] : snippets.items()) names.push_back(name);
  return names;
}

std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

}  // namespace

TEST(ChatTemplateGoldens, SharedTemplatesPresent) {
  ASSERT_TRUE(fs::exists(kTemplateDir)) << kTemplateDir;
  EXPECT_GE(template_names().size(), 60u);
  EXPECT_TRUE(fs::exists(kTestDir / "expected" / "snippets.json"));
}

class ChatTemplateGolden : public testing::TestWithParam<std::string> {};

// Renders one template with every conversation case, add_generation_prompt on and
// off, and compares byte-exactly with the reference's output.
TEST_P(ChatTemplateGolden, MatchesReference) {
  const std::string name = GetParam();
  const std::string source = slurp(kTemplateDir / (name + ".jinja"));
  const ordered_json conv = load_json(kTestDir / "conversations.json");
  ChatTemplateOptions opt;
  opt.render = pinned_clock(conv);

  auto parsed = ChatTemplate::parse(source);
  for (const auto& [case_name, c] : conv.at("cases").items()) {
    ordered_json extra = conv.at("context");
    for (const auto& [k, v] : c.at("extra").items()) extra[k] = v;
    for (bool gen : {true, false}) {
      const std::string stem = name + "." + case_name + (gen ? ".gen" : ".nogen");
      SCOPED_TRACE(stem);
      const fs::path ok_file = kTestDir / "expected" / (stem + ".txt");
      const fs::path err_file = kTestDir / "expected" / (stem + ".error.txt");
      ASSERT_TRUE(fs::exists(ok_file) || fs::exists(err_file))
          << "no golden for " << stem << "; run tests/templates/regen.sh";
      auto out = render_chat_template(source, c.at("messages"), c.at("tools"), gen, extra, opt);
      if (fs::exists(ok_file)) {
        ASSERT_TRUE(parsed.ok()) << parsed.error().message;
        ASSERT_TRUE(out.ok()) << out.error().message;
        EXPECT_EQ(*out, slurp(ok_file));
        // The parse-once API renders the same.
        auto again = parsed->apply(c.at("messages"), c.at("tools"), gen, extra, opt);
        ASSERT_TRUE(again.ok());
        EXPECT_EQ(*again, *out);
      } else {
        std::string want = strip_newlines(slurp(err_file));
        ASSERT_FALSE(out.ok()) << "the reference fails with \"" << want << "\" but we rendered:\n" << *out;
        if (!is_js_internal_error(want)) {
          EXPECT_NE(out.error().message.find(want), std::string::npos) << out.error().message;
        }
        EXPECT_EQ(out.error().message.rfind("chat template: ", 0), 0u) << out.error().message;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, ChatTemplateGolden, testing::ValuesIn(template_names()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ChatTemplateGolden);

class JinjaSnippet : public testing::TestWithParam<std::string> {};

// One construct snippet against the reference.
TEST_P(JinjaSnippet, MatchesReference) {
  // Where we knowingly differ: the reference prints a JS function's source text.
  static const std::map<std::string, std::string> kDiverges = {
      {"out_function", "printing a function fails instead of printing JavaScript source"},
  };
  const std::string name = GetParam();
  const ordered_json snippet = load_json(kTestDir / "snippets.json").at(name);
  const ordered_json expected = load_json(kTestDir / "expected" / "snippets.json").at(name);
  const ordered_json conv = load_json(kTestDir / "conversations.json");

  auto render = [&]() -> Result<std::string> {
    auto t = jinja::Template::parse(snippet.at("template").get<std::string>());
    if (!t) return t.error();
    return t->render(snippet.at("context"), pinned_clock(conv));
  };
  Result<std::string> out = render();

  SCOPED_TRACE(snippet.at("template").get<std::string>());
  if (kDiverges.count(name)) {
    EXPECT_FALSE(out.ok()) << kDiverges.at(name);
    return;
  }
  if (expected.contains("output")) {
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, expected.at("output").get<std::string>());
  } else {
    std::string want = expected.at("error").get<std::string>();
    ASSERT_FALSE(out.ok()) << "the reference fails with \"" << want << "\" but we rendered: " << *out;
    if (!is_js_internal_error(want)) {
      EXPECT_NE(out.error().message.find(want), std::string::npos) << out.error().message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, JinjaSnippet, testing::ValuesIn(snippet_names()), param_name);
