// The architectures deltafin runs, one row each: the general.architecture name, the
// loader (src/model/<arch>.cpp), the synthetic-model plan (src/synth/plan_<arch>.cpp)
// and how its "tiny" test preset differs from the common tiny shape. load_model,
// `deltafin synth` and the tests loop over this table (supported_architectures()), so
// a new architecture adds its own files and one row in registry.cpp.
//
// The row names synth's functions so that the table is one place; nothing under
// src/model calls them (synth sits above model: its plans use model/weights.h).
#pragma once
#include <memory>
#include <span>
#include <string_view>

#include "core/result.h"
#include "model/model.h"

namespace deltafin {

class ModelFile;
struct SynthSpec;
struct SynthPlan;

struct Architecture {
  const char* name;  // general.architecture
  Result<std::unique_ptr<Model>> (*load)(ModelFile&, LoadOptions&);
  // The tensors and metadata of a synthetic model of this architecture.
  Status (*synth_plan)(const SynthSpec&, SynthPlan*);
  // The "tiny" preset: called on the common tiny shape (synth/presets.cpp) to make
  // it this architecture's (a few MB, for tests).
  void (*tiny_preset)(SynthSpec*);
};

// Every supported architecture, in a fixed order (the first is the default of synth).
std::span<const Architecture> architectures();
// The row of `name`, or null.
const Architecture* find_architecture(std::string_view name);

}  // namespace deltafin
