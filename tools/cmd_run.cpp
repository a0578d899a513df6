#include "commands.h"

namespace deltafin::tools {

Command add_run(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("run", "(not implemented yet)");
  return {sub, [] { std::fprintf(stderr, "error: 'run' is not implemented yet\n"); return 2; }};
}

}  // namespace deltafin::tools
