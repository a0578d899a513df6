// deltafin serve: the OpenAI-compatible HTTP server (src/server) over a continuous-
// batching scheduler. SIGTERM/SIGINT: stop taking requests, let the running ones
// finish (at most --drain-timeout seconds), then exit; a second signal cancels them.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "commands.h"
#include "core/log.h"
#include "core/platform.h"
#include "runtime/engine.h"
#include "runtime/prompt_disk_cache.h"
#include "runtime/scheduler.h"
#include "runtime/speculative.h"
#include "server/server.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

Command add_serve(CLI::App& app) {
  struct Opts {
    std::string model, host = "127.0.0.1", api_key, chat_template_file, max_body = "4M", prompt_cache_mem;
    std::string prompt_cache_dir, prompt_cache_disk = "8G";
    int port = 8080, ctx = 4096, threads = 0, parallel = 4, prefill_chunk = 256, queue = 64, spec_max = 16;
    std::string spec = "auto";
    double drain_timeout = 30, request_timeout = 30;
    int max_connections = 512, max_client_connections = 128;
    bool no_reasoning = false, no_prompt_cache = false;
    std::string template_kwargs;
    std::vector<std::string> cors, alias;
    StoreCli store;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  sub->add_option("model,-m,--model", o->model, "Model: .gguf path, Hugging Face model folder, URL or hf:// location; -m PART1 -m PART2 ...: the byte fragments of one .gguf (NAME.part1ofN alone names its set)")->join()->required();
  sub->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", o->port, "Port (0: any free port, printed at start)")->capture_default_str();
  sub->add_option("--api-key", o->api_key,
                  "Require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on /v1/ endpoints, /tokenize and /detokenize");
  sub->add_option("--cors", o->cors,
                  "Let web pages from this origin (e.g. http://localhost:3000; '*': any) call the server from a "
                  "browser; repeatable (default: none)");
  sub->add_option("--alias", o->alias,
                  "Model name clients use (default: the file name without .gguf); repeatable: the first is the id "
                  "/v1/models lists, requests may name any (e.g. the two models Claude Code asks for); '*': "
                  "requests may name any model, as with llama-server (other names get 404)");
  sub->add_option("-c,--ctx-size", o->ctx, "Context size per sequence in tokens")
      ->check(CLI::Range(1, kMaxCtxSize))
      ->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (default: all)")->check(CLI::Range(0, kMaxThreads));
  sub->add_option("--parallel", o->parallel, "Sequences decoded together at most")->capture_default_str();
  sub->add_option("--prefill-chunk", o->prefill_chunk, "Prompt tokens per batched step (chunked prefill)")
      ->capture_default_str();
  sub->add_option("--queue", o->queue, "Requests waiting for a batch place at most (more get 503)")
      ->capture_default_str();
  sub->add_option("--spec", o->spec,
                  "Speculative decoding per request, guesses verified in the batched step (output unchanged): "
                  "auto (prompt lookup, and the model's MTP block where it has one), ngram (prompt lookup), self "
                  "(the model on the experts already in RAM), mtp, draft:PATH (a small GGUF with the same "
                  "vocabulary), or off")
      ->capture_default_str();
  sub->add_option("--spec-max", o->spec_max, "Most guessed tokens per request and step (1..16)")
      ->capture_default_str();
  sub->add_option("--chat-template", o->chat_template_file,
                  "Jinja chat template file (default: the model's tokenizer.chat_template, else ChatML)");
  sub->add_option("--max-body", o->max_body, "Largest request body")->capture_default_str();
  sub->add_option("--drain-timeout", o->drain_timeout, "Seconds SIGTERM waits for running requests")
      ->capture_default_str();
  sub->add_option("--request-timeout", o->request_timeout,
                  "Seconds a request's head and body may take to arrive, however slowly they trickle (then 408)")
      ->capture_default_str();
  sub->add_option("--max-connections", o->max_connections,
                  "Open HTTP connections at most, all clients together (more are answered 503 and closed)")
      ->capture_default_str();
  sub->add_option("--max-client-connections", o->max_client_connections,
                  "Open HTTP connections at most from one client address (more are answered 503 and closed)")
      ->capture_default_str();
  sub->add_flag("--no-prompt-cache", o->no_prompt_cache,
               "Do not keep finished requests' states for prompts that continue them (a chat's next turn)");
  sub->add_option("--prompt-cache-mem", o->prompt_cache_mem,
                  "RAM for finished conversations' states beyond the --parallel batch places, shrunk to what "
                  "they hold, so that many users' next turns skip their history (default: a tenth of the "
                  "expert cache with --mem, else 1G; 0: off). Taken from --mem");
  sub->add_option("--prompt-cache-dir", o->prompt_cache_dir,
                  "Directory for a disk tier of the prompt cache: conversations' states the RAM tier drops, "
                  "and at exit all of them, are written there, so that their next turns (also after a "
                  "restart) skip their history (default: none)");
  sub->add_option("--prompt-cache-disk", o->prompt_cache_disk,
                  "Disk the prompt cache's disk tier may take for this model (least recently used removed "
                  "first)")
      ->capture_default_str();
  sub->add_option("--chat-template-kwargs", o->template_kwargs,
                  "JSON object of variables for the chat template of every request (e.g. '{\"thinking\": false}' "
                  "for Kimi K3, '{\"enable_thinking\": false}' for Qwen3); a request's chat_template_kwargs override "
                  "them");
  sub->add_flag("--no-reasoning", o->no_reasoning, "Do not split <think> text into reasoning_content");
  add_store_options(sub, o->store);
  return {sub, [o, sub] {
            if (o->parallel < 1 || o->ctx < 1 || o->prefill_chunk < 1 || o->queue < 0) {
              fmt::print(stderr, "error: --parallel, -c and --prefill-chunk must be >= 1 and --queue >= 0\n");
              return 2;
            }
            SpecOptions spec;
            if (Status ps = parse_spec_mode(o->spec, &spec); !ps.ok()) {
              fmt::print(stderr, "error: {}\n", ps.error().message);
              return 2;
            }
            if (o->spec_max < 1 || o->spec_max > SpecOptions::kMaxDraft) {
              fmt::print(stderr, "error: --spec-max {} must be 1..{}\n", o->spec_max, SpecOptions::kMaxDraft);
              return 2;
            }
            if (!(o->request_timeout > 0 && o->request_timeout <= 86400)) {
              fmt::print(stderr, "error: --request-timeout {} must be above 0 and at most 86400 seconds\n",
                         o->request_timeout);
              return 2;
            }
            if (o->max_connections < 1 || o->max_connections > 65536 || o->max_client_connections < 1 ||
                o->max_client_connections > o->max_connections) {
              fmt::print(stderr, "error: --max-connections {} must be 1..65536 and --max-client-connections {} "
                                 "1..--max-connections\n", o->max_connections, o->max_client_connections);
              return 2;
            }
            uint64_t prompt_cache_mem = kMemAuto;  // default: the plan's
            if (!o->prompt_cache_mem.empty() && !parse_size(o->prompt_cache_mem, &prompt_cache_mem)) {
              fmt::print(stderr, "error: bad --prompt-cache-mem '{}' (expected a size such as 512M, or 0)\n",
                         o->prompt_cache_mem);
              return 2;
            }
            uint64_t max_body = 0;
            if (!parse_size(o->max_body, &max_body) || max_body == 0) {
              fmt::print(stderr, "error: bad --max-body '{}' (expected a size such as 4M)\n", o->max_body);
              return 2;
            }
            nlohmann::json template_kwargs = nlohmann::json::object();
            if (!o->template_kwargs.empty()) {
              template_kwargs = nlohmann::json::parse(o->template_kwargs, nullptr, false);
              if (!template_kwargs.is_object()) {
                fmt::print(stderr, "error: --chat-template-kwargs '{}' is not a JSON object\n", o->template_kwargs);
                return 2;
              }
            }
            std::string tmpl_src;
            if (!o->chat_template_file.empty()) {
              std::ifstream f(o->chat_template_file, std::ios::binary);
              if (!f) {
                fmt::print(stderr, "error: cannot read chat template file '{}'\n", o->chat_template_file);
                return 1;
              }
              std::stringstream ss;
              ss << f.rdbuf();
              tmpl_src = ss.str();
            }
            // Signals go to the watcher thread only: block them before any thread starts.
            sigset_t sigs;
            sigemptyset(&sigs);
            sigaddset(&sigs, SIGINT);
            sigaddset(&sigs, SIGTERM);
            pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
            signal(SIGPIPE, SIG_IGN);

            EngineOptions eo;
            eo.threads = o->threads;
            DF_CHECK_OR_EXIT(apply_store_options(o->store, &eo));
            const auto t_open = std::chrono::steady_clock::now();
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_open).count();
            DF_ASSIGN_OR_EXIT(Tokenizer tok, Tokenizer::from_gguf(engine->file().meta()));
            if (tmpl_src.empty()) {
              auto t = engine->file().meta().get_string("tokenizer.chat_template");
              if (t.ok()) tmpl_src = t.value();
              else DF_LOG_WARN("the model has no chat template; chat requests use ChatML, as `deltafin chat` does (see "
                               "--chat-template)");
            }
            Model& model = engine->model();
            // The batch's states (and, with n choices, the copy of their prompt's) and the
            // prompt cache come out of --mem like everything else (memory_budget.h).
            const int n_states = o->parallel + (o->parallel > 1 ? 1 : 0);
            DF_CHECK_OR_EXIT(engine->plan_sequences({.n_ctx = o->ctx,
                                                     .n_states = n_states,
                                                     .serving = true,
                                                     .prompt_cache = o->no_prompt_cache ? 0 : prompt_cache_mem}));
            const MemoryPlan& plan = engine->memory_plan();
            if (!model.batches() && o->parallel > 1)
              DF_LOG_WARN("the {} architecture has no batched forward pass yet: requests share the scheduler "
                          "but each runs its own pass", model.info().arch);
            SchedulerOptions so;
            so.n_parallel = o->parallel;
            so.n_ctx = o->ctx;
            so.prefill_chunk = o->prefill_chunk;
            so.max_queue = o->queue;
            // Each request's drafters. Self-speculation drafts each sequence on its own,
            // outside the shared step, so auto leaves it to --spec self.
            spec.auto_self = false;
            spec.max_draft = o->spec_max;
            DF_ASSIGN_OR_EXIT(so.make_drafters,
                              make_drafter_factory(spec, *engine, tok, o->ctx, o->threads));
            so.spec_max = so.make_drafters ? o->spec_max : 0;
            so.prompt_cache = !o->no_prompt_cache;
            so.prompt_cache_bytes = plan.prompt_cache;
            so.store = engine->streaming_store();
            std::unique_ptr<PromptDiskCache> disk;
            if (!o->prompt_cache_dir.empty() && !o->no_prompt_cache) {
              uint64_t disk_bytes = 0;
              if (!parse_size(o->prompt_cache_disk, &disk_bytes)) {
                fmt::print(stderr, "error: bad --prompt-cache-disk '{}' (expected a size such as 8G)\n",
                           o->prompt_cache_disk);
                return 2;
              }
              // States belong to one model file: its name and size say which.
              const std::string id = fmt::format("{}-{:x}", std::filesystem::path(o->model).filename().string(),
                                                 engine->file().total_bytes());
              auto d = PromptDiskCache::open(o->prompt_cache_dir, id, disk_bytes);
              if (!d.ok()) {
                fmt::print(stderr, "error: --prompt-cache-dir: {}\n", d.error().message);
                return 1;
              }
              disk = std::move(*d);
              so.disk = disk.get();
            }
            Scheduler sched(model, tok, so);

            server::ServerOptions sv;
            sv.host = o->host;
            sv.port = o->port;
            sv.api_key = o->api_key;
            sv.cors_origins = o->cors;
            sv.batched = model.batches();
            std::vector<std::string> names;
            for (const std::string& a : o->alias) {
              if (a == "*") sv.any_model_name = true;
              else names.push_back(a);
            }
            sv.model_id = names.empty() ? std::filesystem::path(o->model).stem().string() : names[0];
            if (names.size() > 1) sv.model_aliases.assign(names.begin() + 1, names.end());
            sv.max_body_bytes = size_t(max_body);
            sv.request_timeout_s = o->request_timeout;
            sv.max_connections = o->max_connections;
            sv.max_client_connections = o->max_client_connections;
            sv.chat_template = tmpl_src;
            if (model.info().n_ctx_train > 0) sv.default_max_tokens = model.info().n_ctx_train;
            if (const std::string took = apply_model_sampling(*sub, engine->file().meta(), &sv.sampling);
                !took.empty())
              fmt::print("deltafin serve: requests that leave them out get the model's sampling: {}\n", took);
            sv.reasoning = !o->no_reasoning;
            sv.template_kwargs = template_kwargs;
            sv.memory_plan = &plan;
            server::Server srv(sched, tok, model.info(), engine->streaming_store(), sv);
            DF_ASSIGN_OR_EXIT(int port, srv.bind());
            fmt::print("deltafin serve: listening on http://{}:{} (model '{}', {} parallel, context {}, sequence "
                       "states {:.1f} MiB, prompt cache {:.1f} MiB{})\n",
                       o->host, port, sv.model_id, o->parallel, o->ctx, double(plan.states_bytes()) / 1048576.0,
                       plan.prompt_cache / 1048576.0, engine->streaming_store() ? ", both of --mem" : "");
            if (disk) {
              const PromptDiskStats ds = disk->stats();
              fmt::print("deltafin serve: prompt cache on disk: {} ({} states, {:.1f} MiB of {})\n", disk->dir(),
                         ds.entries, double(ds.bytes) / 1048576.0, o->prompt_cache_disk);
            }
            {
              fmt::print("deltafin serve: model loaded in {:.2f} s; peak memory (RSS) so far {:.1f} MiB\n", load_s,
                         double(platform::peak_rss_bytes()) / 1048576.0);
            }
            std::fflush(stdout);

            std::atomic<bool> exiting{false};
            std::thread drainer;
            std::thread watcher([&] {
              int seen = 0;
              while (!exiting) {
                const int sig = platform::wait_signal(sigs, 200);
                if (sig == 0) continue;
                if (++seen == 1) {
                  fmt::print(stderr, "deltafin serve: signal {}: finishing running requests (at most {} s; signal "
                                     "again to cancel them)\n", sig, o->drain_timeout);
                  srv.set_draining();
                  drainer = std::thread([&] {
                    sched.shutdown(true, std::chrono::milliseconds(int64_t(o->drain_timeout * 1000)));
                    srv.stop();
                  });
                } else {
                  fmt::print(stderr, "deltafin serve: signal {}: cancelling running requests\n", sig);
                  sched.cancel_all();
                }
              }
            });
            srv.run();
            exiting = true;
            watcher.join();
            if (drainer.joinable()) drainer.join();
            sched.shutdown(false);
            fmt::print(stderr, "deltafin serve: stopped\n");
            return 0;
          }};
}

}  // namespace deltafin::tools
