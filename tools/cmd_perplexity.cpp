#include "commands.h"

namespace deltafin::tools {

Command add_perplexity(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("perplexity", "(not implemented yet)");
  return {sub, [] { std::fprintf(stderr, "error: 'perplexity' is not implemented yet\n"); return 2; }};
}

}  // namespace deltafin::tools
