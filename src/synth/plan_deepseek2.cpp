// Synthetic deepseek2: not implemented yet.
#include "synth/synth.h"

namespace deltafin {

Status plan_deepseek2(const SynthSpec&, SynthPlan*) { return make_error("synth: deepseek2 is not supported yet"); }

}  // namespace deltafin
