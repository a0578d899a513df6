// deltafin chat: talk to a model through its own chat template. Answers stream to
// stdout; Ctrl-C stops an answer (and, pressed twice at the prompt, exits). With
// stdin not a terminal it reads messages line by line and answers each, printing
// no prompts, so it can be scripted.
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "chat_repl.h"
#include "commands.h"
#include "core/log.h"
#include "runtime/chat_session.h"
#include "runtime/engine.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {

Result<std::string> read_text_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot read {} '{}'", what, path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The chat template: --chat-template FILE, else the model's tokenizer.chat_template,
// else (as serve does) kFallbackChatTemplate, with a note saying so.
Result<std::string> find_template(const GGUFFile& meta, const std::string& model_path,
                                  const std::string& override_path) {
  if (!override_path.empty()) return read_text_file(override_path, "chat template file");
  const GGUFValue* v = meta.find("tokenizer.chat_template");
  if (v && v->type == GGUFType::STRING && !v->s.empty()) return v->s;
  fmt::print(stderr,
             "note: '{}' has no chat template (no tokenizer.chat_template in its metadata); using ChatML, as "
             "`deltafin serve` does. If the model was trained on another format, give its template with "
             "--chat-template FILE (e.g. the \"chat_template\" of tokenizer_config.json from the model's Hugging "
             "Face page); for a base model, `deltafin run -m {} -p TEXT` completes plain text.\n",
             model_path, model_path);
  return std::string(kFallbackChatTemplate);
}

}  // namespace

Command add_chat(CLI::App& app) {
  struct Opts {
    std::string model, system, system_file, chat_template, template_kwargs;
    int n = -1, ctx = 4096, threads = 0, batch = 0;
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
  sub->add_option("model,-m,--model", o->model,
                  "Model .gguf (its tokenizer.chat_template writes the conversation; without one: ChatML)")
      ->join()
      ->required();
  sub->add_option("--system", o->system, "System message");
  sub->add_option("--system-file", o->system_file, "Read the system message from a file");
  sub->add_option("--chat-template-kwargs", o->template_kwargs,
                  "JSON object of variables for the chat template (e.g. '{\"thinking\": false}' for Kimi K3)");
  sub->add_option("--chat-template", o->chat_template,
                  "Jinja chat template file to use instead of the model's own");
  sub->add_option("-n,--n-predict", o->n,
                  "Most tokens per answer (-1: until the model ends it, at most the model's trained context "
                  "length, or until the context is full)")
      ->capture_default_str();
  sub->add_option("-c,--ctx-size", o->ctx, "Context size in tokens (the whole conversation must fit)")
      ->check(CLI::Range(1, kMaxCtxSize))
      ->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (default: all)")->check(CLI::Range(0, kMaxThreads));
  sub->add_option("-b,--batch-size", o->batch, "Prompt tokens per forward pass; 0 (default): 512, or as in run when experts stream")->capture_default_str();
  add_sampling_options(sub, o->sp);
  sub->add_flag("--stats", o->stats, "Print timing after each answer to stderr");
  add_store_options(sub, o->store);
  return {sub, [o, sub] {
            if (o->ctx < 16) {
              fmt::print(stderr, "error: -c/--ctx-size {} is too small for a conversation (try 4096)\n", o->ctx);
              return 2;
            }
            std::string system = o->system;
            if (!o->system_file.empty()) {
              DF_ASSIGN_OR_EXIT(system, read_text_file(o->system_file, "system message file"));
            }
            if (!o->chat_template.empty()) {  // a bad file fails before the model loads
              DF_CHECK_OR_EXIT(read_text_file(o->chat_template, "chat template file"));
            }
            EngineOptions eo;
            eo.threads = o->threads;
            DF_CHECK_OR_EXIT(apply_store_options(o->store, &eo));
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            DF_ASSIGN_OR_EXIT(std::string tmpl, find_template(engine->file().meta(), o->model, o->chat_template));
            DF_ASSIGN_OR_EXIT(Tokenizer tok, Tokenizer::from_gguf(engine->file().meta()));
            if (const std::string took = apply_model_sampling(*sub, engine->file().meta(), &o->sp);
                !took.empty() && log_level() >= LogLevel::Warn)
              fmt::print(stderr, "sampling: the model's defaults {} (give a flag to change one)\n", took);
            // The conversation's state comes out of --mem like everything else (memory_budget.h).
            DF_CHECK_OR_EXIT(engine->plan_sequences({.n_ctx = o->ctx, .n_states = 1}));
            DF_ASSIGN_OR_EXIT(auto chat, ChatSession::create(engine->model(), tok, tmpl, o->ctx));
            chat->set_system(system);
            if (!o->template_kwargs.empty()) {
              auto kw = nlohmann::ordered_json::parse(o->template_kwargs, nullptr, false);
              if (!kw.is_object()) {
                fmt::print(stderr, "error: --chat-template-kwargs '{}' is not a JSON object\n", o->template_kwargs);
                return 2;
              }
              chat->set_template_kwargs(std::move(kw));
            }
            // A template that cannot render a plain conversation fails now, not at the first message.
            {
              std::string probe = "Hello";
              auto r = chat->render(&probe, true);
              if (!r && !system.empty()) {
                chat->set_system("");
                if (chat->render(&probe, true)) {
                  fmt::print(stderr, "error: {}\n(this model's chat template does not take a system message: leave out "
                             "--system, or put the instructions in your first message)\n", r.error().message);
                  return 1;
                }
              }
              if (!r) {
                fmt::print(stderr, "error: {}\n(the model's chat template cannot render a simple conversation; "
                           "give another with --chat-template FILE)\n", r.error().message);
                return 1;
              }
            }
            const bool tty = ::isatty(STDIN_FILENO);
            const int n_ctx_train = engine->model().info().n_ctx_train;
            if (tty) {
              fmt::print(stderr, "deltafin chat: {} ({}, context {} tokens{})\n", o->model,
                         engine->model().info().arch, o->ctx,
                         n_ctx_train > 0 ? fmt::format(", trained for {}", n_ctx_train) : "");
              fmt::print(stderr, "Enter sends; end a line with \\ to continue; /help for commands; Ctrl-C stops an "
                                 "answer; Ctrl-D quits.\n");
            }
            ReplOptions ro;
            // A base model may never end an answer: -1 stops at the trained context length.
            ro.gen.n_predict = o->n < 0 && n_ctx_train > 0 ? n_ctx_train : o->n;
            ro.gen.n_batch = o->batch;
            ro.gen.store = engine->streaming_store();  // auto -b: a long message borrows cache memory
            ro.gen.sampling = o->sp;
            ro.print_stats = o->stats;
            if (o->stats) fmt::print(stderr, "memory plan:\n{}", format_plan(engine->memory_plan()));
            return run_chat_repl(*chat, *engine, ro);
          }};
}

}  // namespace deltafin::tools
