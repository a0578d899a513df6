// deltafin: run Mixture-of-Experts GGUF models larger than memory.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "environment.h"
#include "core/log.h"
#include "kernels/types.h"

using namespace deltafin;
using namespace deltafin::tools;

namespace {

#ifndef DELTAFIN_VERSION
#define DELTAFIN_VERSION "unknown"
#endif

std::string version_text() {
#if defined(__clang__)
  const std::string compiler = fmt::format("clang {}.{}", __clang_major__, __clang_minor__);
#elif defined(__GNUC__)
  const std::string compiler = fmt::format("GCC {}.{}", __GNUC__, __GNUC_MINOR__);
#else
  const std::string compiler = "an unknown compiler";
#endif
#if defined(__x86_64__)
  const char* arch = "x86_64";
#elif defined(__aarch64__)
  const char* arch = "aarch64";
#else
  const char* arch = "this CPU";
#endif
  return fmt::format("deltafin {}\nbuilt with {} for {}; CPU kernels: {}", DELTAFIN_VERSION, compiler, arch,
                     isa_name(selected_isa()));
}

// llama.cpp's spellings that CLI11 cannot take as they are: -ngl (a short option is
// one letter: "-ngl 99" would read as "-n gl") and -hf OWNER/REPO[:QUANT].
std::vector<std::string> translate_llama_args(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-ngl") {
      args.push_back("--n-gpu-layers");
    } else if (a.rfind("-ngl=", 0) == 0) {
      args.push_back("--n-gpu-layers=" + a.substr(5));
    } else if ((a == "-hf" || a == "-hfr" || a == "--hf-repo") && i + 1 < argc) {
      args.push_back("-m");
      args.push_back(std::string("hf://") + argv[++i]);
    } else {
      args.push_back(a);
    }
  }
  return args;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string strip_dashes(const std::string& s) { return s.substr(std::min(s.find_first_not_of('-'), s.size())); }

// The known name closest to `given` (compared without dashes, so "-temp" finds
// "--temp"), or "" if none is close.
std::string closest(const std::string& given, const std::vector<std::string>& known) {
  const std::string g = strip_dashes(given);
  std::string best;
  size_t best_d = std::string::npos;
  for (const std::string& k : known) {
    const std::string kk = strip_dashes(k);
    if (kk.size() < 2 && g.size() > 1) continue;  // "-x" is no suggestion for "--xyz"
    size_t d = edit_distance(g, kk);
    if (kk.size() >= 3 && (g.rfind(kk, 0) == 0 || kk.rfind(g, 0) == 0)) d = std::min<size_t>(d, 1);  // a prefix
    if (d < best_d) best_d = d, best = k;
  }
  return best_d <= std::max<size_t>(2, g.size() / 3) ? best : "";
}

std::vector<std::string> option_names(CLI::App* a) {
  std::vector<std::string> names;
  for (const CLI::Option* o : a->get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

bool looks_like_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && *end == 0 && end != s.c_str();
}

// After CLI11 refused the command line: when a word names a command or an option
// that does not exist, says so and suggests the closest one (true); else false.
bool explain_unknown(CLI::App& app, const std::vector<std::string>& args) {
  const auto subcommands = [](CLI::App* a) { return a->get_subcommands([](CLI::App*) { return true; }); };
  CLI::App* cmd = &app;
  std::string path = "deltafin";
  bool found = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    const bool option = a.size() > 1 && a[0] == '-' && !looks_like_number(a);
    if (!option) {
      // The first word names the command (and cache's second word its own).
      if (subcommands(cmd).empty()) continue;
      CLI::App* sub = nullptr;
      for (CLI::App* s : subcommands(cmd))
        if (s->get_name() == a) sub = s;
      if (sub) {
        cmd = sub;
        path += " " + a;
        continue;
      }
      std::vector<std::string> names;
      for (CLI::App* s : subcommands(cmd)) names.push_back(s->get_name());
      const std::string near = closest(a, names);
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      fmt::print(stderr, "error: `{}` has no command '{}'{}; the commands: {}\n", path, a,
                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), list);
      return true;
    }
    const std::string name = a.substr(0, a.find('='));
    if (cmd->get_option_no_throw(name) || app.get_option_no_throw(name)) continue;
    const std::string near = closest(name, option_names(cmd));
    // A one-letter option with its value attached ("-t8", "-vv") is known when its
    // letter is, unless the word reads as a long option given one dash ("-temp").
    if (name[1] != '-' && name.size() > 2 && cmd->get_option_no_throw(name.substr(0, 2))) {
      const bool word = std::all_of(name.begin() + 2, name.end(), [](char c) { return std::isalpha(uint8_t(c)) || c == '-'; });
      if (!word || near.empty()) continue;
    }
    fmt::print(stderr, "error: `{}` has no option '{}'{}\n", path, name,
               near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
    found = true;
  }
  if (found) fmt::print(stderr, "Run `{} --help` for the options.\n", path);
  return found;
}

