#include <cctype>
#include <cmath>
#include <fstream>
#include <filesystem>
#include <system_error>
#include <type_traits>

#include "commands.h"
#include "tool_common.h"

namespace deltafin::tools {

std::string apply_model_sampling(const CLI::App& sub, const GGUFFile& meta, SamplingParams* sp) {
  std::string took;
  auto take = [&](const char* flag, const char* key, auto* field) {
    const GGUFValue* v = meta.find(key);
    const CLI::Option* given = sub.get_option_no_throw(flag);
    if (v == nullptr || (given && given->count() > 0)) return;
    using T = std::remove_pointer_t<decltype(field)>;
    T was = *field;
    if constexpr (std::is_integral_v<T>) *field = T(meta.int_or(key, int64_t(was)));
    else *field = T(meta.float_or(key, double(was)));
    if (check_sampling(*sp)) {  // a value no flag could give: keep ours
      *field = was;
      return;
    }
    took += fmt::format("{}{} {}", took.empty() ? "" : " ", flag, *field);
  };
  take("--temp", "general.sampling.temp", &sp->temperature);
  take("--top-k", "general.sampling.top_k", &sp->top_k);
  take("--top-p", "general.sampling.top_p", &sp->top_p);
  take("--min-p", "general.sampling.min_p", &sp->min_p);
  take("--repeat-penalty", "general.sampling.penalty_repeat", &sp->repeat_penalty);
  return took;
}

Status prepare_output(const std::string& path, bool force, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) return make_error("{} '{}' is a directory; give a file name", flag, path);
  if (fs::exists(st) && !force)
    return make_error("{} '{}' exists; give --force to overwrite it, or another file name", flag, path);
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) return make_error("{} '{}': cannot create the directory '{}': {}", flag, path, parent.string(), ec.message());
  }
  return {};
}

bool parse_size(const std::string& s, uint64_t* out) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    return false;
  }
  if (v < 0 || !std::isfinite(v)) return false;
  std::string unit;
  for (size_t i = pos; i < s.size(); ++i) unit += char(std::toupper(static_cast<unsigned char>(s[i])));
  double mul = 1;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mul = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mul = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mul = 1024.0 * 1024 * 1024 * 1024;
  else return false;
  *out = static_cast<uint64_t>(v * mul);
  return true;
}

Result<std::string> read_prompt_file(const std::string& path, int n_ctx, const Tokenizer& tok) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot read prompt file '{}'", path);
  size_t longest = 1;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) longest = std::max(longest, tok.piece(id).size());
  const uint64_t limit = uint64_t(std::max(n_ctx, 0)) * longest;
  std::string text;
  char buf[1 << 16];
  while (f) {
    f.read(buf, sizeof buf);
    text.append(buf, size_t(f.gcount()));
    if (text.size() > limit)
      return make_error("prompt file '{}' holds more than {} bytes, more than -c/--ctx-size {} tokens can hold "
                        "(no token of this model is longer than {} bytes): shorten it or raise -c",
                        path, limit, n_ctx, longest);
  }
  if (f.bad()) return make_error("cannot read prompt file '{}'", path);
  return text;
}

}  // namespace deltafin::tools

#include "tokenizer/tokenizer.h"
#include "tool_common.h"

namespace deltafin::tools {

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find_first_of(", ", i);
    if (j == std::string::npos) j = s.size();
    if (j > i) {
      try {
        size_t used = 0;
        long v = std::stol(s.substr(i, j - i), &used);
        if (used != j - i || v < 0 || v > INT32_MAX) throw std::invalid_argument("");
        ids.push_back(int32_t(v));
      } catch (...) {
        return make_error("bad token id '{}' in --ids", s.substr(i, j - i));
      }
    }
    i = j + 1;
  }
  if (ids.empty()) return make_error("--ids is empty");
  return ids;
}

Result<std::vector<int32_t>> tokenize_prompt(const ModelFile& file, const std::string& text) {
  DF_ASSIGN(Tokenizer tok, Tokenizer::from_gguf(file.meta()));
  return tok.encode(text, true, true);
}

}  // namespace deltafin::tools
