#include "remote/location.h"

#include <cstdlib>

namespace deltafin {

namespace {
bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
}  // namespace

bool is_remote_location(const std::string& s) {
  return starts_with(s, "http://") || starts_with(s, "https://") || starts_with(s, "hf://");
}

std::string ModelLocation::hf_url(const std::string& rev, const std::string& file_in_repo) const {
  return endpoint + "/" + repo + "/resolve/" + rev + "/" + file_in_repo;
}

Result<ModelLocation> parse_model_location(const std::string& s) {
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
  // hf://owner/repo[@revision]/path
  const std::string rest = s.substr(5);
  const size_t s1 = rest.find('/');
  const size_t s2 = s1 == std::string::npos ? std::string::npos : rest.find('/', s1 + 1);
  if (s1 == 0 || s1 == std::string::npos || s2 == std::string::npos || s2 + 1 >= rest.size())
    return make_error("'{}' is not a Hugging Face location: expected hf://OWNER/REPO[@REVISION]/PATH.gguf", s);
  std::string repo = rest.substr(0, s2);
  loc.file = rest.substr(s2 + 1);
  loc.revision = "main";
  if (size_t at = repo.find('@'); at != std::string::npos) {
    loc.revision = repo.substr(at + 1);
    repo.resize(at);
    if (loc.revision.empty()) return make_error("'{}': empty revision after '@'", s);
  }
  if (repo.find('/') == 0 || repo.back() == '/' || repo.find("..") != std::string::npos)
    return make_error("'{}': bad repository name '{}'", s, repo);
  if (loc.file.find("..") != std::string::npos) return make_error("'{}': bad path '{}'", s, loc.file);
  loc.kind = ModelLocation::Kind::HuggingFace;
  loc.repo = repo;
  const char* ep = std::getenv("HF_ENDPOINT");
  loc.endpoint = ep && *ep ? ep : "https://huggingface.co";
  while (!loc.endpoint.empty() && loc.endpoint.back() == '/') loc.endpoint.pop_back();
  if (const char* tok = std::getenv("HF_TOKEN"); tok && *tok) loc.token = tok;
  loc.url = loc.hf_url(loc.revision, loc.file);
  return loc;
}

}  // namespace deltafin
