// Subcommands of the deltafin program. Each tools/cmd_*.cpp adds one subcommand to
// the app and returns the function to run when it is chosen.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace deltafin::tools {

using Runner = std::function<int()>;
struct Command {
  CLI::App* app;
  Runner run;
};

// Registration: each command file defines one of these.
Command add_inspect(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_run(CLI::App& app);
Command add_chat(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_quantize(CLI::App& app);
Command add_pull(CLI::App& app);
Command add_cache(CLI::App& app);
Command add_convert(CLI::App& app);

// Parses sizes such as "2G", "512M", "1.5GiB", "4096"; returns false if malformed.
bool parse_size(const std::string& s, uint64_t* out);

}  // namespace deltafin::tools
