// Files of ../shared (DELTAFIN_SHARED_DIR) in tests: chat templates and vocabularies.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace deltafin {

// The text of shared/templates/NAME ("" when missing: the caller's checks fail).
inline std::string read_template(const std::string& name) {
  std::ifstream f(std::filesystem::path(DELTAFIN_SHARED_DIR) / "templates" / name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace deltafin
