// deltafin perplexity: perplexity of a model over a text file, computed as
// llama-perplexity does: the tokens are cut into chunks of n_ctx; each chunk is
// evaluated from an empty context (its first token replaced by BOS when the model
// adds one) and only the second half of each chunk is scored.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "environment.h"
#include "commands.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"
#include "tool_common.h"

namespace deltafin::tools {

Command add_perplexity(CLI::App& app) {
  struct Opts {
    std::string model, file, core_type;
    int ctx = 512, threads = 0, batch = 512, chunks = -1;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("perplexity", "Perplexity over a text file (as llama-perplexity)");
  sub->add_option("model,-m,--model", o->model, "Model .gguf")->join()->required();
  sub->add_option("-f,--file", o->file, "Text file")->required();
  sub->add_option("-c,--ctx-size", o->ctx, "Chunk size in tokens")
      ->check(CLI::Range(2, kMaxCtxSize))
      ->capture_default_str();
  sub->add_option("-b,--batch-size", o->batch, "Tokens per forward pass")->capture_default_str();
  sub->add_option("--chunks", o->chunks, "Score only the first N chunks");
  sub->add_option("-t,--threads", o->threads, "Threads")->check(CLI::Range(0, kMaxThreads));
  sub->add_option("--core-type", o->core_type,
                  "Score the model with its core re-encoded to this type (as run --core-type): what it costs");
  return {sub, [o] {
            std::ifstream f(o->file, std::ios::binary);
            if (!f) {
              fmt::print(stderr, "error: cannot read '{}'\n", o->file);
              return 1;
            }
            std::stringstream ss;
            ss << f.rdbuf();
            EngineOptions eo;
            eo.threads = o->threads;
            eo.env = environment();
            eo.core_type = o->core_type;
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            DF_ASSIGN_OR_EXIT(Tokenizer tok, Tokenizer::from_gguf(engine->file().meta()));
            std::vector<int32_t> ids = tok.encode(ss.str(), true, false);
            const int n_ctx = o->ctx;
            int n_chunk = int(ids.size()) / n_ctx;
            if (o->chunks >= 0) n_chunk = std::min(n_chunk, o->chunks);
            if (n_chunk < 1) {
              fmt::print(stderr, "error: the file has {} tokens; need at least {} (2 x ctx/2) — use a longer "
                         "file or a smaller -c\n", ids.size(), n_ctx);
              return 1;
            }
            Model& m = engine->model();
            const int64_t V = m.info().n_vocab;
            const int first = n_ctx / 2;
            double nll = 0, nll2 = 0;
            int64_t count = 0;
            std::vector<float> logits;
            fmt::print(stderr, "perplexity: {} tokens, {} chunks of {}\n", ids.size(), n_chunk, n_ctx);
            for (int c = 0; c < n_chunk; ++c) {
              std::vector<int32_t> chunk(ids.begin() + int64_t(c) * n_ctx, ids.begin() + int64_t(c + 1) * n_ctx);
              if (tok.add_bos()) chunk[0] = tok.bos();
              auto st = m.new_state(n_ctx);
              logits.resize(size_t(n_ctx) * size_t(V));
              for (int i = 0; i < n_ctx; i += o->batch) {
                const int b = std::min(o->batch, n_ctx - i);
                DF_CHECK_OR_EXIT(m.forward(*st, &chunk[size_t(i)], b, &logits[size_t(i) * size_t(V)], true));
              }
              for (int i = first; i < n_ctx - 1; ++i) {
                const float* l = &logits[size_t(i) * size_t(V)];
                float mx = l[0];
                for (int64_t k = 1; k < V; ++k) mx = std::max(mx, l[k]);
                double sum = 0;
                for (int64_t k = 0; k < V; ++k) sum += std::exp(double(l[k] - mx));
                const double lp = double(l[chunk[size_t(i + 1)]] - mx) - std::log(sum);
                nll -= lp;
                nll2 += lp * lp;
                ++count;
              }
              fmt::print("[{}]{:.4f},", c + 1, std::exp(nll / double(count)));
              std::fflush(stdout);
            }
            const double mean = nll / double(count);
            const double var = nll2 / double(count) - mean * mean;
            const double err = count > 1 ? std::sqrt(std::max(var, 0.0) / double(count - 1)) : 0.0;
            fmt::print("\nFinal estimate: PPL = {:.4f} +/- {:.5f}\n", std::exp(mean), std::exp(mean) * err);
            return 0;
          }};
}

}  // namespace deltafin::tools
