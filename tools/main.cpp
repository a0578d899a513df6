// deltafin: run Mixture-of-Experts GGUF models larger than memory.
#include <cstdio>

#include "commands.h"
#include "core/log.h"

using namespace deltafin;
using namespace deltafin::tools;

int main(int argc, char** argv) {
  CLI::App app{"deltafin: exact Mixture-of-Experts inference on GGUF models, streaming experts "
               "from disk or the network"};
  app.require_subcommand(1);
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity, "More log output on stderr (repeat for debug)");
  app.add_flag("-q,--quiet", quiet, "Errors only");

  std::vector<Command> cmds = {add_run(app),   add_chat(app),    add_eval(app),     add_perplexity(app),
                               add_synth(app), add_inspect(app), add_tokenize(app), add_bench(app),
                               add_serve(app), add_quantize(app), add_pull(app), add_cache(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  set_log_level(quiet ? LogLevel::Error : verbosity >= 2 ? LogLevel::Debug
                                        : verbosity == 1 ? LogLevel::Info : LogLevel::Warn);
  for (auto& c : cmds) {
    if (c.app->parsed()) {
      try {
        return c.run();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
      }
    }
  }
  return 1;
}
