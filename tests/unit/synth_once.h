// Synthetic models for the unit tests, written once per process.
#pragma once
#include <string>

#include "synth/synth.h"

namespace deltafin {

// A directory of this process for `suite`'s files (under the gtest temp dir),
// created on first use.
std::string test_dir(const std::string& suite);

// Writes the model `s` as <test_dir(suite)>/<key>.gguf the first time a (suite, key)
// is asked for and returns its path; the same path (or error) after that. Empty
// with *why set if synth cannot make it.
std::string synth_once(const std::string& suite, const std::string& key, const SynthSpec& s, std::string* why);

}  // namespace deltafin
