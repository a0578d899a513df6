// deltafin chat: talk to a model through its own chat template. Answers stream to
// stdout; Ctrl-C stops an answer (and, pressed twice at the prompt, exits). With
// stdin not a terminal it reads messages line by line and answers each, printing
// no prompts, so it can be scripted.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <optional>
#include <sstream>

#include "chat_input.h"
#include "commands.h"
#include "runtime/chat.h"
#include "runtime/engine.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void on_sigint(int) { g_interrupted.store(true); }

// Installs the SIGINT handler for the lifetime of the object. SA_RESTART keeps
// output to the terminal from failing on ^C; the input waits in poll(), which a
// signal always interrupts, so the input loop sees the flag at once.
class SigintGuard {
 public:
  SigintGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_);
  }
  ~SigintGuard() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

constexpr const char* kHelp =
    "Type a message and press Enter. Longer messages:\n"
    "  end a line with \\ to continue it on the next line, or\n"
    "  put \"\"\" on a line of its own before and after the text.\n"
    "Commands:\n"
    "  /help          this text\n"
    "  /reset         forget the conversation (keeps the system message)\n"
    "  /system TEXT   set the system message and start over (/system alone shows it)\n"
    "  /stats         speed of the last answer and how full the context is\n"
    "  /exit          quit (also /quit, Ctrl-D, or Ctrl-C twice at the prompt)\n"
    "Ctrl-C while the model answers stops the answer. A message starting with / is\n"
    "sent as text if you write it as //.\n";

// Model output for a terminal: control characters other than newline and tab are
// dropped, so that an answer cannot move the cursor, clear the screen or send
// escape sequences to the terminal. (Pipes get the text unchanged.)
std::string for_terminal(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) continue;
    out += c;
  }
  return out;
}

void print_turn_stats(std::FILE* out, const ChatTurn& t, int n_past, int n_ctx) {
  const GenerateStats& g = t.gen;
  fmt::print(out, "prompt: {} tokens, {} reused from the previous turn{}, {} evaluated in {:.3f} s ({:.1f} tok/s)\n",
             t.n_prompt, t.n_reused, t.reprefilled ? " (state rebuilt)" : "", g.n_prompt, g.prefill_s,
             g.n_prompt / std::max(g.prefill_s, 1e-9));
  fmt::print(out, "answer: {} tokens in {:.3f} s ({:.1f} tok/s); time to first token {:.3f} s; stop: {}\n",
             g.n_generated, g.decode_s,
             g.n_generated > 1 ? (g.n_generated - 1) / std::max(g.decode_s, 1e-9) : 0.0, g.ttft_s, g.stop_reason);
  fmt::print(out, "context: {} of {} tokens used\n", n_past, n_ctx);
}

Result<std::string> read_text_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot read {} '{}'", what, path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The chat template: --chat-template FILE, else the model's tokenizer.chat_template.
Result<std::string> find_template(const std::string& model_path, const std::string& override_path) {
  if (!override_path.empty()) return read_text_file(override_path, "chat template file");
  if (::access(model_path.c_str(), R_OK) != 0)  // Engine::open explains a missing file
    return std::string();
  DF_ASSIGN(auto file, ModelFile::open(model_path, local_file_opener()));
  const GGUFValue* v = file->meta().find("tokenizer.chat_template");
  if (!v || v->type != GGUFType::STRING || v->s.empty())
    return make_error(
        "'{}' has no chat template (no tokenizer.chat_template in its metadata), so deltafin cannot tell how "
        "this model expects a conversation to be written.\n"
        "  - give one with --chat-template FILE (a Jinja template, e.g. chat_template.jinja or the "
        "\"chat_template\" of tokenizer_config.json from the model's Hugging Face page), or\n"
        "  - use `deltafin run -m {} -p TEXT` for plain text completion (base models have no chat format).",
        model_path, model_path);
  return v->s;
}

}  // namespace

