// Synthetic kimi-k3: not implemented yet.
#include "synth/synth.h"

namespace deltafin {

Status plan_kimi_k3(const SynthSpec&, SynthPlan*) { return make_error("synth: kimi-k3 is not supported yet"); }

}  // namespace deltafin
