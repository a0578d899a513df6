// deltafin tokenize: text -> token ids with a model's tokenizer (llama-tokenize).
//
//   deltafin tokenize -m MODEL.gguf -p "Hello world"          ids on one line
//   deltafin tokenize -m MODEL.gguf -f prompt.txt --pieces    one "id -> 'piece'" per line
//   deltafin tokenize -m MODEL.gguf --batch texts.bin          texts separated by NUL bytes,
//                                                             one line of ids per text
//   deltafin tokenize -m HF_FOLDER --save-vocab V.gguf        also write the tokenizer keys as a
//                                                             vocabulary-only GGUF (llama.cpp loads it)
//
// Works on full models and on vocab-only GGUFs: only the metadata is read. MODEL
// may also be a local Hugging Face folder: its tokenizer files (tokenizer.json,
// tokenizer.model or tiktoken.model, tokenizer_config.json, config.json) converted as llama.cpp's
// converter would.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "commands.h"
#include "format/gguf.h"
#include "format/hf_tokenizer.h"
#include "io/byte_source.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::tools {

namespace {

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  std::string file;
  std::string batch;
  bool pieces = false;
  bool no_bos = false;
  bool no_parse_special = false;
  bool show_stats = false;
  std::string save_vocab;
};

// Pieces for display: control bytes and broken UTF-8 escaped.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  return out;
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "error: cannot read %s\n", path.c_str());
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

std::string id_line(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line;
}

// The tokenizer keys of a Hugging Face folder's files.
Result<GGUFFile> folder_meta(const std::string& dir) {
  HfTokenizerFiles f;
  auto opt = [&](const char* name, std::string* out) {
    const std::filesystem::path p = std::filesystem::path(dir) / name;
    if (std::filesystem::exists(p) && !read_file(p.string(), out)) return false;
    return true;
  };
  if (!opt("tokenizer.json", &f.tokenizer_json) || !opt("tokenizer_config.json", &f.tokenizer_config_json) ||
      !opt("tiktoken.model", &f.tiktoken_model) || !opt("tokenizer.model", &f.tokenizer_model) || !opt("chat_template.jinja", &f.chat_template_jinja) ||
      !opt("config.json", &f.config_json))
    return make_error("{}: cannot read the tokenizer files", dir);
  GGUFFile meta;
  DF_TRY(hf_tokenizer_to_gguf(f, &meta));
  return meta;
}

Result<GGUFFile> model_meta(const std::string& path) {
  if (std::filesystem::is_directory(path)) return folder_meta(path);
  DF_ASSIGN(auto src, open_file_source(path));
  return parse_gguf(*src);
}

int run_tokenize(const TokenizeArgs& a) {
  std::string text = a.prompt;
  if (!a.file.empty() && !read_file(a.file, &text)) return 1;
  std::string batch;
  if (!a.batch.empty() && !read_file(a.batch, &batch)) return 1;
  auto meta = model_meta(a.model);
  if (!meta.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", a.model.c_str(), meta.error().message.c_str());
    return 1;
  }
  if (!a.save_vocab.empty()) {
    GGUFFile v;
    if (!meta->find("general.architecture")) v.set("general.architecture", GGUFValue::str("llama"));
    for (const std::string& k : meta->keys)
      if (k.rfind("tokenizer.", 0) == 0 || k == "general.architecture") v.set(k, meta->kv.at(k));
    const std::string bytes = serialize_gguf_header(v);
    FILE* out = std::fopen(a.save_vocab.c_str(), "wb");
    const bool ok = out && std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
    if (!out || std::fclose(out) != 0 || !ok) {
      std::fprintf(stderr, "error: --save-vocab %s: cannot write the file\n", a.save_vocab.c_str());
      return 1;
    }
  }
  auto tok = Tokenizer::from_gguf(*meta);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", a.model.c_str(), tok.error().message.c_str());
    return 1;
  }
  if (!a.batch.empty()) {
    for (size_t pos = 0; pos <= batch.size();) {
      size_t end = batch.find('\0', pos);
      if (end == std::string::npos) end = batch.size();
      const std::string line = id_line(tok->encode(std::string_view(batch).substr(pos, end - pos), !a.no_bos,
                                                   !a.no_parse_special));
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fputc('\n', stdout);
      pos = end + 1;
    }
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->encode(text, !a.no_bos, !a.no_parse_special);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (a.pieces) {
    for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, printable(tok->piece(id, true)).c_str());
  } else {
    std::printf("%s\n", id_line(ids).c_str());
  }
  if (a.show_stats) {
    std::fprintf(stderr, "%zu bytes -> %zu tokens in %.3f ms (%.1f MiB/s)\n", text.size(), ids.size(),
                 secs * 1e3, secs > 0 ? text.size() / secs / 1048576.0 : 0.0);
  }
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand("tokenize", "Print the token ids of a text (works on vocab-only GGUFs)");
  sub->add_option("model,-m,--model", args->model, "GGUF model or vocabulary file, or a Hugging Face folder")->required();
  auto* p = sub->add_option("-p,--prompt", args->prompt, "Text to tokenize");
  auto* f = sub->add_option("-f,--file", args->file, "Read the text from a file");
  auto* b = sub->add_option("--batch", args->batch, "Tokenize each NUL-separated text of a file; one line of ids each");
  p->excludes(f);
  b->excludes(p);
  b->excludes(f);
  sub->add_flag("--pieces", args->pieces, "Print each token id with its text, one per line");
  sub->add_flag("--no-bos", args->no_bos, "Do not add BOS/EOS even if the model asks for them");
  sub->add_flag("--no-parse-special", args->no_parse_special,
                "Treat special-token text (<|im_start|> ...) as plain text");
  sub->add_flag("--stats", args->show_stats, "Print size and speed on stderr");
  sub->add_option("--save-vocab", args->save_vocab,
                  "Also write the model's tokenizer keys as a vocabulary-only GGUF (e.g. those of a Hugging Face "
                  "folder, for llama.cpp)");
  return {sub, [args] { return run_tokenize(*args); }};
}

}  // namespace deltafin::tools
