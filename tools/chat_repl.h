// The interactive loop of `deltafin chat`: reads messages (chat_input.h), runs
// /commands, streams answers to stdout. Ctrl-C (SIGINT) stops an answer; at the
// prompt it warns, and a second one quits, as does Ctrl-D or /exit. With stdin not
// a terminal no prompts are printed and a failed turn makes the exit status 1.
#pragma once
#include "runtime/chat_session.h"
#include "runtime/engine.h"

namespace deltafin::tools {

struct ReplOptions {
  GenerateParams gen;        // per answer (its cancel flag is set by the loop)
  bool print_stats = false;  // timing after each answer, on stderr
};

// Returns the exit status.
int run_chat_repl(ChatSession& chat, Engine& engine, const ReplOptions& opts);

}  // namespace deltafin::tools
