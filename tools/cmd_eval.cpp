// deltafin eval: evaluate a token sequence (teacher forcing) and print the top-K
// logits after each position as JSON lines {"pos": i, "top": [[id, logit], ...]};
// with --dump, also the named intermediate tensors of one position (Model's
// TensorHook) as {"tensor": name, "layer": l, "pos": p, "n": n, "values": [...]},
// to trace a mismatch against llama.cpp (its eval-callback) to a layer.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "commands.h"
#include "runtime/engine.h"
#include "store_options.h"
#include "tool_common.h"

namespace deltafin::tools {

Command add_eval(CLI::App& app) {
  struct Opts {
    std::string model, ids, prompt;
    int top = 10, batch = 0, threads = 0, ctx = 0;
    bool all = false, stats = false;
    std::vector<std::string> dump;
    int dump_pos = -1;
    StoreCli store;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("eval", "Evaluate a token sequence and print top-K logits as JSON lines");
  sub->add_option("model,-m,--model", o->model, "Model: .gguf path, Hugging Face model folder, URL or hf:// location")->required();
  sub->add_option("--ids", o->ids, "Comma-separated token ids");
  sub->add_option("-p,--prompt", o->prompt, "Text to tokenize and evaluate");
  sub->add_option("--top", o->top, "Logits to print per position")->capture_default_str();
  sub->add_flag("--all-positions", o->all, "Print every position, not only the last");
  sub->add_option("-b,--batch", o->batch, "Tokens per forward pass (default: all at once; 1 = one by one)");
  sub->add_option("-t,--threads", o->threads, "Threads")->check(CLI::Range(0, kMaxThreads));
  sub->add_option("-c,--ctx-size", o->ctx, "Context size (default: the sequence length)")
      ->check(CLI::Range(0, kMaxCtxSize));
  sub->add_flag("--stats", o->stats, "Print expert cache statistics to stderr");
  sub->add_option("--dump", o->dump,
                  "NAME[@LAYER]: print the intermediate tensor NAME (llama.cpp's graph names: attn_norm, kqv_out, "
                  "attn_out, ffn_inp, ffn_norm, ffn_moe_logits, ffn_moe_out, l_out, ...) of every layer or of "
                  "LAYER, at --dump-pos, as JSON lines (repeatable)");
  sub->add_option("--dump-pos", o->dump_pos, "Position whose tensors --dump prints (default: the last)")
      ->check(CLI::Range(0, kMaxCtxSize));
  add_store_options(sub, o->store);
  return {sub, [o] {
            EngineOptions eo;
            eo.threads = o->threads;
            DF_CHECK_OR_EXIT(apply_store_options(o->store, &eo));
            DF_ASSIGN_OR_EXIT(auto engine, Engine::open(o->model, eo));
            std::vector<int32_t> ids;
            if (!o->ids.empty()) {
              DF_ASSIGN_OR_EXIT(ids, parse_ids(o->ids));
            } else if (!o->prompt.empty()) {
              DF_ASSIGN_OR_EXIT(ids, tokenize_prompt(engine->file(), o->prompt));
            } else {
              fmt::print(stderr, "error: give --ids or -p\n");
              return 2;
            }
            Model& m = engine->model();
            const int64_t V = m.info().n_vocab;
            const int n = int(ids.size());
            const int n_ctx = o->ctx > 0 ? o->ctx : n;
            DF_CHECK_OR_EXIT(engine->plan_sequences({.n_ctx = n_ctx, .n_states = 1}));  // out of --mem (memory_budget.h)
            // --dump NAME[@LAYER]: layer -1 is every layer.
            std::vector<std::pair<std::string, int>> dumps;
            for (const std::string& d : o->dump) {
              const size_t at = d.find('@');
              int layer = -1;
              if (at != std::string::npos) {
                char* end = nullptr;
                const long l = std::strtol(d.c_str() + at + 1, &end, 10);
                if (at + 1 == d.size() || *end != 0 || l < 0 || l >= m.info().n_layer) {
                  fmt::print(stderr, "error: --dump '{}': the layer after '@' must be 0..{}\n", d,
                             m.info().n_layer - 1);
                  return 2;
                }
                layer = int(l);
              }
              dumps.emplace_back(d.substr(0, at), layer);
            }
            const int dump_pos = o->dump_pos >= 0 ? o->dump_pos : n - 1;
            if (!dumps.empty() && dump_pos >= n) {
              fmt::print(stderr, "error: --dump-pos {} is past the {} tokens evaluated\n", dump_pos, n);
              return 2;
            }
            std::set<std::string> seen;  // every name the pass has, for the error when one is unknown
            std::vector<int> hits(dumps.size(), 0);
            if (!dumps.empty())
              m.set_tensor_hook([&](std::string_view name, int layer, int pos, const float* v, int64_t nv) {
                seen.emplace(name);
                if (pos != dump_pos) return;
                for (size_t i = 0; i < dumps.size(); ++i) {
                  if (dumps[i].first != name || (dumps[i].second >= 0 && dumps[i].second != layer)) continue;
                  ++hits[i];
                  std::string line = fmt::format("{{\"tensor\":\"{}\",\"layer\":{},\"pos\":{},\"n\":{},\"values\":[",
                                                 name, layer, pos, nv);
                  for (int64_t j = 0; j < nv; ++j) line += fmt::format("{}{:.9g}", j ? "," : "", v[j]);
                  line += "]}\n";
                  std::fputs(line.c_str(), stdout);
                  break;
                }
              });
            auto st = m.new_state(n_ctx);
            const int batch = o->batch > 0 ? o->batch : n;
            std::vector<float> logits;
            for (int i = 0; i < n; i += batch) {
              const int b = std::min(batch, n - i);
              logits.resize(size_t(b) * size_t(V));
              DF_CHECK_OR_EXIT(m.forward(*st, &ids[size_t(i)], b, logits.data(), true));
              for (int j = 0; j < b; ++j) {
                const int pos = i + j;
                if (!o->all && pos != n - 1) continue;
                const float* l = &logits[size_t(j) * size_t(V)];
                std::vector<int32_t> idx(static_cast<size_t>(V));
                std::iota(idx.begin(), idx.end(), 0);
                const int k = int(std::min<int64_t>(o->top, V));
                std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                                  [&](int32_t a, int32_t c) { return l[a] > l[c] || (l[a] == l[c] && a < c); });
                std::string line = fmt::format("{{\"pos\":{},\"top\":[", pos);
                for (int t = 0; t < k; ++t)
                  line += fmt::format("{}[{},{:.7g}]", t ? "," : "", idx[size_t(t)], l[idx[size_t(t)]]);
                line += "]}\n";
                std::fputs(line.c_str(), stdout);
              }
            }
            m.set_tensor_hook({});
            for (size_t i = 0; i < dumps.size(); ++i) {
              if (hits[i] > 0) continue;
              std::string names;
              for (const std::string& s : seen) names += (names.empty() ? "" : ", ") + s;
              fmt::print(stderr, "error: --dump '{}': no tensor of that name{} in a {} pass (it names: {})\n",
                         o->dump[i], dumps[i].second >= 0 ? " at that layer" : "", m.info().arch,
                         names.empty() ? "none" : names);
              return 1;
            }
            if (o->stats) {
              if (StreamingExpertStore* s = engine->streaming_store())
                fmt::print(stderr, "{}{}", format_stats(s->stats()), format_prefetch_stats(s->stats()));
              if (RemoteModel* r = engine->remote()) fmt::print(stderr, "{}", format_remote_stats(*r));
              fmt::print(stderr, "memory plan:\n{}", format_plan(engine->memory_plan()));
            }
            return 0;
          }};
}

}  // namespace deltafin::tools