Command add_chat(CLI::App& app) {
  struct Opts {
    std::string model, system, system_file, chat_template;
    int n = -1, ctx = 4096, threads = 0, batch = 512;
    bool stats = false;
    SamplingParams sp;
    StoreCli store;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "chat", "Chat with a model in the terminal, using the model's own chat template");
  sub->footer(
      "\nExample:\n  deltafin chat -m model.gguf --system \"You are terse.\" --temp 0.7\n\n"
      "In the chat: Enter sends; a line ending in \\ or a \"\"\"...\"\"\" block gives several lines; "
      "/help lists the commands\n(/reset, /system, /stats, /exit); Ctrl-C stops an answer; Ctrl-D quits. "
      "With stdin not a terminal,\neach line (or block) is one message and only the answers are printed.");
  sub->add_option("model,-m,--model", o->model, "Model .gguf (with a chat template in its metadata)")->required();
  sub->add_option("--system", o->system, "System message");
  sub->add_option("--system-file", o->system_file, "Read the system message from a file");
  sub->add_option("--chat-template", o->chat_template,
                  "Jinja chat template file to use instead of the model's own");
  sub->add_option("-n,--n-predict", o->n, "Most tokens per answer (-1: until the model ends it or the context is full)")
      ->capture_default_str();
  sub->add_option("-c,--ctx-size", o->ctx, "Context size in tokens (the whole conversation must fit)")
      ->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (default: all)");
  sub->add_option("-b,--batch-size", o->batch, "Prompt tokens per forward pass")->capture_default_str();
  sub->add_option("--temp", o->sp.temperature, "Temperature (0: greedy)")->capture_default_str();
  sub->add_option("--top-k", o->sp.top_k, "Top-k (0: off)")->capture_default_str();
  sub->add_option("--top-p", o->sp.top_p, "Top-p (1: off)")->capture_default_str();
  sub->add_option("--min-p", o->sp.min_p, "Min-p (0: off)")->capture_default_str();
  sub->add_option("--repeat-penalty", o->sp.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  sub->add_option("--repeat-last-n", o->sp.penalty_last_n, "Tokens the penalties look back")->capture_default_str();
  sub->add_option("--frequency-penalty", o->sp.frequency_penalty, "Frequency penalty");
  sub->add_option("--presence-penalty", o->sp.presence_penalty, "Presence penalty");
  sub->add_option("-s,--seed", o->sp.seed, "Random seed");
  sub->add_flag("--stats", o->stats, "Print timing after each answer to stderr");
  add_store_options(sub, o->store);
  return {sub, [o] {
            if (o->ctx < 16) {
              fmt::print(stderr, "error: -c/--ctx-size {} is too small for a conversation (try 4096)\n", o->ctx);
              return 2;
            }
            std::string system = o->system;
            if (!o->system_file.empty()) {
              DF_ASSIGN_OR_EXIT(system, read_text_file(o->system_file, "system message file"));
            }
            DF_ASSIGN_OR_EXIT(std::string tmpl, find_template(o->model, o->chat_template));
            EngineOptions eo;
            eo.threads = o->threads;
            DF_CHECK_OR_EXIT(apply_store_options(o->store, &eo));
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            DF_ASSIGN_OR_EXIT(Tokenizer tok, Tokenizer::from_gguf(engine->file().meta()));
            DF_ASSIGN_OR_EXIT(auto chat, ChatSession::create(engine->model(), tok, tmpl, o->ctx));
            chat->set_system(system);
            // A template that cannot render a plain conversation fails now, not at the first message.
            {
              std::string probe = "Hello";
              auto r = chat->render(&probe, true);
              if (!r) {
                fmt::print(stderr, "error: {}\n(the model's chat template cannot render a simple conversation; "
                           "give another with --chat-template FILE)\n", r.error().message);
                return 1;
              }
            }

            const bool tty = ::isatty(STDIN_FILENO);
            const bool out_tty = ::isatty(STDOUT_FILENO);
            const int n_ctx_train = engine->model().info().n_ctx_train;
            if (tty) {
              fmt::print(stderr, "deltafin chat: {} ({}, context {} tokens{})\n", o->model,
                         engine->model().info().arch, o->ctx,
                         n_ctx_train > 0 ? fmt::format(", trained for {}", n_ctx_train) : "");
              fmt::print(stderr, "Enter sends; end a line with \\ to continue; /help for commands; Ctrl-C stops an "
                                 "answer; Ctrl-D quits.\n");
            }
            GenerateParams gp;
            gp.n_predict = o->n;
            gp.n_batch = o->batch;
            gp.sampling = o->sp;
            gp.cancel = &g_interrupted;

            SigintGuard guard;
            LineInput in(STDIN_FILENO, &g_interrupted);
            std::optional<ChatTurn> last;
            auto prompt = [&](bool first) {
              if (!tty) return;
              std::fputs(first ? "> " : "... ", stdout);
              std::fflush(stdout);
            };
            bool interrupted_at_prompt = false;
            int rc = 0;
            for (;;) {
              std::string msg;
              InputStatus s = read_message(in, prompt, &msg);
              if (s == InputStatus::Eof) {
                if (tty) std::fputc('\n', stdout);
                break;
              }
              if (s == InputStatus::Interrupted) {
                g_interrupted.store(false);
                if (!tty || interrupted_at_prompt) {
                  std::fputc('\n', stdout);
                  break;
                }
                interrupted_at_prompt = true;
                std::fputs("\n(Ctrl-C again or Ctrl-D to quit)\n", stdout);
                continue;
              }
              interrupted_at_prompt = false;
              if (msg.empty()) continue;
              if (msg[0] == '/' && msg.rfind("//", 0) != 0) {
                const size_t sp = msg.find_first_of(" \n");
                const std::string cmd = msg.substr(0, sp);
                const std::string arg = sp == std::string::npos ? "" : msg.substr(sp + 1);
                if (cmd == "/exit" || cmd == "/quit") break;
                if (cmd == "/help") {
                  std::fputs(kHelp, stdout);
                } else if (cmd == "/reset") {
                  chat->reset();
                  last.reset();
                  std::fputs("(conversation cleared)\n", stdout);
                } else if (cmd == "/system") {
                  if (arg.empty()) {
                    fmt::print("system message: {}\n", chat->system().empty() ? "(none)" : chat->system());
                  } else {
                    chat->set_system(arg);
                    chat->reset();
                    last.reset();
                    std::fputs("(system message set; conversation cleared)\n", stdout);
                  }
                } else if (cmd == "/stats") {
                  if (last) print_turn_stats(stdout, *last, chat->n_past(), chat->n_ctx());
                  else fmt::print("no answer yet; context: {} of {} tokens used\n", chat->n_past(), chat->n_ctx());
                  if (StreamingExpertStore* st = engine->streaming_store()) fmt::print("{}", format_stats(st->stats()));
                } else {
                  fmt::print("unknown command '{}'; /help lists the commands (write //{} to send it as text)\n",
                             cmd, cmd.substr(1));
                }
                std::fflush(stdout);
                continue;
              }
              if (msg.rfind("//", 0) == 0) msg.erase(0, 1);

              g_interrupted.store(false);
              auto r = chat->turn(msg, gp, [out_tty](const std::string& text) {
                const std::string piece = out_tty ? for_terminal(text) : text;
                std::fwrite(piece.data(), 1, piece.size(), stdout);
                std::fflush(stdout);
                return true;
              });
              if (!r) {
                fmt::print(stderr, "error: {}\n", r.error().message);
                if (r.error().message.find("context holds") != std::string::npos)
                  fmt::print(stderr, "  /reset starts a new conversation; or restart with a larger -c/--ctx-size{}\n",
                             n_ctx_train > 0 ? fmt::format(" (the model was trained for up to {})", n_ctx_train)
                                             : "");
                if (!tty) rc = 1;
                continue;
              }
              last = std::move(r.value());
              const std::string& why = last->gen.stop_reason;
              if (why == "cancelled") {
                g_interrupted.store(false);
                std::fputs(tty ? " [stopped]\n" : "\n", stdout);
              } else {
                std::fputc('\n', stdout);
                if (why == "context")
                  fmt::print(stderr, "[the context is full: /reset starts over, or restart with a larger "
                                     "-c/--ctx-size]\n");
              }
              std::fflush(stdout);
              if (o->stats) print_turn_stats(stderr, *last, chat->n_past(), chat->n_ctx());
            }
            return rc;
          }};
}

}  // namespace deltafin::tools
