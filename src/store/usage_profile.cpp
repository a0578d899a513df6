#include "store/usage_profile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "core/log.h"

namespace deltafin {

namespace {

void make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
}

}  // namespace

std::string usage_profile_identity(const ExpertIndex& ix) {
  return fmt::format("model {} {} {}", ix.n_moe_layers(), ix.n_keys(), ix.expert_bytes());
}

std::vector<double> load_usage_profile(const std::string& path, const ExpertIndex& ix) {
  std::ifstream f(path);
  if (!f) return {};  // first run
  std::string magic, id;
  std::getline(f, magic);
  std::getline(f, id);
  if (magic != "deltafin-expert-profile 1" || id != usage_profile_identity(ix)) {
    DF_LOG_WARN("ignoring the expert usage profile '{}': it was written for another model", path);
    return {};
  }
  std::vector<double> counts(size_t(ix.n_keys()), 0.0);
  int layer = 0, expert = 0;
  double count = 0;
  while (f >> layer >> expert >> count) {
    const int moe = ix.moe_index(layer);
    if (moe < 0 || expert < 0 || expert >= ix.n_expert(moe) || !(count > 0)) continue;
    counts[size_t(ix.key(moe, expert))] = count;
  }
  return counts;
}

Status save_usage_profile(const std::string& path, const ExpertIndex& ix, std::vector<double> counts) {
  double max_count = 0;
  for (double c : counts) max_count = std::max(max_count, c);
  // Keep the numbers small and let old habits fade: halve when they grow large.
  while (max_count > 1e9) {
    for (double& c : counts) c *= 0.5;
    max_count *= 0.5;
  }
  if (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) make_dirs(path.substr(0, slash));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return make_error("cannot write the expert usage profile '{}'", tmp);
    f << "deltafin-expert-profile 1\n" << usage_profile_identity(ix) << "\n";
    for (int k = 0; k < int(counts.size()); ++k) {
      if (counts[size_t(k)] <= 0) continue;
      const int moe = ix.key_moe(k);
      f << ix.model_layer(moe) << ' ' << (k - ix.key(moe, 0)) << ' ' << counts[size_t(k)] << '\n';
    }
    if (!f) return make_error("cannot write the expert usage profile '{}'", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return make_error("cannot write the expert usage profile '{}'", path);
  return {};
}

}  // namespace deltafin
