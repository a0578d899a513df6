// The names of every supported architecture (model/registry.h), for the tests that
// run on each: a new architecture's row brings it into all of them.
#pragma once
#include <initializer_list>
#include <vector>

#include "model/registry.h"

namespace deltafin {

// Registry order, then `extra` (variants a test adds, e.g. "deepseek2-legacy").
inline std::vector<const char*> arch_names(std::initializer_list<const char*> extra = {}) {
  std::vector<const char*> v;
  for (const Architecture& a : architectures()) v.push_back(a.name);
  v.insert(v.end(), extra);
  return v;
}

}  // namespace deltafin
