// deltafin quantize: re-encode a model's weight matrices to another tensor type.
// Takes llama-quantize's form too: `deltafin quantize IN.gguf OUT.gguf Q4_K_M`.
#include <fmt/format.h>

#include "commands.h"
#include "quant/imatrix.h"
#include "quant/quantize_model.h"
#include "tool_common.h"

namespace deltafin::tools {

Command add_quantize(CLI::App& app) {
  struct Opts {
    std::string in, out, type = "Q8_0", type_pos, fallback = "Q8_0", imatrix;
    bool force = false;
    bool keep_experts = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("quantize", "Re-encode a model's weight matrices (F32/F16/BF16 in) to another type");
  sub->add_option("input,-m,--model", o->in, "Input .gguf or Hugging Face model folder")->join()->required();
  sub->add_option("output", o->out, "Output .gguf (missing directories are created)")->required();
  sub->add_flag("--force", o->force, "Overwrite the output if it exists");
  auto* pos = sub->add_option("type", o->type_pos, "Target type, as llama-quantize takes it (the same as --type)");
  sub->add_option("--type", o->type,
                  "Target: a type (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F16, ...: every matrix gets it) or one of "
                  "llama-quantize's mixes (Q4_K_M, Q5_K_S, Q3_K_L, ...: some matrices get more bits, as llama.cpp "
                  "picks them)")
      ->capture_default_str()
      ->excludes(pos);
  sub->add_flag("--keep-experts", o->keep_experts,
                "Copy the routed experts as they are and re-encode only the core (what run --core-type computes with)");
  sub->add_option("--imatrix", o->imatrix,
                  "llama.cpp importance matrix (llama-imatrix's .gguf or legacy .dat) for the i-quants (IQ1_S ... "
                  "IQ3_S): each value's error weighs by how much its column's activations matter");
  sub->add_option("--fallback", o->fallback, "Type for matrices whose rows do not fit the target's blocks")
      ->capture_default_str();
  return {sub, [o] {
            const std::string& type = o->type_pos.empty() ? o->type : o->type_pos;
            QuantizeOptions q;
            if (Status st = parse_quantize_target(type, &q); !st.ok()) {
              fmt::print(stderr, "error: {}\n", st.error().message);
              return 2;
            }
            QuantizeOptions fb;
            if (Status st = parse_quantize_target(o->fallback, &fb); !st.ok() || !fb.mix.empty()) {
              fmt::print(stderr, "error: --fallback: {}\n",
                         st.ok() ? fmt::format("'{}' is a mix; give one type", o->fallback) : st.error().message);
              return 2;
            }
            q.fallback = fb.type;
            q.keep_experts = o->keep_experts;
            Imatrix imatrix;
            if (!o->imatrix.empty()) {
              auto m = load_imatrix(o->imatrix);
              if (!m.ok()) {
                fmt::print(stderr, "error: {}\n", m.error().message);
                return 1;
              }
              imatrix = std::move(*m);
              q.imatrix = &imatrix;
              fmt::print(stderr, "imatrix {}: {} entries ({} format{})\n", o->imatrix, imatrix.entries.size(),
                         imatrix.legacy ? "legacy .dat" : "GGUF",
                         imatrix.chunk_count >= 0 ? fmt::format(", computed on {} chunks", imatrix.chunk_count) : "");
            }
            // llama-quantize refuses these without an importance matrix (for every
            // tensor but token_embd and output, tensor_requires_imatrix); deltafin
            // then quantizes by plain squared error, which costs model quality.
            for (DType t : {DType::IQ1_S, DType::IQ1_M, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS})
              if (q.type == t && !q.imatrix)
                fmt::print(stderr, "warning: {} without an importance matrix: every weight counts the same, "
                                   "expect a worse model than llama.cpp's imatrix quants\n",
                           dtype_name(t));
            DF_CHECK_OR_EXIT(prepare_output(o->out, o->force, "output"));
            QuantizeReport r;
            Status st = quantize_model(o->in, o->out, q, &r);
            if (!st.ok()) {
              fmt::print(stderr, "error: {}\n", st.error().message);
              return 1;
            }
            if (q.imatrix && r.imatrix_used + r.imatrix_missing == 0) {
              fmt::print(stderr, "imatrix: not used: no matrix goes to a type whose quantizer weighs by one (the "
                                 "i-quants IQ1_S ... IQ3_S)\n");
            } else if (q.imatrix) {
              fmt::print(stderr, "imatrix: {} tensors quantized with their importance vectors\n", r.imatrix_used);
              if (r.imatrix_missing)
                fmt::print(stderr, "warning: {} tensors have no entry in the imatrix and were quantized unweighted "
                                   "(llama-imatrix records no token_embd, nor output without --process-output)\n",
                           r.imatrix_missing);
            }
            std::string types;
            for (const auto& [name, n] : r.types) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", n, name);
            fmt::print(stderr, "wrote {}: {:.2f} MiB -> {:.2f} MiB; {} tensors converted ({}), {} of them to {} (rows "
                       "that do not fit {}), {} unchanged\n",
                       o->out, r.bytes_in / 1048576.0, r.bytes_out / 1048576.0, r.converted + r.fell_back,
                       types.empty() ? "none" : types, r.fell_back, o->fallback, type, r.kept);
            return 0;
          }};
}

}  // namespace deltafin::tools
