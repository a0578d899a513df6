// The expert usage profile: how often each (layer, expert) was used, summed over
// the processes that streamed this model. The store loads it at open (to seed the
// LFU scores and warm the RAM cache with the hottest experts) and writes it back
// when it is destroyed.
//
// File: "deltafin-expert-profile 1", a line naming the model's shape, then
// "layer expert count" per line. Written to a temporary file and renamed.
#pragma once
#include <string>
#include <vector>

#include "core/result.h"
#include "store/expert_index.h"

namespace deltafin {

// The line naming the model's shape ("model <MoE layers> <experts> <expert bytes>"):
// a profile written for another shape is not used.
std::string usage_profile_identity(const ExpertIndex& ix);

// Counts by ExpertIndex key; empty when there is no profile yet or it was written
// for another model (a warning says so).
std::vector<double> load_usage_profile(const std::string& path, const ExpertIndex& ix);

// Writes counts (by key); halves them all while the largest exceeds 1e9 so that
// old habits fade.
Status save_usage_profile(const std::string& path, const ExpertIndex& ix, std::vector<double> counts);

}  // namespace deltafin
