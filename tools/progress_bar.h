// A progress bar on stderr for downloads: bytes, rate, ETA. Redrawn in place on a
// terminal; elsewhere (logs, tests) a line every few seconds and one at the end.
#pragma once
#include "core/progress.h"

namespace deltafin::tools {

// Bars for library code (null factory when `quiet`).
ProgressFactory terminal_progress(bool quiet = false);

}  // namespace deltafin::tools
