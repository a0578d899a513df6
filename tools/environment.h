// The one place the program reads its environment variables (DELTAFIN_CACHE_DIR,
// XDG_CACHE_HOME, HOME, DELTAFIN_ISA, HF_ENDPOINT, HF_TOKEN, HF_TOKEN_PATH, HF_HOME,
// CURL_CA_BUNDLE, SSL_CERT_FILE): into core/environment.h's struct, which commands
// pass down to the library.
#pragma once
#include "core/environment.h"
#include "core/result.h"

namespace deltafin::tools {

// Read on first use, then the same for the rest of the run.
const Environment& environment();

// Selects the kernel set $DELTAFIN_ISA names (kernels/types.h select_isa); one the CPU
// cannot run, or an unknown name, is a warning naming it and the best set stays.
void select_isa_from_environment();

}  // namespace deltafin::tools
