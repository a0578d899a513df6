// deltafin run: complete a prompt. The generated text goes to stdout (no prompt
// echo); logs and --stats go to stderr. Ctrl-C stops the generation (and still
// prints --stats); a second Ctrl-C exits at once.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "core/log.h"
#include "core/platform.h"
#include "runtime/engine.h"
#include "runtime/predict.h"
#include "runtime/generate.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) {
  if (g_interrupted.exchange(true)) {  // the second Ctrl-C: stop now
    ::signal(SIGINT, SIG_DFL);
    ::raise(SIGINT);
  }
}

}  // namespace

Command add_run(CLI::App& app) {
  struct Opts {
    std::string model, prompt, file;
    int n = 128, ctx = 4096, threads = 0, batch = 0;
    bool stats = false, ignore_eos = false;
    std::vector<std::string> stop;
    SamplingParams sp;
    StoreCli store;
    std::string spec = "auto";
    int spec_max = 16;
    bool spec_fixed = false;
    bool json = false;
    std::string json_schema;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("run", "Complete a prompt");
  sub->add_option("model,-m,--model", o->model, "Model: .gguf path, Hugging Face model folder, URL or hf:// location; -m PART1 -m PART2 ...: the byte fragments of one .gguf (NAME.part1ofN alone names its set)")->join()->required();
  sub->add_option("-p,--prompt", o->prompt, "Prompt text");
  sub->add_option("-f,--file", o->file, "Read the prompt from a file");
  sub->add_option("-n,--n-predict", o->n, "Tokens to generate (-1: until end of text)")->capture_default_str();
  sub->add_option("-c,--ctx-size", o->ctx, "Context size in tokens")
      ->check(CLI::Range(1, kMaxCtxSize))
      ->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (default: all)")->check(CLI::Range(0, kMaxThreads));
  sub->add_option("-b,--batch-size", o->batch,
                  "Prompt tokens per forward pass; 0 (default): 512, or when experts stream up to the whole "
                  "prompt, its activations in memory the expert cache lends (at most 3/4 of it)")
      ->capture_default_str();
  add_sampling_options(sub, o->sp);
  sub->add_option("--stop", o->stop, "Stop string (repeatable)");
  sub->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-text");
  sub->add_flag("--stats", o->stats, "Print timing and expert cache statistics to stderr");
  sub->add_option("--spec", o->spec,
                  "Speculative decoding: auto (n-gram, the model's MTP block where it has one, self-speculation "
                  "when experts stream; adapts and switches off when it does not pay), off, ngram, self (the model "
                  "on its resident experts), mtp (the model's nextn block), draft:PATH (a draft model with the same "
                  "vocabulary)")
      ->capture_default_str();
  sub->add_option("--spec-max", o->spec_max, "Most drafted tokens per pass")
      ->check(CLI::Range(1, SpecOptions::kMaxDraft))
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Constrain the output to a JSON object");
  sub->add_option("--json-schema", o->json_schema,
                  "Constrain the output to JSON following this schema (a file, or the schema's text); the subset "
                  "of response_format json_schema");
  sub->add_flag("--spec-fixed", o->spec_fixed, "Always draft --spec-max tokens (no adaptation; for measurements)");
  add_store_options(sub, o->store);
  return {sub, [o, sub] {
            if (!o->file.empty() && !std::ifstream(o->file, std::ios::binary)) {  // read once the vocabulary is known
              fmt::print(stderr, "error: cannot read prompt file '{}'\n", o->file);
              return 1;
            }
            if (o->prompt.empty() && o->file.empty()) {
              fmt::print(stderr, "error: give a prompt with -p TEXT or -f FILE\n");
              return 2;
            }
            std::shared_ptr<const JsonGrammar> json;
            if (!o->json_schema.empty()) {
              std::string text = o->json_schema;
              if (std::ifstream f(o->json_schema, std::ios::binary); f) {
                std::stringstream ss;
                ss << f.rdbuf();
                text = ss.str();
              }
              const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
              if (schema.is_discarded()) {
                fmt::print(stderr, "error: --json-schema: '{}' is neither a readable file nor JSON\n", o->json_schema);
                return 2;
              }
              Result<JsonGrammar> g = JsonGrammar::from_schema(schema);
              if (!g.ok()) {
                fmt::print(stderr, "error: --json-schema: {}\n", g.error().message);
                return 2;
              }
              json = std::make_shared<const JsonGrammar>(std::move(g).value());
            } else if (o->json) {
              json = std::make_shared<const JsonGrammar>(JsonGrammar::any_object());
            }
            EngineOptions eo;
            eo.threads = o->threads;
            DF_CHECK_OR_EXIT(apply_store_options(o->store, &eo));
            const auto t_open = std::chrono::steady_clock::now();
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_open).count();
            DF_ASSIGN_OR_EXIT(Tokenizer tok, Tokenizer::from_gguf(engine->file().meta()));
            if (const std::string took = apply_model_sampling(*sub, engine->file().meta(), &o->sp);
                !took.empty() && log_level() >= LogLevel::Warn)
              fmt::print(stderr, "sampling: the model's defaults {} (give a flag to change one)\n", took);
            std::string prompt = o->prompt;
            if (!o->file.empty()) {
              DF_ASSIGN_OR_EXIT(prompt, read_prompt_file(o->file, o->ctx, tok));
            }
            if (prompt.empty()) {
              fmt::print(stderr, "error: the prompt file '{}' is empty\n", o->file);
              return 2;
            }
            std::vector<int32_t> ids = tok.encode(prompt, true, true);
            // The sequence's state comes out of --mem like everything else (memory_budget.h).
            DF_CHECK_OR_EXIT(engine->plan_sequences({.n_ctx = o->ctx, .n_states = 1}));
            if (engine->memory_plan().streaming && log_level() >= LogLevel::Warn)
              fmt::print(stderr, "{}\n", plan_line(engine->memory_plan()));
            auto state = engine->model().new_state(o->ctx);
            SpecOptions so;
            so.max_draft = o->spec_max;
            so.adaptive = !o->spec_fixed;
            so.env = eo.env;
            DF_CHECK_OR_EXIT(parse_spec_mode(o->spec, &so));
            DF_ASSIGN_OR_EXIT(auto spec, make_speculator(so, *engine, tok, o->ctx, o->threads));
            GenerateParams gp;
            gp.n_predict = o->n;
            gp.n_batch = o->batch;
            gp.sampling = o->sp;
            gp.stop = o->stop;
            gp.ignore_eos = o->ignore_eos;
            gp.speculator = spec.get();
            gp.store = engine->streaming_store();
            gp.json = json;
            gp.cancel = &g_interrupted;
            struct sigaction sa {}, old_sa {};
            sa.sa_handler = on_sigint;
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = SA_RESTART;
            sigaction(SIGINT, &sa, &old_sa);
            GenerateStats st;
            DF_CHECK_OR_EXIT(generate(engine->model(), *state, tok, ids, gp,
                                      [](const std::string& s) {
                                        std::fwrite(s.data(), 1, s.size(), stdout);
                                        std::fflush(stdout);
                                        return true;
                                      },
                                      &st));
            sigaction(SIGINT, &old_sa, nullptr);
            std::fputc('\n', stdout);
            if (g_interrupted) fmt::print(stderr, "interrupted (Ctrl-C)\n");
            if (st.stop_reason == "error") {
              fmt::print(stderr, "error: no token of the vocabulary can continue the JSON document\n");
              return 1;
            }
            if (json && st.stop_reason != "eos")
              fmt::print(stderr, "warning: the JSON document is unfinished (stopped by {}; raise -n)\n", st.stop_reason);
            if (o->stats) {
              fmt::print(stderr, "\nload: {:.3f} s; peak memory (RSS): {:.1f} MiB\n", load_s,
                         double(platform::peak_rss_bytes()) / 1048576.0);
              fmt::print(stderr, "prompt: {} tokens in {:.3f} s ({:.1f} tok/s)\n", st.n_prompt, st.prefill_s,
                         st.n_prompt / std::max(st.prefill_s, 1e-9));
              fmt::print(stderr, "decode: {} tokens in {:.3f} s ({:.1f} tok/s)\n", st.n_generated, st.decode_s,
                         st.n_generated > 1 ? (st.n_generated - 1) / std::max(st.decode_s, 1e-9) : 0.0);
              fmt::print(stderr, "decode cpu: {:.3f} s user+sys ({:.3f} ms per token)\n", st.decode_cpu_s,
                         st.n_generated ? 1e3 * st.decode_cpu_s / st.n_generated : 0.0);
              fmt::print(stderr, "time to first token: {:.3f} s; stop: {}\n", st.ttft_s, st.stop_reason);
              // Speculation: cheap guesses of the next tokens, checked together in one pass of the model.
              fmt::print(stderr, "speculation: {}; {} tokens from {} model passes ({:.2f} per pass); {} guessed tokens "
                                 "checked, {} right ({:.1f}%)\n",
                         spec ? spec_mode_name(so.mode) : "off", st.n_generated, st.passes,
                         st.passes ? double(st.n_generated) / st.passes : 0.0, st.drafted, st.accepted,
                         st.drafted ? 100.0 * st.accepted / st.drafted : 0.0);
              if (st.literal_drafted)
                fmt::print(stderr, "  json: guessed {} tokens of the document's certain text, {} right\n",
                           st.literal_drafted, st.literal_accepted);
              if (spec)
                for (const std::string& line : spec->stats().per_drafter) fmt::print(stderr, "  {}\n", line);
              if (gp.store) {
                // A streamed prompt reads the union of its batch's experts per batch: one
                // batch over the whole prompt reads each expert at most once.
                fmt::print(stderr, "prefill read {:.1f} MiB of experts in {} batch{} of up to {} tokens",
                           st.prefill_bytes_read / 1048576.0, st.prefill_batches, st.prefill_batches == 1 ? "" : "es",
                           st.prefill_batch);
                if (st.prefill_lent_bytes)
                  fmt::print(stderr, " (the expert cache lent {:.1f} MiB for them)", st.prefill_lent_bytes / 1048576.0);
                if (st.prefill_batches > 1) {
                  const double per_tok = double(engine->memory_plan().batch_token_bytes);
                  fmt::print(stderr, "; -b {} (one batch, about {:.0f} MiB more memory) reads each expert at most once",
                             st.n_prompt, per_tok * double(st.n_prompt - st.prefill_batch) / 1048576.0);
                }
                fmt::print(stderr, "\n");
              }
              if (gp.store)
                fmt::print(stderr, "decode read {:.1f} MiB of experts: {:.2f} MiB per emitted token\n",
                           st.decode_bytes_read / 1048576.0,
                           st.n_generated ? st.decode_bytes_read / 1048576.0 / st.n_generated : 0.0);
              if (StreamingExpertStore* s = engine->streaming_store())
                fmt::print(stderr, "{}{}", format_stats(s->stats()), format_prefetch_stats(s->stats()));
              if (const CorePager* p = engine->core_pager())
                fmt::print(stderr, "{}; {} layer reads ({:.2f} GiB), {:.2f} s waiting for them\n", p->describe(),
                           p->stats().pages_in, p->stats().bytes_read / 1073741824.0, p->stats().wait_s);
              if (RemoteModel* r = engine->remote()) fmt::print(stderr, "{}", format_remote_stats(*r));
              fmt::print(stderr, "memory plan:\n{}", format_plan(engine->memory_plan()));
            }
            return g_interrupted ? 130 : 0;
          }};
}

}  // namespace deltafin::tools
