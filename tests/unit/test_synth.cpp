// deltafin synth --size: the expert count is chosen so that the written file comes
// within a few percent of the target.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "arch_names.h"
#include "core/thread_pool.h"
#include "synth/synth.h"

using namespace deltafin;

namespace {

SynthSpec preset(const std::string& name, const std::string& arch = "") {
  SynthSpec s;
  EXPECT_TRUE(synth_preset(name, arch, &s)) << name;
  return s;
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

}  // namespace

TEST(SynthSize, WrittenFileMeetsTarget) {
  ThreadPool pool(2);
  for (const char* arch : arch_names()) {
    SynthSpec s = preset("tiny", arch);
    const int before = s.n_expert;
    s.target_bytes = uint64_t(40) << 20;
    const std::string path = testing::TempDir() + "/synth_size_" + arch + ".gguf";
    SynthReport r;
    ASSERT_TRUE(synth_model(s, path, pool, &r).ok()) << arch;
    const double got = double(file_size(path)), want = double(s.target_bytes);
    EXPECT_NEAR(got / want, 1.0, 0.03) << arch << ": " << got << " bytes for a target of " << want;
    EXPECT_GT(r.n_expert, before) << arch;
    EXPECT_EQ(r.bytes, file_size(path));
    ::unlink(path.c_str());
  }
}

TEST(SynthSize, CountFitsGroupsAndCanShrink) {
  // kimi-k2-mini routes through expert groups: the count stays a multiple of them.
  SynthSpec k = preset("kimi-k2-mini");
  k.target_bytes = uint64_t(8) << 30;
  ASSERT_TRUE(fit_expert_count(&k).ok());
  EXPECT_GT(k.n_expert, 64);
  EXPECT_EQ(k.n_expert % std::max(k.n_group, 1), 0);
  // A target below the preset's size lowers the count, never below top-k.
  SynthSpec q = preset("qwen3-moe-mini");
  const int full = q.n_expert;
  q.target_bytes = uint64_t(300) << 20;
  ASSERT_TRUE(fit_expert_count(&q).ok());
  EXPECT_LT(q.n_expert, full);
  EXPECT_GE(q.n_expert, q.n_used);
}

TEST(SynthSize, TooSmallTargetIsAClearError) {
  SynthSpec q = preset("qwen3-moe-mini");
  q.target_bytes = uint64_t(1) << 20;
  Status st = fit_expert_count(&q);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("--size"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("smallest"), std::string::npos) << st.error().message;
}
