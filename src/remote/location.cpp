#include "remote/location.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "format/fragments.h"

namespace deltafin {

namespace {
bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// The token the Hugging Face login tools (`hf auth login`, huggingface-cli login)
// saved in `path`, and the path; {"", ""} if none.
std::pair<std::string, std::string> saved_hf_token(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  std::string t = ss.str();
  const size_t a = t.find_first_not_of(" \t\r\n"), b = t.find_last_not_of(" \t\r\n");
  if (a == std::string::npos) return {};
  return {t.substr(a, b - a + 1), path};
}
}  // namespace

bool is_remote_location(const std::string& s) {
  return starts_with(s, "http://") || starts_with(s, "https://") || starts_with(s, "hf://");
}

std::string ModelLocation::hf_url(const std::string& rev, const std::string& file_in_repo) const {
  return endpoint + "/" + repo + "/resolve/" + rev + "/" + file_in_repo;
}

void ModelLocation::set_hf_file(const std::string& file_in_repo) {
  file = file_in_repo;
  url = hf_url(revision, file);
}

namespace {

Result<ModelLocation> parse_one(const std::string& s, const Environment& env) {
  ModelLocation loc;
  loc.text = s;
  if (starts_with(s, "http://") || starts_with(s, "https://")) {
    const size_t host = s.find("://") + 3;
    if (host >= s.size() || s[host] == '/') return make_error("'{}': the URL has no host", s);
    if (s.find('/', host) == std::string::npos) return make_error("'{}': the URL names no file", s);
    loc.kind = ModelLocation::Kind::Url;
    loc.url = s;
    return loc;
  }
  if (!starts_with(s, "hf://")) {
    loc.path = s;
    return loc;
  }
  // hf://owner/repo[@revision]/path, or hf://owner/repo[@revision][:QUANT]
  const std::string rest = s.substr(5);
  const size_t s1 = rest.find('/');
  const size_t s2 = s1 == std::string::npos ? std::string::npos : rest.find('/', s1 + 1);
  if (s1 == 0 || s1 == std::string::npos || s1 + 1 >= rest.size() || s2 + 1 == rest.size())
    return make_error("'{}' is not a Hugging Face location: expected hf://OWNER/REPO[@REVISION]/PATH.gguf or "
                      "hf://OWNER/REPO[@REVISION][:QUANT]", s);
  std::string repo = rest.substr(0, s2);
  if (s2 != std::string::npos) loc.file = rest.substr(s2 + 1);
  loc.revision = "main";
  if (loc.file.empty()) {  // a repository: the quantization follows a ':' (git refs cannot hold one)
    if (size_t colon = repo.find(':'); colon != std::string::npos) {
      loc.quant = repo.substr(colon + 1);
      repo.resize(colon);
      if (loc.quant.empty()) return make_error("'{}': empty quantization after ':'", s);
      if (loc.quant.find_first_of("/@") != std::string::npos)
        return make_error("'{}': bad quantization '{}' (expected e.g. :Q4_K_M)", s, loc.quant);
    }
  }
  if (size_t at = repo.find('@'); at != std::string::npos) {
    loc.revision = repo.substr(at + 1);
    repo.resize(at);
    if (loc.revision.empty()) return make_error("'{}': empty revision after '@'", s);
  }
  if (repo.find('/') == 0 || repo.back() == '/' || repo.find("..") != std::string::npos ||
      repo.find(':') != std::string::npos)
    return make_error("'{}': bad repository name '{}'", s, repo);
  if (loc.file.find("..") != std::string::npos) return make_error("'{}': bad path '{}'", s, loc.file);
  loc.kind = ModelLocation::Kind::HuggingFace;
  loc.repo = repo;
  loc.endpoint = env.hf_endpoint;
  while (!loc.endpoint.empty() && loc.endpoint.back() == '/') loc.endpoint.pop_back();
  if (!env.hf_token.empty()) {
    loc.token = env.hf_token;
    loc.token_source = "HF_TOKEN";
  } else {
    std::tie(loc.token, loc.token_source) = saved_hf_token(env.hf_token_path);
  }
  if (!loc.file.empty()) loc.url = loc.hf_url(loc.revision, loc.file);
  return loc;
}

}  // namespace

Result<ModelLocation> parse_model_location(const std::string& s, const Environment& env) {
  if (!is_remote_location(s)) return parse_one(s, env);  // local fragments: the file opener's (model_file.h)
  DF_ASSIGN(std::vector<std::string> list, fragment_list(s));
  DF_ASSIGN(ModelLocation loc, parse_one(list[0], env));
  if (list.size() == 1) return loc;
  loc.text = fragments_display(list);
  if (loc.kind == ModelLocation::Kind::HuggingFace && loc.file.empty())
    return make_error("{}: name each fragment's file (hf://OWNER/REPO[@REVISION]/FILE.part1ofN), not a quantization",
                      list[0]);
  for (const std::string& item : list) {
    DF_ASSIGN(ModelLocation f, parse_one(item, env));
    const bool same = f.kind == loc.kind && (f.kind == ModelLocation::Kind::Url ||
                                             (f.repo == loc.repo && f.revision == loc.revision && !f.file.empty()));
    if (!same)
      return make_error("{} and {} cannot be fragments of one model: give URLs, or files of one Hugging Face "
                        "repository at one revision", list[0], item);
    loc.fragments.push_back(f.kind == ModelLocation::Kind::Url ? f.url : f.file);
  }
  return loc;
}

}  // namespace deltafin
