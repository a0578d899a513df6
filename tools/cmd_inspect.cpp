#include "commands.h"

namespace deltafin::tools {

Command add_inspect(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("inspect", "(not implemented yet)");
  return {sub, [] { std::fprintf(stderr, "error: 'inspect' is not implemented yet\n"); return 2; }};
}

}  // namespace deltafin::tools
