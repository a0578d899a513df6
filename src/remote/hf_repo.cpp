#include "remote/hf_repo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/log.h"

namespace deltafin {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A revision in a URL path: branch names may hold '/'.
std::string escape_path_segment(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += char(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

// Files of a tree listing ([{"type": "file", "path": ...}, ...]) or of a model's
// info ({"siblings": [{"rfilename": ...}, ...]}).
Result<std::vector<std::string>> parse_listing(const std::string& body, const std::string& url) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  std::vector<std::string> files;
  try {
    if (j.is_array()) {
      for (const auto& e : j)
        if (e.is_object() && e.value("type", "file") == "file" && e.contains("path"))
          files.push_back(e.at("path").get<std::string>());
      return files;
    }
    if (j.is_object() && j.contains("siblings")) {
      for (const auto& e : j.at("siblings")) files.push_back(e.at("rfilename").get<std::string>());
      return files;
    }
  } catch (const std::exception&) {
  }
  return make_error("GET {}: the answer is not a repository listing (a JSON array of files, or an object with "
                    "'siblings')", redact_url(url));
}

// A GGUF model in the listing: a file, or a split set by its first part.
struct Group {
  std::string first;                // the path to open ("" if a split set lacks part 1)
  std::vector<std::string> paths;   // every file of the group
};

std::vector<Group> gguf_groups(const std::vector<std::string>& files) {
  static const std::regex split_re(R"((.*)-(\d{5})-of-(\d{5})\.gguf)", std::regex::icase);
  std::map<std::string, Group> by_key;
  for (const std::string& f : files) {
    const std::string lf = lower(f);
    if (!ends_with(lf, ".gguf")) continue;
    const size_t slash = lf.rfind('/');
    if (lf.compare(slash == std::string::npos ? 0 : slash + 1, 6, "mmproj") == 0) continue;  // vision projector
    std::smatch m;
    std::string key = f;
    bool first = true;
    if (std::regex_match(f, m, split_re)) {
      key = m[1].str() + "-of-" + m[3].str();
      first = std::stoi(m[2].str()) == 1;
    }
    Group& g = by_key[key];
    g.paths.push_back(f);
    if (first) g.first = f;
  }
  std::vector<Group> out;
  for (auto& [k, g] : by_key) out.push_back(std::move(g));
  return out;
}

bool boundary(char c) { return c == '/' || c == '-' || c == '.'; }

struct Match {
  bool any = false, strong = false, in_folder = false;
};

// Where `tag` (lower case) stands as a whole word in `path` (lower case).
Match match_tag(const std::string& path, const std::string& tag) {
  Match m;
  const size_t last_slash = path.rfind('/');
  for (size_t at = path.find(tag); at != std::string::npos; at = path.find(tag, at + 1)) {
    const size_t end = at + tag.size();
    if (at > 0 && !boundary(path[at - 1])) continue;
    if (end < path.size() && !boundary(path[end])) continue;
    m.any = true;
    const bool inside_ud = tag.rfind("ud-", 0) != 0 && at >= 3 && path.compare(at - 3, 3, "ud-") == 0;
    if (!inside_ud) m.strong = true;
    if (last_slash != std::string::npos && end <= last_slash) m.in_folder = true;
  }
  return m;
}

std::string list_paths(const std::vector<const Group*>& gs) {
  std::string s;
  for (const Group* g : gs) {
    s += "\n  " + (g->first.empty() ? g->paths[0] : g->first);
    if (g->paths.size() > 1) s += fmt::format(" (+{} more parts)", g->paths.size() - 1);
  }
  return s;
}

}  // namespace

long http_status_in(const std::string& message) {
  const size_t at = message.rfind("HTTP ");
  if (at == std::string::npos) return 0;
  return std::strtol(message.c_str() + at + 5, nullptr, 10);
}

Result<std::string> choose_hf_file(const std::vector<std::string>& files, const std::string& quant,
                                   const std::string& what) {
  const std::vector<Group> groups = gguf_groups(files);
  std::vector<const Group*> all;
  for (const Group& g : groups) all.push_back(&g);
  if (groups.empty()) return make_error("{}: the repository holds no .gguf model file", what);
  std::vector<const Group*> pick;
  if (quant.empty()) {
    if (groups.size() > 1)
      return make_error("{}: the repository holds {} GGUF models; name one with :QUANT (e.g. {}:Q4_K_M), or its "
                        "file as hf://OWNER/REPO/FILE.gguf. They are:{}", what, groups.size(), what, list_paths(all));
    pick = all;
  } else {
    const std::string tag = lower(quant);
    std::vector<const Group*> strong, folder;
    for (const Group& g : groups) {
      const Match m = match_tag(lower(g.first.empty() ? g.paths[0] : g.first), tag);
      if (!m.any) continue;
      pick.push_back(&g);
      if (m.strong) strong.push_back(&g);
    }
    if (pick.empty())
      return make_error("{}: no GGUF model in the repository matches '{}'; it holds:{}", what, quant, list_paths(all));
    if (pick.size() > 1 && !strong.empty()) pick = strong;
    if (pick.size() > 1) {
      for (const Group* g : pick)
        if (match_tag(lower(g->first.empty() ? g->paths[0] : g->first), tag).in_folder) folder.push_back(g);
      if (!folder.empty()) pick = folder;
    }
    if (pick.size() > 1)
      return make_error("{}: '{}' matches {} GGUF models; name the one you mean as hf://OWNER/REPO/FILE.gguf. "
                        "They are:{}", what, quant, pick.size(), list_paths(pick));
  }
  const Group& g = *pick[0];
  if (g.first.empty())
    return make_error("{}: the split model {} has no first part (-00001-of-...) in the repository", what, g.paths[0]);
  return g.first;
}

Result<std::vector<std::string>> hf_list_files(const ModelLocation& loc, HttpClient& client, bool* unreachable,
                                               int max_attempts) {
  const std::string base = loc.endpoint + "/api/models/" + loc.repo;
  std::string url = base + "/tree/" + escape_path_segment(loc.revision) + "?recursive=true";
  std::vector<std::string> files;
  for (int page = 0; !url.empty(); ++page) {
    if (page >= 1000) return make_error("GET {}: more than 1000 pages of listing", redact_url(base));
    DF_ASSIGN(HttpText t, client.get_text(url, size_t(64) << 20, unreachable, max_attempts));
    if (t.status == 404 && page == 0) {
      // No tree API (an older mirror): the model's info lists its files too.
      const std::string info = base + "/revision/" + escape_path_segment(loc.revision);
      DF_ASSIGN(HttpText i, client.get_text(info, size_t(64) << 20, unreachable, max_attempts));
      if (i.status != 200)
        return make_error("GET {}: HTTP {}{}", redact_url(info), i.status, hf_access_hint(loc, i.status));
      return parse_listing(i.body, info);
    }
    if (t.status != 200)
      return make_error("GET {}: HTTP {}{}", redact_url(url), t.status, hf_access_hint(loc, t.status));
    DF_ASSIGN(std::vector<std::string> got, parse_listing(t.body, url));
    files.insert(files.end(), got.begin(), got.end());
    url = t.link_next;
  }
  return files;
}

Status resolve_hf_file(ModelLocation* loc, HttpClient& client, bool* unreachable, int max_attempts) {
  if (loc->kind != ModelLocation::Kind::HuggingFace || !loc->file.empty()) return {};
  DF_ASSIGN(std::vector<std::string> files, hf_list_files(*loc, client, unreachable, max_attempts));
  DF_ASSIGN(std::string file, choose_hf_file(files, loc->quant, loc->text));
  DF_LOG_INFO("{}: {} at {}", loc->text, file, loc->revision);
  loc->set_hf_file(file);
  return {};
}

std::string hf_access_hint(const ModelLocation& loc, long status) {
  if (loc.kind != ModelLocation::Kind::HuggingFace) return "";
  const std::string page = loc.endpoint + "/" + loc.repo;
  const std::string token =
      loc.token.empty() ? "no token was sent (HF_TOKEN is unset and no token file from `hf auth login` was found)"
      : loc.token_source == "HF_TOKEN" ? "the token in HF_TOKEN was sent"
                                       : fmt::format("the token saved in {} was sent", loc.token_source);
  if (status == 401)
    return fmt::format(". The hub refused the request: the repository {} is gated or private, or does not exist, "
                       "and {}. For a gated model, accept its licence on {} while logged in, then create a read "
                       "token (https://huggingface.co/settings/tokens) and set HF_TOKEN to it (or run `hf auth "
                       "login`)", loc.repo, token, page);
  if (status == 403)
    return fmt::format(". The hub refused access to {} ({}): for a gated model, accept its licence on {} with the "
                       "account the token belongs to (access may await the authors' approval); a fine-grained "
                       "token also needs read access to public gated repositories", loc.repo, token, page);
  if (status == 404)
    return fmt::format(". No such repository, revision or file: check {} ('{}' at revision '{}')", page,
                       loc.file.empty() ? loc.repo : loc.file, loc.revision);
  return "";
}

}  // namespace deltafin
