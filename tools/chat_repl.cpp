#include "chat_repl.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <optional>

#include "chat_input.h"

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
    "  /system TEXT   set the system message and start over (/system alone shows it,\n"
    "                 /system - removes it)\n"
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

// One chat on the terminal (or a pipe): the loop and its commands.
class Repl {
 public:
  Repl(ChatSession& chat, Engine& engine, const ReplOptions& opts)
      : chat_(chat), engine_(engine), opts_(opts), in_(STDIN_FILENO, &g_interrupted) {
    opts_.gen.cancel = &g_interrupted;
  }
  int run();

 private:
  void prompt(bool first) const;
  // Runs a /command; false when it asks to quit.
  bool command(const std::string& msg);
  void answer(const std::string& msg);

  ChatSession& chat_;
  Engine& engine_;
  ReplOptions opts_;
  LineInput in_;
  const bool tty_ = ::isatty(STDIN_FILENO);
  const bool out_tty_ = ::isatty(STDOUT_FILENO);
  std::optional<ChatTurn> last_;
  int rc_ = 0;
};

void Repl::prompt(bool first) const {
  if (!tty_) return;
  std::fputs(first ? "> " : "... ", stdout);
  std::fflush(stdout);
}

int Repl::run() {
  SigintGuard guard;
  bool interrupted_at_prompt = false;
  for (;;) {
    std::string msg;
    InputStatus s = read_message(in_, [this](bool first) { prompt(first); }, &msg);
    if (s == InputStatus::Eof) {
      if (tty_) std::fputc('\n', stdout);
      break;
    }
    if (s == InputStatus::Interrupted) {
      g_interrupted.store(false);
      if (!tty_ || interrupted_at_prompt) {
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
      if (!command(msg)) break;
      continue;
    }
    if (msg.rfind("//", 0) == 0) msg.erase(0, 1);
    answer(msg);
  }
  return rc_;
}

bool Repl::command(const std::string& msg) {
  const size_t sp = msg.find_first_of(" \n");
  const std::string cmd = msg.substr(0, sp);
  const std::string arg = sp == std::string::npos ? "" : msg.substr(sp + 1);
  if (cmd == "/exit" || cmd == "/quit") return false;
  if (cmd == "/help") {
    std::fputs(kHelp, stdout);
  } else if (cmd == "/reset") {
    chat_.reset();
    last_.reset();
    std::fputs("(conversation cleared)\n", stdout);
  } else if (cmd == "/system") {
    if (arg.empty()) {
      fmt::print("system message: {}\n", chat_.system().empty() ? "(none)" : chat_.system());
    } else {
      chat_.set_system(arg == "-" ? "" : arg);
      chat_.reset();
      last_.reset();
      std::fputs(arg == "-" ? "(system message removed; conversation cleared)\n"
                            : "(system message set; conversation cleared)\n", stdout);
    }
  } else if (cmd == "/stats") {
    if (last_) print_turn_stats(stdout, *last_, chat_.n_past(), chat_.n_ctx());
    else fmt::print("no answer yet; context: {} of {} tokens used\n", chat_.n_past(), chat_.n_ctx());
    if (StreamingExpertStore* st = engine_.streaming_store()) fmt::print("{}", format_stats(st->stats()));
  } else {
    fmt::print("unknown command '{}'; /help lists the commands (write //{} to send it as text)\n", cmd,
               cmd.substr(1));
  }
  std::fflush(stdout);
  return true;
}

void Repl::answer(const std::string& msg) {
  g_interrupted.store(false);
  // A thinking model's reasoning (Kimi K3's, kept apart by the session) shows dimmed
  // on a terminal; piped output is the answer alone.
  bool thinking = false;
  auto end_thinking = [&] {
    if (thinking) std::fputs("\x1b[0m\n\n", stdout);
    thinking = false;
  };
  auto r = chat_.turn(
      msg, opts_.gen,
      [&](const std::string& text) {
        end_thinking();
        const std::string piece = out_tty_ ? for_terminal(text) : text;
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      },
      [&](const std::string& text) {
        if (!out_tty_) return;
        if (!thinking) std::fputs("\x1b[2m", stdout);
        thinking = true;
        const std::string piece = for_terminal(text);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      });
  end_thinking();
  if (!r) {
    const std::string& e = r.error().message;
    fmt::print(stderr, "error: {}\n", e);
    const int n_train = engine_.model().info().n_ctx_train;
    if (e.find("context holds") != std::string::npos)
      fmt::print(stderr, "  /reset starts a new conversation; or restart with a larger -c/--ctx-size{}\n",
                 n_train > 0 ? fmt::format(" (the model was trained for up to {})", n_train) : "");
    else if (e.rfind("chat template:", 0) == 0 && !chat_.system().empty())
      fmt::print(stderr, "  (the message was not sent; if the template does not take a system message, "
                         "/system - removes it)\n");
    if (!tty_) rc_ = 1;
    return;
  }
  last_ = std::move(r.value());
  const std::string& why = last_->gen.stop_reason;
  if (why == "cancelled") {
    g_interrupted.store(false);
    std::fputs(tty_ ? " [stopped]\n" : "\n", stdout);
  } else {
    std::fputc('\n', stdout);
    if (why == "context")
      fmt::print(stderr, "[the context is full: /reset starts over, or restart with a larger -c/--ctx-size]\n");
  }
  std::fflush(stdout);
  if (opts_.print_stats) print_turn_stats(stderr, *last_, chat_.n_past(), chat_.n_ctx());
}

}  // namespace

int run_chat_repl(ChatSession& chat, Engine& engine, const ReplOptions& opts) {
  return Repl(chat, engine, opts).run();
}

}  // namespace deltafin::tools
