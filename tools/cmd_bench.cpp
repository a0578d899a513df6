#include "commands.h"

namespace deltafin::tools {

Command add_bench(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("bench", "(not implemented yet)");
  return {sub, [] { std::fprintf(stderr, "error: 'bench' is not implemented yet\n"); return 2; }};
}

}  // namespace deltafin::tools
