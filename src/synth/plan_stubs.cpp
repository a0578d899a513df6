// Planners for architectures whose synthesis is not written yet.
#include "synth/synth.h"

namespace deltafin {

Status plan_deepseek2(const SynthSpec&, SynthPlan*) { return make_error("synth: deepseek2 is not supported yet"); }
Status plan_kimi_k3(const SynthSpec&, SynthPlan*) { return make_error("synth: kimi-k3 is not supported yet"); }
Status plan_llama(const SynthSpec&, SynthPlan*) { return make_error("synth: llama is not supported yet"); }

}  // namespace deltafin
