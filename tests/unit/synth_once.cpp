#include "synth_once.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

namespace deltafin {

std::string test_dir(const std::string& suite) {
  const std::string d = ::testing::TempDir() + "deltafin_test_" + suite + "_" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
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
