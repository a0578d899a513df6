// hf://OWNER/REPO[:QUANT]: which file of a repository listing a location means, and
// how hf:// locations are parsed (quantization tag, token from the login tools' file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "remote/hf_repo.h"
#include "remote/location.h"

using namespace deltafin;

namespace {

// unsloth-style listing: files per quantization, a split set in a folder, a vision projector.
const std::vector<std::string> kListing = {
    ".gitattributes",
    "README.md",
    "Model-Q4_K_M.gguf",
    "Model-Q4_K_S.gguf",
    "Model-Q8_0.gguf",
    "Model-IQ1_S.gguf",
    "Model-UD-IQ1_S.gguf",
    "Model-UD-Q2_K_XL.gguf",
    "mmproj-F16.gguf",
    "UD-IQ2_XXS/Model-UD-IQ2_XXS-00002-of-00003.gguf",
    "UD-IQ2_XXS/Model-UD-IQ2_XXS-00001-of-00003.gguf",
    "UD-IQ2_XXS/Model-UD-IQ2_XXS-00003-of-00003.gguf",
    "BF16/Model-BF16-00001-of-00002.gguf",
    "BF16/Model-BF16-00002-of-00002.gguf",
    "Model-BF16.gguf",
};

std::string choose(const std::vector<std::string>& files, const std::string& quant) {
  auto r = choose_hf_file(files, quant, "hf://acme/model:" + quant);
  return r.ok() ? r.value() : "error: " + r.error().message;
}

}  // namespace

TEST(HfRepo, QuantTagPicksItsFileCaseInsensitively) {
  EXPECT_EQ(choose(kListing, "Q4_K_M"), "Model-Q4_K_M.gguf");
  EXPECT_EQ(choose(kListing, "q4_k_m"), "Model-Q4_K_M.gguf");
  EXPECT_EQ(choose(kListing, "Q8_0"), "Model-Q8_0.gguf");
  EXPECT_EQ(choose(kListing, "UD-Q2_K_XL"), "Model-UD-Q2_K_XL.gguf");
}

TEST(HfRepo, SplitSetsCountOnceAsTheirFirstPart) {
  EXPECT_EQ(choose(kListing, "UD-IQ2_XXS"), "UD-IQ2_XXS/Model-UD-IQ2_XXS-00001-of-00003.gguf");
  // The tag alone, inside UD-: the only match, so taken.
  EXPECT_EQ(choose(kListing, "IQ2_XXS"), "UD-IQ2_XXS/Model-UD-IQ2_XXS-00001-of-00003.gguf");
}

TEST(HfRepo, WholeWordsOnlyAndUdVariantsRankBelowThePlainTag) {
  // Q4_K is neither Q4_K_M nor Q4_K_S; Q2_K is not Q2_K_XL.
  EXPECT_NE(choose(kListing, "Q4_K").find("no GGUF model in the repository matches 'Q4_K'"), std::string::npos);
  EXPECT_NE(choose(kListing, "Q2_K").find("no GGUF model"), std::string::npos);
  EXPECT_EQ(choose(kListing, "IQ1_S"), "Model-IQ1_S.gguf");
  EXPECT_EQ(choose(kListing, "UD-IQ1_S"), "Model-UD-IQ1_S.gguf");
}

TEST(HfRepo, AFolderNamedAfterTheTagWinsElseAmbiguityListsTheCandidates) {
  EXPECT_EQ(choose(kListing, "BF16"), "BF16/Model-BF16-00001-of-00002.gguf");
  const std::vector<std::string> two = {"a/Model-Q4_K_M.gguf", "b/Model-Q4_K_M.gguf"};
  const std::string e = choose(two, "Q4_K_M");
  EXPECT_NE(e.find("matches 2 GGUF models"), std::string::npos) << e;
  EXPECT_NE(e.find("a/Model-Q4_K_M.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("b/Model-Q4_K_M.gguf"), std::string::npos) << e;
}

TEST(HfRepo, NoTagTakesTheOnlyModel) {
  EXPECT_EQ(choose({"README.md", "tiny.gguf", "mmproj-tiny-f16.gguf"}, ""), "tiny.gguf");
  EXPECT_EQ(choose({"x-00002-of-00002.gguf", "x-00001-of-00002.gguf"}, ""), "x-00001-of-00002.gguf");
  const std::string several = choose(kListing, "");
  EXPECT_NE(several.find("name one with :QUANT"), std::string::npos) << several;
  EXPECT_NE(several.find("Model-Q8_0.gguf"), std::string::npos) << several;
  EXPECT_NE(choose({"README.md"}, "").find("no .gguf model file"), std::string::npos);
  EXPECT_NE(choose({"y-00002-of-00002.gguf"}, "").find("no first part"), std::string::npos);
}

TEST(HfRepo, LocationsWithAQuantOrNoFile) {
  auto a = parse_model_location("hf://acme/model:Q4_K_M", {});
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->repo, "acme/model");
  EXPECT_EQ(a->quant, "Q4_K_M");
  EXPECT_EQ(a->revision, "main");
  EXPECT_TRUE(a->file.empty());
  EXPECT_TRUE(a->url.empty());
  auto b = parse_model_location("hf://acme/model@v2:UD-IQ1_S", {});
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->repo, "acme/model");
  EXPECT_EQ(b->revision, "v2");
  EXPECT_EQ(b->quant, "UD-IQ1_S");
  auto c = parse_model_location("hf://acme/model", {});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->quant.empty() && c->file.empty());
  auto d = parse_model_location("hf://acme/model/sub/f.gguf", {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->file, "sub/f.gguf");
  EXPECT_FALSE(parse_model_location("hf://acme/model:", {}).ok());
  EXPECT_FALSE(parse_model_location("hf://acme", {}).ok());
  EXPECT_FALSE(parse_model_location("hf://acme/model/", {}).ok());
}

TEST(HfRepo, TokenFromHfTokenElseTheLoginToolsFile) {
  const std::string dir = ::testing::TempDir() + "deltafin_hf_home_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  std::ofstream(dir + "/token") << "hf_from_file\n";
  // What tools/environment.cpp makes of HF_HOME=dir and no HF_TOKEN, then HF_TOKEN set.
  Environment env;
  env.hf_token_path = dir + "/token";
  auto a = parse_model_location("hf://acme/model/f.gguf", env);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->token, "hf_from_file");
  EXPECT_EQ(a->token_source, dir + "/token");
  env.hf_token = "hf_from_env";
  auto b = parse_model_location("hf://acme/model/f.gguf", env);
  EXPECT_EQ(b->token, "hf_from_env");
  EXPECT_EQ(b->token_source, "HF_TOKEN");
  env.hf_token.clear();
  env.hf_token_path = dir + "/nowhere/token";
  auto c = parse_model_location("hf://acme/model/f.gguf", env);
  EXPECT_TRUE(c->token.empty());
  // The hint for a refusal says where the token came from, never the token.
  auto hint = hf_access_hint(*a, 401);
  EXPECT_NE(hint.find("accept its licence"), std::string::npos) << hint;
  EXPECT_NE(hint.find(dir + "/token"), std::string::npos) << hint;
  EXPECT_EQ(hint.find("hf_from_file"), std::string::npos) << hint;
  EXPECT_NE(hf_access_hint(*c, 401).find("no token was sent"), std::string::npos);
  std::remove((dir + "/token").c_str());
  ::rmdir(dir.c_str());
}
