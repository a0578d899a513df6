// deltafin quantize: re-encode a model's weight matrices to another tensor type.
#include <fmt/format.h>

#include "commands.h"
#include "quant/quantize_model.h"
#include "tool_common.h"

namespace deltafin::tools {

Command add_quantize(CLI::App& app) {
  struct Opts {
    std::string in, out, type = "Q8_0", fallback = "Q8_0";
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("quantize", "Re-encode a model's weight matrices (F32/F16/BF16 in) to another type");
  sub->add_option("input", o->in, "Input .gguf")->required();
  sub->add_option("output", o->out, "Output .gguf (missing directories are created)")->required();
  sub->add_flag("--force", o->force, "Overwrite the output if it exists");
  sub->add_option("--type", o->type, "Target type (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F16, ...)")->capture_default_str();
  sub->add_option("--fallback", o->fallback, "Type for matrices whose rows do not fit the target's blocks")
      ->capture_default_str();
  return {sub, [o] {
            QuantizeOptions q;
            for (auto [name, t] : {std::pair{&o->type, &q.type}, std::pair{&o->fallback, &q.fallback}}) {
              if (!dtype_from_name(*name, t)) {
                fmt::print(stderr, "error: unknown tensor type '{}'\n", *name);
                return 2;
              }
            }
            DF_CHECK_OR_EXIT(prepare_output(o->out, o->force, "output"));
            QuantizeReport r;
            Status st = quantize_model(o->in, o->out, q, &r);
            if (!st.ok()) {
              fmt::print(stderr, "error: {}\n", st.error().message);
              return 1;
            }
            fmt::print(stderr, "wrote {}: {:.2f} MiB -> {:.2f} MiB; {} tensors {}, {} {}, {} unchanged\n", o->out,
                       r.bytes_in / 1048576.0, r.bytes_out / 1048576.0, r.converted, o->type, r.fell_back, o->fallback, r.kept);
            return 0;
          }};
}

}  // namespace deltafin::tools