// llama.cpp's -ngl/--n-gpu-layers: accepted where a model runs, with a note.
void add_gpu_layers_option(CLI::App* sub) {
  sub->add_option_function<std::string>(
         "--n-gpu-layers,--gpu-layers",
         [](const std::string& v) {
           fmt::print(stderr, "note: --n-gpu-layers {} ignored: deltafin runs on the CPU (experts stream from disk "
                              "into RAM)\n", v);
         },
         "Accepted as llama.cpp's -ngl N and ignored: deltafin runs on the CPU")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "auto" || v == "all") return "";
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != 0 || n < -1) return "expected a number of layers (or auto, all), got '" + v + "'";
            return "";
          },
          "N"));
}

}  // namespace

int main(int argc, char** argv) {
  select_isa_from_environment();  // before any kernel runs
  CLI::App app{"deltafin: exact Mixture-of-Experts inference on GGUF models, streaming experts "
               "from disk or the network"};
  app.require_subcommand(1);
  app.fallthrough();  // -v/-q after the command too
  app.set_version_flag("--version", version_text());
  app.footer("\nEvery command that reads a model takes it as its first argument or with -m; a model is a .gguf "
             "path,\na Hugging Face model folder, an http(s):// URL, hf://OWNER/REPO[@REVISION]/FILE.gguf, or hf://OWNER/REPO[:QUANT] "
             "(-hf OWNER/REPO[:QUANT]).\n`deltafin help COMMAND` or `deltafin COMMAND --help` shows a command's "
             "options.");
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity, "More log output on stderr (repeat for debug)");
  app.add_flag("-q,--quiet", quiet, "Errors only");

  std::vector<Command> cmds = {add_run(app),   add_chat(app),    add_eval(app),     add_perplexity(app),
                               add_synth(app), add_inspect(app), add_plan(app), add_tokenize(app), add_bench(app),
                               add_serve(app), add_quantize(app), add_pull(app), add_cache(app), add_convert(app)};
  for (auto& c : cmds)
    for (const char* name : {"run", "chat", "eval", "perplexity", "bench", "serve"})
      if (c.app->get_name() == name) add_gpu_layers_option(c.app);

  std::vector<std::string> args = translate_llama_args(argc, argv);
  // Bare `deltafin`, `deltafin help` and `deltafin help COMMAND` print the help.
  if (args.empty() || args[0] == "help") {
    CLI::App* about = nullptr;
    if (args.size() > 1)
      for (auto& c : cmds)
        if (c.app->get_name() == args[1]) about = c.app;
    if (args.size() > 1 && !about) {
      fmt::print(stderr, "error: no command '{}'; `deltafin help` lists them\n", args[1]);
      return 2;
    }
    std::fputs(about ? about->help().c_str() : app.help().c_str(), stdout);
    return 0;
  }
  try {
    std::vector<std::string> rev(args.rbegin(), args.rend());  // CLI11 takes them reversed
    app.parse(rev);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && explain_unknown(app, args)) return e.get_exit_code();
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
