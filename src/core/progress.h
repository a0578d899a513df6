// Progress of a long transfer (core download, pull, warm), reported by library code
// and drawn by the command line (a bar on stderr). add() may be called from any
// thread; the object is destroyed when the transfer ends.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace deltafin {

class Progress {
 public:
  virtual ~Progress() = default;
  virtual void add(uint64_t bytes) = 0;
};

// Makes a Progress for `what` (a short label) of `total` bytes; may return null.
using ProgressFactory = std::function<std::unique_ptr<Progress>(const std::string& what, uint64_t total)>;

}  // namespace deltafin
