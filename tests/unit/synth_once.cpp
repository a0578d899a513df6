#include "synth_once.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace deltafin {

namespace {
// The directories test_dir made, removed when the process ends with every test
// passed (kept after a failure, to look at); each ctest test is a process of its own,
// so without this every run left its models behind in the temporary directory.
struct MadeDirs {
  std::mutex mu;
  std::set<std::string> dirs;
  ~MadeDirs() {
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ec;
    for (const std::string& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
MadeDirs& made_dirs() {
  static MadeDirs m;
  return m;
}
}  // namespace

std::string test_dir(const std::string& suite) {
  const std::string d = ::testing::TempDir() + "deltafin_test_" + suite + "_" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  MadeDirs& m = made_dirs();
  std::lock_guard<std::mutex> lk(m.mu);
  m.dirs.insert(d);
  return d;
}

std::string synth_once(const std::string& suite, const std::string& key, const SynthSpec& s, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::string, std::string>> made;  // path, error
  std::lock_guard<std::mutex> lk(mu);
  const std::string id = suite + "/" + key;
  auto it = made.find(id);
  if (it == made.end()) {
    std::string path = test_dir(suite) + "/" + key + ".gguf", err;
    ThreadPool pool(2);
    SynthReport r;
    Status st = synth_model(s, path, pool, &r);
    if (!st.ok()) {
      err = st.error().message;
      path.clear();
    }
    it = made.emplace(id, std::make_pair(path, err)).first;
  }
  if (why) *why = it->second.second;
  return it->second.first;
}

}  // namespace deltafin
