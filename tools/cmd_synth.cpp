// deltafin synth: write a synthetic GGUF model with random weights (or, with
// --format hf, the same model as a Hugging Face folder: format/hf_export.h).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include <fstream>
#include <sstream>

#include "commands.h"
#include "core/thread_pool.h"
#include "format/fragments.h"
#include "format/gguf_writer.h"
#include "format/hf_export.h"
#include "model/registry.h"
#include "quant/dynamic_mix.h"
#include "synth/synth.h"
#include "tool_common.h"

namespace deltafin::tools {
namespace {

std::string mixes_list() {
  std::string s;
  for (const std::string& m : dynamic_mix_names()) s += (s.empty() ? "" : ", ") + m;
  return s;
}

}  // namespace

Command add_synth(CLI::App& app) {
  struct Opts {
    std::string preset = "tiny", format = "gguf", hf_encoding = "plain", arch, out, type, expert_type, mix, vocab, size, mla, chat_template;
    int layers = 0, experts = 0, used = 0, threads = 0, split = 0, nextn = 0, fragments = 0;
    uint64_t fragment_align = 4096;
    int heads = 0, kda_period = -1, res_block = -1, kda_head_dim = 0;
    int64_t expert_width = 0, embd = 0, moe_latent = -1, vocab_size = 0;
    uint64_t seed = 1;
    float skew = -1;
    bool force = false, sparse = false, no_rope_freqs = false;
    std::vector<std::string> tensor_types;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("synth", "Write a synthetic GGUF model with random weights");
  std::string presets;
  for (auto& p : synth_preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  sub->add_option("--preset", o->preset, "Shape preset: " + presets)->capture_default_str();
  std::string archs;
  for (const Architecture& a : architectures()) archs += fmt::format("{}{}", archs.empty() ? "" : ", ", a.name);
  sub->add_option("--arch", o->arch, "Architecture for 'tiny': " + archs);
  // Runs while parsing (before -o is found missing) and ends it as --help does.
  sub->add_flag_callback(
      "--list-archs",
      [] {
        for (const Architecture& a : architectures()) fmt::print("{}\n", a.name);
        throw CLI::Success();
      },
      "Print the architectures --arch takes, one a line, and exit");
  sub->add_option("-o,--output", o->out, "Output .gguf path (missing directories are created)")->required();
  sub->add_flag("--force", o->force, "Overwrite the output if it exists");
  sub->add_option("--format", o->format,
                  "gguf, or hf: a Hugging Face folder at -o (safetensors shards with an index, experts out of "
                  "order, a vision tower to skip, config.json, generation_config.json, tokenizer files); F32, F16 "
                  "and BF16 models")
      ->check(CLI::IsMember({"gguf", "hf"}))
      ->capture_default_str();
  sub->add_option("--hf-encoding", o->hf_encoding,
                  "With --format hf: plain, or the weights stored as published checkpoints store them: fp8 "
                  "(E4M3 with 128x128 weight_scale_inv, as DeepSeek-V3 and Kimi K2) or int4 (compressed-tensors "
                  "pack-quantized experts, as Kimi K2 Thinking)")
      ->check(CLI::IsMember({"plain", "fp8", "int4"}))
      ->capture_default_str();
  sub->add_option("--type", o->type, "Type of the 2-D core matrices (F32, F16, BF16, Q8_0, Q4_0, Q4_K, ...)");
  sub->add_option("--expert-type", o->expert_type, "Type of the routed experts (default: --type, or the preset's)");
  sub->add_option("--mix", o->mix,
                  "A per-tensor type mix like the published low-bit dynamic quants (" + mixes_list() +
                      "): experts 1-3 bits with down projections a step higher, the core 4-6 bits, dense FFNs "
                      "Q8_0 (instead of --type/--expert-type; --tensor-type still applies after it)");
  sub->add_option("--layers", o->layers, "Number of layers");
  sub->add_option("--experts", o->experts, "Routed experts per MoE layer");
  sub->add_option("--experts-used", o->used, "Experts chosen per token");
  sub->add_option("--expert-width", o->expert_width, "Expert FFN width");
  sub->add_option("--embd", o->embd, "Hidden size");
  sub->add_option("--moe-latent", o->moe_latent, "kimi-k3: width of the latent the routed experts run at (0: none)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  sub->add_option("--heads", o->heads, "Attention heads")->check(CLI::Range(1, 1024));
  sub->add_option("--kda-head-dim", o->kda_head_dim, "kimi-k3: KDA head size")->check(CLI::Range(1, 4096));
  sub->add_option("--kda-period", o->kda_period,
                  "kimi-k3: every Nth layer (1-based) is gated MLA, the others KDA (0: all KDA)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--attn-res-block", o->res_block, "kimi-k3: attention-residual block size (0: plain residuals)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--size", o->size, "Target total size (e.g. 8G): raises the expert count to reach it");
  sub->add_option("--skew", o->skew, "Routing skew: 0 uniform; s > 0 ~ Zipf(s) expert popularity");
  sub->add_option("--vocab", o->vocab, "Copy the tokenizer from this GGUF (default: built-in byte-level BPE)");
  sub->add_option("--chat-template", o->chat_template,
                  "Write this Jinja file as tokenizer.chat_template (e.g. one of ../shared/templates)");
  sub->add_option("--vocab-size", o->vocab_size,
                  "Pad the vocabulary with unused tokens to this many (a real model's embedding size)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  sub->add_flag("--sparse", o->sparse,
                "Leave the tensor data as holes of a sparse file (all weights zero): a full-size model in a few "
                "MB of disk, for inspect and plan");
  sub->add_flag("--no-rope-freqs", o->no_rope_freqs,
                "llama: leave out rope_freqs.weight (the random per-pair rope factors 'tiny' writes; Mixtral and "
                "its Hugging Face folder have none)");
  sub->add_option("--seed", o->seed, "Random seed")->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Threads (default: all)")->check(CLI::Range(0, kMaxThreads));
  sub->add_option("--mla", o->mla,
                  "deepseek2 attention form: absorbed (attn_k_b/attn_v_b, as current DeepSeek/Kimi GGUFs) or "
                  "joined (attn_kv_b, older GGUFs)")
      ->check(CLI::IsMember({"absorbed", "joined"}));
  sub->add_option("--nextn", o->nextn,
                  "deepseek2: append N multi-token-prediction (MTP/nextn) blocks after the trunk, as DeepSeek-V3 "
                  "GGUFs that keep them (0 or 1)")
      ->check(CLI::Range(0, 1));
  sub->add_option("--tensor-type", o->tensor_types,
                  "REGEX=TYPE: matrices whose name matches REGEX get TYPE (repeatable, applied in order), "
                  "e.g. 'attn_.*=Q8_0'");
  sub->add_option("--split", o->split, "Write N parts NAME-0000k-of-0000N.gguf instead (llama.cpp gguf-split layout)");
  sub->add_option("--fragments", o->fragments,
                  "Write the file cut into N raw byte fragments OUT.part1ofN ... instead (meant to be concatenated, "
                  "as `split -n`; read with -m OUT.part1ofN)")
      ->check(CLI::Range(2, 9999));
  sub->add_option("--fragment-align", o->fragment_align,
                  "--fragments: cut at multiples of this many bytes (1: anywhere)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 40));
  return {sub, [o] {
            SynthSpec s;
            if (!synth_preset(o->preset, o->arch, &s)) {
              std::string names;
              for (auto& p : synth_preset_names()) names += (names.empty() ? "" : ", ") + p;
              fmt::print(stderr, "error: unknown preset '{}' (--preset takes one of: {})\n", o->preset, names);
              return 2;
            }
            auto type_opt = [](const std::string& name, DType* t) {
              if (name.empty()) return true;
              if (dtype_from_name(name, t)) return true;
              fmt::print(stderr, "error: unknown tensor type '{}'\n", name);
              return false;
            };
            if (!type_opt(o->type, &s.type)) return 2;
            if (!o->type.empty()) s.expert_type = s.type;
            if (!type_opt(o->expert_type, &s.expert_type)) return 2;
            if (!o->mix.empty()) {
              if (!o->type.empty() || !o->expert_type.empty()) {
                fmt::print(stderr, "error: --mix sets every matrix's type; give it without --type/--expert-type\n");
                return 2;
              }
              if (!is_dynamic_mix(o->mix, &s.mix)) {
                fmt::print(stderr, "error: unknown --mix '{}' (one of: {})\n", o->mix, mixes_list());
                return 2;
              }
            }
            if (o->layers) s.n_layer = o->layers;
            if (o->experts) s.n_expert = o->experts;
            if (o->used) s.n_used = o->used;
            if (o->expert_width) s.n_ff_exp = o->expert_width;
            if (o->embd) s.n_embd = o->embd;
            if (o->moe_latent >= 0) s.moe_latent = o->moe_latent;
            if (o->heads) s.n_head = o->heads;
            if (o->kda_head_dim) s.kda_head_dim = o->kda_head_dim;
            if (o->kda_period >= 0) s.kda_period = o->kda_period;
            if (o->res_block >= 0) s.attn_res_block = o->res_block;
            if (o->skew >= 0) s.skew = o->skew;
            for (const std::string& tt : o->tensor_types) {
              size_t eq = tt.rfind('=');
              SynthSpec::TypeOverride ov;
              if (eq == std::string::npos || eq == 0) {
                fmt::print(stderr, "error: --tensor-type wants REGEX=TYPE, got '{}'\n", tt);
                return 2;
              }
              ov.pattern = tt.substr(0, eq);
              if (!type_opt(tt.substr(eq + 1), &ov.type)) return 2;
              s.type_overrides.push_back(ov);
            }
            if (!o->mla.empty()) s.mla_split_kv_b = o->mla == "absorbed";
            s.nextn = o->nextn;
            if (o->no_rope_freqs) s.rope_freqs = false;
            s.seed = o->seed;
            s.vocab_path = o->vocab;
            if (o->vocab_size) s.n_vocab = o->vocab_size;
            s.sparse = o->sparse;
            if (o->sparse && o->split > 1) {
              fmt::print(stderr, "error: --sparse cannot be split (--split would write the holes out as zeros)\n");
              return 2;
            }
            if (!o->chat_template.empty()) {
              std::ifstream f(o->chat_template, std::ios::binary);
              if (!f) {
                fmt::print(stderr, "error: cannot read chat template file '{}'\n", o->chat_template);
                return 2;
              }
              std::stringstream ss;
              ss << f.rdbuf();
              s.chat_template = ss.str();
              if (s.chat_template.empty()) {
                fmt::print(stderr, "error: chat template file '{}' is empty\n", o->chat_template);
                return 2;
              }
            }
            if (!o->size.empty() && !parse_size(o->size, &s.target_bytes)) {
              fmt::print(stderr, "error: bad --size '{}'\n", o->size);
              return 2;
            }
            if (o->hf_encoding != "plain" && o->format != "hf") {
              fmt::print(stderr, "error: --hf-encoding is for --format hf\n");
              return 2;
            }
            if (o->format == "hf") {
              namespace fs = std::filesystem;
              std::error_code ec;
              if (s.arch == "llama" && s.rope_freqs) {
                fmt::print(stderr, "error: --format hf --arch llama writes a Mixtral folder, which has no "
                                   "rope_freqs.weight; give --no-rope-freqs (or --preset mixtral-mini)\n");
                return 2;
              }
              if (o->split > 0) {
                fmt::print(stderr, "error: --split is for --format gguf (a Hugging Face folder is always sharded)\n");
                return 2;
              }
              if (fs::exists(o->out, ec) && !fs::is_empty(o->out, ec)) {
                if (!o->force) {
                  fmt::print(stderr, "error: -o '{}' exists; give --force to replace it, or another directory\n", o->out);
                  return 2;
                }
                if (!fs::is_directory(o->out, ec) || !fs::exists(fs::path(o->out) / "config.json", ec)) {
                  fmt::print(stderr, "error: -o '{}' is not a model folder; --force replaces only those\n", o->out);
                  return 2;
                }
                fs::remove_all(o->out, ec);
              }
              // Missing parent directories are created, as for a .gguf output (the
              // model is written beside the folder first).
              if (const fs::path parent = fs::path(o->out).parent_path(); !parent.empty()) {
                fs::create_directories(parent, ec);
                if (ec) {
                  fmt::print(stderr, "error: -o '{}': cannot create '{}': {}\n", o->out, parent.string(), ec.message());
                  return 1;
                }
              }
              const std::string tmp = o->out + ".synth.gguf";
              ThreadPool pool(o->threads > 0 ? o->threads : default_thread_count());
              SynthReport r;
              Status st = synth_model(s, tmp, pool, &r);
              HfExportOptions eo;
              eo.seed = s.seed;
              eo.encoding = o->hf_encoding == "fp8"    ? HfEncoding::Fp8
                            : o->hf_encoding == "int4" ? HfEncoding::Int4
                                                       : HfEncoding::Plain;
              HfExportReport er;
              if (st.ok()) st = export_gguf_as_hf(tmp, o->out, eo, &er);
              std::remove(tmp.c_str());
              if (!st.ok()) {
                fmt::print(stderr, "error: {}\n", st.error().message);
                return 1;
              }
              fmt::print(stderr, "wrote {} ({} {} as a Hugging Face folder: {} shards, {} tensors, {:.1f} MiB)\n",
                         o->out, s.arch, o->preset, er.shards, er.tensors, er.bytes / 1048576.0);
              return 0;
            }
            if (o->fragments > 1 && o->split > 1) {
              fmt::print(stderr, "error: --fragments and --split are two ways of cutting a model; give one\n");
              return 2;
            }
            DF_CHECK_OR_EXIT(prepare_output(o->out, o->force, "-o"));
            if (o->fragments > 1) {
              for (int k = 1; k <= o->fragments; ++k)
                DF_CHECK_OR_EXIT(prepare_output(fragment_path(o->out, k, o->fragments), o->force, "-o ... --fragments"));
            }
            if (o->split > 1) {  // the parts' names (split_gguf's default prefix: the path less .gguf)
              const std::string stem = o->out.size() > 5 && o->out.ends_with(".gguf")
                                           ? o->out.substr(0, o->out.size() - 5) : o->out;
              for (int k = 1; k <= o->split; ++k)
                DF_CHECK_OR_EXIT(prepare_output(fmt::format("{}-{:05d}-of-{:05d}.gguf", stem, k, o->split),
                                                o->force, "-o ... --split"));
            }
            ThreadPool pool(o->threads > 0 ? o->threads : default_thread_count());
            SynthReport r;
            Status st = synth_model(s, o->out, pool, &r);
            if (st.ok() && o->split > 1) st = split_gguf(o->out, o->split, {.out_prefix = "", .remove_input = true});
            if (st.ok() && o->fragments > 1) st = cut_into_fragments(o->out, o->fragments, o->fragment_align, nullptr);
            if (!st.ok()) {
              fmt::print(stderr, "error: {}\n", st.error().message);
              return 1;
            }
            fmt::print(stderr, "wrote {} ({} {}, {} layers, {} experts, {:.1f} MiB, experts {:.1f} MiB{}) in {:.2f} s, "
                       "{:.0f} MiB/s\n", o->out, s.arch, o->preset, s.n_layer, r.n_expert, r.bytes / 1048576.0,
                       r.expert_bytes / 1048576.0, s.sparse ? ", sparse: data left as holes" : "", r.seconds,
                       r.bytes / 1048576.0 / std::max(r.seconds, 1e-9));
            return 0;
          }};
}

}  // namespace deltafin::tools
