#include "store/remote_model.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cache/cache_admin.h"
#include "cache/fs.h"
#include "core/log.h"
#include "format/fragments.h"
#include "remote/hf_repo.h"
#include "store/remote_hf.h"
#include "store/remote_part.h"
#include "format/hf_gguf_source.h"

namespace deltafin {


namespace {

// A part of the model as the GGUF reader sees it: the cached core when complete,
// else the origin.
class CachedPartSource final : public ByteSource {
 public:
  explicit CachedPartSource(RemoteModel::Part& p) : p_(p) {}
  uint64_t size() const override { return p_.id.size; }
  const std::string& name() const override { return p_.view ? p_.view->name() : p_.origin->name(); }
  Status read_at(uint64_t offset, void* dst, size_t n) override {
    if (p_.core && p_.core->covers(offset, n)) return p_.core->read(offset, dst, n);
    if (p_.view && p_.header_only && offset < p_.view_header) {
      const size_t k = size_t(std::min<uint64_t>(n, p_.view_header - offset));
      DF_TRY(p_.view->read_at(offset, dst, k));
      std::memset(static_cast<char*>(dst) + k, 0, n - k);
      return {};
    }
    return p_.view ? p_.view->read_at(offset, dst, n) : p_.origin->read_at(offset, dst, n);
  }

 private:
  RemoteModel::Part& p_;
};

std::string file_stem(const std::string& url) {
  std::string name = redact_url(url);
  name = name.substr(name.rfind('/') + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return name.empty() ? "model" : name.substr(0, 80);
}

}  // namespace

RemoteModel::~RemoteModel() = default;

const std::string& RemoteModel::url() const { return parts_[0]->url; }

namespace {

bool is_commit(const std::string& r) {
  return r.size() == 40 && std::all_of(r.begin(), r.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// What names a location's bytes in the cache: its URL(s), or its file(s) in the
// repository, one a line for a model cut into byte fragments.
std::string joined(const std::vector<std::string>& v, bool redact) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "\n") + (redact ? redact_url(x) : x);
  return s;
}
std::string url_key(const ModelLocation& loc) {
  return loc.fragments.empty() ? redact_url(loc.url) : joined(loc.fragments, true);
}
std::string files_key(const ModelLocation& loc) { return loc.fragments.empty() ? loc.file : joined(loc.fragments, false); }

// The identity of a part cut into fragments: the whole size, the fragments'
// validators side by side, and (where any fragment is pinned by a fingerprint) a
// hash of their fingerprints.
HttpIdentity combined_identity(const std::vector<OriginFragment>& frags) {
  HttpIdentity id;
  std::vector<uint64_t> fps;
  bool any_fp = false;
  for (size_t k = 0; k < frags.size(); ++k) {
    id.size += frags[k].id.size;
    id.etag += (k ? " " : "") + frags[k].id.etag;
    id.last_modified += (k ? " " : "") + frags[k].id.last_modified;
    fps.push_back(frags[k].id.fingerprint);
    any_fp = any_fp || frags[k].id.fingerprint != 0;
  }
  if (id.etag.find_first_not_of(' ') == std::string::npos) id.etag.clear();
  if (id.last_modified.find_first_not_of(' ') == std::string::npos) id.last_modified.clear();
  if (any_fp) id.fingerprint = XXH3_64bits(fps.data(), fps.size() * sizeof(uint64_t)) | 1;
  return id;
}

std::string model_dir_of(const std::string& root, const std::string& url, const std::string& key) {
  return fmt::format("{}/{}-{:016x}", models_dir(root), file_stem(url), XXH3_64bits(key.data(), key.size()));
}

struct Meta {
  std::string key;
  std::vector<std::string> urls, revisions;
  std::vector<HttpIdentity> ids;
  std::vector<std::vector<OriginFragment>> fragments;  // per part
};

HttpIdentity identity_of(const nlohmann::json& p) {
  HttpIdentity id{p.at("size").get<uint64_t>(), p.value("etag", ""), p.value("last_modified", "")};
  const std::string fp = p.value("fingerprint", "");
  if (!fp.empty() && (std::sscanf(fp.c_str(), "%" SCNx64, &id.fingerprint) != 1 || id.fingerprint == 0))
    throw std::runtime_error("bad fingerprint '" + fp + "'");
  return id;
}

// meta.json of a model directory; an absent file gives an empty Meta.
Result<Meta> read_meta(const std::string& dir) {
  Meta m;
  auto text = read_small_file(dir + "/meta.json");
  if (!text.ok()) return m;
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    m.key = j.value("key", "");
    for (const auto& p : j.at("parts")) {
      m.urls.push_back(p.value("url", ""));
      m.ids.push_back(identity_of(p));
      m.fragments.emplace_back();
      uint64_t at = 0;
      if (p.contains("fragments"))
        for (const auto& f : p.at("fragments")) {
          m.fragments.back().push_back({f.value("url", ""), identity_of(f), at});
          at += m.fragments.back().back().id.size;
        }
    }
    if (j.contains("revisions")) m.revisions = j.at("revisions").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return make_error("{}/meta.json is malformed ({}); remove the directory to start over", dir, e.what());
  }
  return m;
}

// The directory of a cached copy of `loc` with a complete first core part ("" if
// none). A URL or a Hugging Face commit names its directory; a branch or tag is
// looked up among the revisions the cached copies recorded (the newest wins).
std::string find_cached_dir(const std::string& root, const ModelLocation& loc) {
  auto usable = [](const std::string& dir) { return ::access((dir + "/core-1.ok").c_str(), F_OK) == 0; };
  if (loc.kind == ModelLocation::Kind::Url) {
    const std::string dir = model_dir_of(root, loc.url, url_key(loc));
    return usable(dir) ? dir : "";
  }
  if (is_commit(loc.revision)) {
    const std::string dir = model_dir_of(root, loc.url, fmt::format("hf://{}@{}/{}", loc.repo, loc.revision, files_key(loc)));
    return usable(dir) ? dir : "";
  }
  std::string best;
  std::filesystem::file_time_type best_time{};
  std::error_code ec;
  const std::string prefix = fmt::format("hf://{}@", loc.repo), suffix = "/" + files_key(loc);
  for (const auto& d : std::filesystem::directory_iterator(models_dir(root), ec)) {
    const std::string dir = d.path().string();
    auto m = read_meta(dir);
    if (!m.ok() || !usable(dir) || m->key.rfind(prefix, 0) != 0 || m->key.size() < suffix.size() ||
        m->key.compare(m->key.size() - suffix.size(), suffix.size(), suffix) != 0 ||
        std::find(m->revisions.begin(), m->revisions.end(), loc.revision) == m->revisions.end())
      continue;
    const auto t = std::filesystem::last_write_time(dir + "/meta.json", ec);
    if (best.empty() || t > best_time) best = dir, best_time = t;
  }
  return best;
}

// The files of `loc`'s repository whose copies in the cache recorded loc's revision.
std::vector<std::string> cached_hf_files(const std::string& root, const ModelLocation& loc) {
  std::vector<std::string> files;
  std::error_code ec;
  const std::string prefix = fmt::format("hf://{}@", loc.repo);
  for (const auto& d : std::filesystem::directory_iterator(models_dir(root), ec)) {
    const std::string dir = d.path().string();
    auto m = read_meta(dir);
    if (!m.ok() || m->key.rfind(prefix, 0) != 0 || ::access((dir + "/core-1.ok").c_str(), F_OK) != 0) continue;
    const size_t slash = m->key.find('/', prefix.size());
    if (slash == std::string::npos) continue;
    const std::string rev = m->key.substr(prefix.size(), slash - prefix.size());
    if (rev == loc.revision || std::find(m->revisions.begin(), m->revisions.end(), loc.revision) != m->revisions.end())
      files.push_back(m->key.substr(slash + 1));
  }
  return files;
}

}  // namespace

Result<std::unique_ptr<RemoteModel>> RemoteModel::open(const ModelLocation& loc_in, const RemoteOptions& opts) {
  if (!loc_in.remote()) return make_error("'{}' is not a remote location", loc_in.text);
  ModelLocation loc = loc_in;
  std::unique_ptr<RemoteModel> m(new RemoteModel());
  m->opts_ = opts;
  if (opts.cache_dir.empty()) return make_error("{}: no disk cache directory given for a remote model", loc_in.text);
  m->root_ = opts.cache_dir;
  HttpOptions h = opts.http;
  if (!h.ca_file.empty() && loc.url.rfind("https://", 0) == 0 && ::access(h.ca_file.c_str(), R_OK) != 0)
    return make_error("cannot read the CA certificates '{}' (from --ca-cert, $CURL_CA_BUNDLE or $SSL_CERT_FILE): {}",
                      h.ca_file, std::strerror(errno));
  if (loc.kind == ModelLocation::Kind::HuggingFace && !loc.token.empty()) h.bearer_token = loc.token;
  m->client_ = std::make_shared<HttpClient>(h);
  if (loc.kind == ModelLocation::Kind::HuggingFace && loc.file.empty()) {
    // hf://owner/repo[:QUANT]: the file from the repository's listing; offline, or
    // with the hub unreachable, from the copies of the repository in the cache.
    const std::vector<std::string> cached_files = cached_hf_files(m->root_, loc);
    bool unreachable = false;
    Status st;
    if (opts.offline) {
      st = make_error("--offline is set");
    } else {
      auto listing = hf_list_files(loc, *m->client_, &unreachable, cached_files.empty() ? 0 : 2);
      if (!listing.ok()) {
        st = listing.error();
      } else if (loc.quant.empty() && hf_listing_is_folder(*listing)) {
        // config.json and safetensors shards: the folder as published (remote_hf.h).
        m->loc_ = loc;
        DF_TRY(m->open_folder());
        return m;
      } else {
        auto file = choose_hf_file(*listing, loc.quant, loc.text);
        if (!file.ok()) return file.error();
        DF_LOG_INFO("{}: {} at {}", loc.text, *file, loc.revision);
        loc.set_hf_file(*file);
      }
    }
    if (!st.ok()) {
      // A folder cached under this revision ("" is its file in the key).
      if ((opts.offline || unreachable) && loc.quant.empty() &&
          std::find(cached_files.begin(), cached_files.end(), "") != cached_files.end()) {
        m->loc_ = loc;
        DF_TRY(m->open_folder());
        return m;
      }
      if (!opts.offline && !unreachable) return st.error();
      if (cached_files.empty())
        return make_error("{}: {}, and the disk cache {} holds no file of this repository at '{}' (run `deltafin "
                          "pull {}` while the hub is reachable)", loc.text,
                          opts.offline ? "--offline is set" : st.error().message, m->root_, loc.revision, loc.text);
      DF_ASSIGN(std::string file, choose_hf_file(cached_files, loc.quant, loc.text + " (in the disk cache)"));
      loc.set_hf_file(file);
    }
  }
  m->loc_ = loc;
  if (loc.kind == ModelLocation::Kind::Url && url_is_folder(loc.url)) {
    DF_TRY(m->open_folder());
    return m;
  }
  const std::string cached = find_cached_dir(m->root_, loc);
  std::unique_ptr<HttpSource> first;
  if (opts.offline) {
    if (cached.empty())
      return make_error("--offline: {} is not in the disk cache {} (run `deltafin pull {}` while the origin is "
                        "reachable)",
                        loc.text, m->root_, loc.text);
    m->offline_reason_ = "--offline is set";
  } else {
    // With a cached copy, a quick probe: an unreachable origin means working offline.
    bool unreachable = false;
    auto probed = HttpSource::open(m->client_, loc.url, nullptr, cached.empty() ? 0 : 2, &unreachable);
    if (!probed.ok() && !(unreachable && !cached.empty()))
      return Error{probed.error().message + hf_access_hint(loc, http_status_in(probed.error().message))};
    if (probed.ok()) first = std::move(*probed);
    else m->offline_reason_ = fmt::format("the origin is unreachable ({})", probed.error().message);
  }
  std::string url = loc.url;
  std::string hf_rev = loc.revision;  // Hugging Face: the commit it is pinned to, once known
  if (!m->offline_reason_.empty()) {
    DF_LOG_WARN("{}: {}; working offline from the disk cache {}", loc.text, m->offline_reason_, cached);
    m->dir_ = cached;
    DF_ASSIGN(Meta meta, read_meta(cached));
    if (meta.ids.empty() || meta.key.empty()) return make_error("{}/meta.json names no parts", cached);
    m->key_ = meta.key;
    m->pinned_ = meta.ids;
    m->pinned_fragments_ = meta.fragments;
    m->revisions_ = meta.revisions;
    if (loc.kind == ModelLocation::Kind::HuggingFace) url = meta.urls[0];  // the resolve URL at the pinned commit
  } else if (loc.kind == ModelLocation::Kind::HuggingFace) {
    const std::string& commit = first->probe().repo_commit;
    const std::string rev = commit.empty() ? loc.revision : commit;
    hf_rev = rev;
    if (!commit.empty() && commit != loc.revision) {
      url = loc.hf_url(commit, loc.file);
      DF_LOG_INFO("{}: revision {} is commit {}", loc.text, loc.revision, commit);
    }
    m->key_ = fmt::format("hf://{}@{}/{}", loc.repo, rev, files_key(loc));
  } else {
    m->key_ = url_key(loc);
  }
  if (m->dir_.empty()) {
    m->dir_ = model_dir_of(m->root_, url, m->key_);
    DF_ASSIGN(Meta meta, read_meta(m->dir_));
    m->pinned_ = meta.ids;
    m->pinned_fragments_ = meta.fragments;
    m->revisions_ = meta.revisions;
  }
  DF_TRY(make_dirs(m->dir_));
  DF_TRY(make_dirs(tmp_dir(m->root_)));
  remove_stale_temps(tmp_dir(m->root_));
  // Remember which branch or tag led here, for finding this copy offline.
  if (loc.kind == ModelLocation::Kind::HuggingFace && !is_commit(loc.revision) &&
      std::find(m->revisions_.begin(), m->revisions_.end(), loc.revision) == m->revisions_.end()) {
    m->revisions_.push_back(loc.revision);
    m->meta_dirty_ = true;
  }
  auto part = std::make_unique<Part>();
  part->url = url;
  if (loc.fragments.size() > 1) {
    // The fragments' URLs: as given, at the pinned commit, or as the cache pinned them.
    std::vector<std::string> urls;
    if (loc.kind != ModelLocation::Kind::HuggingFace)
      urls = loc.fragments;
    else if (!m->offline_reason_.empty() && !m->pinned_fragments_.empty())
      for (const OriginFragment& f : m->pinned_fragments_[0]) urls.push_back(f.url);
    else
      for (const std::string& f : loc.fragments) urls.push_back(loc.hf_url(hf_rev, f));
    DF_TRY(m->open_fragment_part(part.get(), std::move(first), urls));
  } else {
    part->id = first ? first->identity() : m->pinned_[0];
    part->origin = std::make_unique<HttpSource>(m->client_, url, part->id);
  }
  m->parts_.push_back(std::move(part));
  DF_TRY(m->add_part(url));  // checks the pin and opens the core
  return m;
}

Result<RemoteModel::Part*> RemoteModel::add_part(const std::string& url) {
  Part* p = nullptr;
  if (!parts_.empty() && parts_.back()->url == url && !parts_.back()->core) {
    p = parts_.back().get();
  } else if (!offline_reason_.empty()) {
    const size_t k = parts_.size();
    if (k >= pinned_.size())
      return make_error("{}: part {} ({}) is not in the disk cache and {}", loc_.text, k + 1, redact_url(url),
                        offline_reason_);
    auto part = std::make_unique<Part>();
    part->url = url;
    part->id = pinned_[k];
    part->origin = std::make_unique<HttpSource>(client_, url, part->id);
    p = part.get();
    parts_.push_back(std::move(part));
  } else {
    DF_ASSIGN(auto src, HttpSource::open(client_, url));
    auto part = std::make_unique<Part>();
    part->url = url;
    part->id = src->identity();
    part->origin = std::move(src);
    p = part.get();
    parts_.push_back(std::move(part));
  }
  const size_t k = parts_.size() - 1;
  // Without a validator, pin what can be pinned: the size and a hash of the first
  // and last bytes (also when the cache was filled without one and the origin now
  // sends one: the bytes must be the same).
  if (offline_reason_.empty() && p->frags.empty() && p->id.fingerprint == 0 &&
      (!p->id.has_validator() || (k < pinned_.size() && !pinned_[k].has_validator()))) {
    auto fp = fingerprint_of(*client_, url, p->id);
    if (!fp.ok()) return make_error("{}: {}", loc_.text, fp.error().message);
    p->id.fingerprint = *fp;
    p->origin = std::make_unique<HttpSource>(client_, url, p->id);
    if (!p->id.has_validator()) {
      const size_t at = key_.find('@'), slash = key_.find('/', at == std::string::npos ? 0 : at);
      const bool commit_pinned = loc_.kind == ModelLocation::Kind::HuggingFace && at != std::string::npos &&
                                 slash != std::string::npos && is_commit(key_.substr(at + 1, slash - at - 1));
      if (commit_pinned)
        DF_LOG_INFO("{}: the origin sends neither ETag nor Last-Modified for {}; the revision is pinned to its commit",
                    loc_.text, redact_url(url));
      else
        DF_LOG_WARN("{}: the origin sends neither ETag nor Last-Modified for {}: the disk cache pins it by its size "
                    "({} bytes) and a hash of its first and last {} KiB only; a change elsewhere in the file at the "
                    "same size cannot be detected",
                    loc_.text, redact_url(url), p->id.size, kFingerprintBytes / 1024);
    }
  }
  if (k < pinned_.size()) {
    const std::string change = identity_change(pinned_[k], p->id);
    if (!change.empty())
      return make_error("{} changed at the origin since it was cached in {}: {}. The cache holds bytes of the old "
                        "file; remove them with `deltafin cache clear {}` to use the new one",
                        redact_url(url), dir_, change, loc_.text);
  }
  p->core_base = fmt::format("{}/core-{}", dir_, k + 1);
  DF_ASSIGN(p->core, CoreFile::open(p->core_base, tmp_dir(root_), p->id.size));
  // Every read of the core comes after this check, the GGUF header's included.
  if (p->core->complete()) {
    DF_ASSIGN(int bad, p->core->verify_if_changed());
    if (bad) DF_LOG_WARN("{}: {} core chunk(s) failed their checksum; fetching them again", p->core->data_path(), bad);
  }
  if (!offline_reason_.empty() && !p->core->complete())
    return make_error("{}: the core of part {} is not complete in the disk cache {} and {}; run `deltafin pull {}` "
                      "while the origin is reachable",
                      loc_.text, k + 1, dir_, offline_reason_, loc_.text);
  return p;
}

Status RemoteModel::open_fragment_part(Part* p, std::unique_ptr<HttpSource> first, const std::vector<std::string>& urls) {
  const size_t k0 = parts_.size();  // this part's index
  const std::vector<OriginFragment>* pinned = k0 < pinned_fragments_.size() ? &pinned_fragments_[k0] : nullptr;
  std::vector<OriginFragment> frags;
  // open_fragments checks what a set of fragments must be (none missing, empty or
  // short before the last) and names the part that is not; this opener pins each.
  auto open = [&](const std::string& url) -> Result<std::unique_ptr<ByteSource>> {
    const size_t k = frags.size();
    std::unique_ptr<HttpSource> src;
    if (!offline_reason_.empty()) {
      if (pinned == nullptr || k >= pinned->size())
        return make_error("not in the disk cache's record of this model and {}", offline_reason_);
      src = std::make_unique<HttpSource>(client_, url, (*pinned)[k].id);
    } else if (k == 0 && first) {
      src = std::move(first);
    } else {
      DF_ASSIGN(src, HttpSource::open(client_, url));
    }
    HttpIdentity id = src->identity();
    if (offline_reason_.empty() && id.fingerprint == 0 && !id.has_validator()) {
      DF_ASSIGN(id.fingerprint, fingerprint_of(*client_, url, id));
      src = std::make_unique<HttpSource>(client_, url, id);
      DF_LOG_WARN("{}: the origin sends neither ETag nor Last-Modified for {}: the disk cache pins it by its size and a "
                  "hash of its first and last {} KiB only", loc_.text, redact_url(url), kFingerprintBytes / 1024);
    }
    const uint64_t at = frags.empty() ? 0 : frags.back().start + frags.back().id.size;
    frags.push_back({url, id, at});
    return std::unique_ptr<ByteSource>(std::move(src));
  };
  std::vector<std::string> shown;
  for (const std::string& u : urls) shown.push_back(redact_url(u));
  auto whole = open_fragments(urls, open);
  if (!whole.ok()) {
    // The message names the URLs as given; say them without credentials.
    std::string msg = whole.error().message;
    for (size_t k = 0; k < urls.size(); ++k)
      for (size_t at = msg.find(urls[k]); at != std::string::npos; at = msg.find(urls[k], at + shown[k].size()))
        msg.replace(at, urls[k].size(), shown[k]);
    return make_error("{}: {}", loc_.text, msg);
  }
  p->frags = std::move(frags);
  p->id = combined_identity(p->frags);
  p->origin = std::move(*whole);
  return {};
}

std::vector<std::string> RemoteModel::core_files() const {
  std::vector<std::string> out;
  for (const auto& p : parts_) out.push_back(p->core_base + ".bin");
  return out;
}

Result<std::unique_ptr<ModelFile>> RemoteModel::open_file() {
  if (folder_) {
    SourceOpener opener = [this](const std::string&) -> Result<std::unique_ptr<ByteSource>> {
      return std::unique_ptr<ByteSource>(new CachedPartSource(*parts_[0]));
    };
    parts_[0]->header_only = true;
    auto opened = ModelFile::open(loc_.text, opener);
    parts_[0]->header_only = false;
    DF_ASSIGN(auto file, std::move(opened));
    if (offline_reason_.empty() && (pinned_.size() != parts_.size() || meta_dirty_)) DF_TRY(write_meta());
    return file;
  }
  SourceOpener opener = [this](const std::string& path) -> Result<std::unique_ptr<ByteSource>> {
    for (auto& p : parts_)
      if (p->url == path) return std::unique_ptr<ByteSource>(new CachedPartSource(*p));
    DF_ASSIGN(Part * p, add_part(path));
    return std::unique_ptr<ByteSource>(new CachedPartSource(*p));
  };
  DF_ASSIGN(auto file, ModelFile::open(parts_[0]->url, opener));
  if (offline_reason_.empty() && (pinned_.size() != parts_.size() || meta_dirty_)) DF_TRY(write_meta());
  return file;
}

Status RemoteModel::write_meta() {
  nlohmann::json j;
  j["format"] = 1;
  j["location"] = loc_.text;
  j["key"] = key_;
  if (!revisions_.empty()) j["revisions"] = revisions_;
  j["parts"] = nlohmann::json::array();
  for (const auto& p : parts_) {
    nlohmann::json part = {{"url", redact_url(p->url)}, {"size", p->id.size}, {"etag", p->id.etag},
                           {"last_modified", p->id.last_modified}};
    if (p->id.fingerprint) part["fingerprint"] = fmt::format("{:016x}", p->id.fingerprint);
    for (const OriginFragment& f : p->frags) {
      nlohmann::json fj = {{"url", redact_url(f.url)}, {"size", f.id.size}, {"etag", f.id.etag},
                           {"last_modified", f.id.last_modified}};
      if (f.id.fingerprint) fj["fingerprint"] = fmt::format("{:016x}", f.id.fingerprint);
      part["fragments"].push_back(fj);
    }
    j["parts"].push_back(part);
  }
  if (folder_) {
    j["folder"] = true;
    j["base"] = redact_url(folder_->base);
    j["view_hash"] = folder_->view_hash;
    j["shards"] = nlohmann::json::array();
    for (const RemoteShard& sh : folder_->shards)
      j["shards"].push_back({{"file", sh.file}, {"url", redact_url(sh.url)}, {"size", sh.id.size},
                             {"etag", sh.id.etag}, {"last_modified", sh.id.last_modified}});
  }
  DF_TRY(write_file_atomic(dir_ + "/meta.json", tmp_dir(root_), {j.dump(1) + "\n"}));
  pinned_.clear();
  pinned_fragments_.clear();
  for (const auto& p : parts_) pinned_.push_back(p->id), pinned_fragments_.push_back(p->frags);
  meta_dirty_ = false;
  return {};
}

Status RemoteModel::attach(const ModelFile& file, const std::vector<ExpertLayerInfo>& layers) {
  DF_ASSIGN(ExpertIndex ix, ExpertIndex::build(file, layers));
  index_ = std::make_unique<ExpertIndex>(std::move(ix));
  std::set<std::string> expert_tensors;
  for (const ExpertLayerInfo& l : layers)
    for (const std::string* n : {&l.gate_name, &l.up_name, &l.down_name})
      if (!n->empty()) expert_tensors.insert(*n);
  for (int k = 0; k < file.shard_count(); ++k)
    parts_[size_t(k)]->plan = parts_[size_t(k)]->view
                                  ? plan_view_core(file.shard(k), parts_[size_t(k)]->view_header, expert_tensors)
                                  : plan_core_chunks(file.shard(k), parts_[size_t(k)]->id.size, expert_tensors);
  std::vector<OriginPart> origin;
  ExpertCacheOptions eo;
  if (folder_) {
    // Experts come straight from the shards.
    for (const RemoteShard& sh : folder_->shards) origin.push_back({sh.url, sh.id, {}});
    const HfGgufSource* view = folder_->view;
    eo.locate = [view](const ExpertSlice& sl) -> Result<OriginSpan> {
      HfGgufSource::ShardSpan at;
      if (!view->locate(sl.offset, sl.bytes, &at))
        return make_error("{}: the expert slice at {} ({} bytes) is not one shard's bytes (a copy, or MXFP4 codes "
                          "and scales side by side)", view->name(), sl.offset, sl.bytes);
      OriginSpan o{at.shard, at.offset, nullptr};
      if (at.mxfp4)
        o.unpack = [at, n = sl.bytes](const char* src, char* dst) { HfGgufSource::unpack(at, src, n, dst); };
      return o;
    };
  } else {
    for (const auto& p : parts_) origin.push_back({p->url, p->id, p->frags});
  }
  eo.budget = opts_.disk_budget;
  eo.model = loc_.text;
  eo.offline_reason = offline_reason_;
  DF_ASSIGN(experts_, ExpertCache::open(root_, dir_, *index_, client_, std::move(origin), eo));
  return {};
}

CoreStatus RemoteModel::status() const {
  CoreStatus s;
  for (const auto& p : parts_) {
    s.model_bytes += p->id.size;
    for (const CoreChunk& c : p->plan) s.core_bytes += c.len;
    for (const CoreChunk& c : p->core->missing(p->plan)) s.core_missing += c.len;
  }
  if (index_) {
    s.expert_bytes = index_->expert_bytes();
    s.experts = index_->n_keys();
    for (int k = 0; k < index_->n_keys(); ++k) s.experts_on_disk += experts_->on_disk(k);
    s.slot_bytes = 0;
    for (int k = 0; k < index_->n_keys(); ++k) s.slot_bytes = std::max(s.slot_bytes, index_->slices(k).bytes());
  }
  return s;
}

Status RemoteModel::ensure_core(const ProgressFactory& progress) {
  DF_ASSIGN(FileLock lock, FileLock::try_acquire(dir_ + "/core.lock"));
  if (!lock.held()) {
    DF_LOG_WARN("another deltafin process is downloading the core of {}; waiting for it", loc_.text);
    DF_ASSIGN(lock, FileLock::acquire(dir_ + "/core.lock"));
  }
  // Another process may have stored chunks since this one read the journals (it may
  // even have finished and let go of the lock just before we took it): read them again.
  for (auto& p : parts_) {
    if (p->core->complete()) continue;
    DF_ASSIGN(p->core, CoreFile::open(p->core_base, tmp_dir(root_), p->id.size));
    if (!p->core->complete()) continue;
    DF_ASSIGN(int bad, p->core->verify_if_changed());
    if (bad) DF_LOG_WARN("{}: {} core chunk(s) failed their checksum; fetching them again", p->core->data_path(), bad);
  }
  struct Job {
    Part* part;
    CoreChunk chunk;
    std::vector<char> buf;
    bool done = false;
    Status status;
  };
  std::deque<Job> todo;
  uint64_t bytes = 0;
  std::map<const Part*, OriginPart> origins;  // outlive the requests below
  for (const auto& p : parts_) origins[p.get()] = {p->url, p->id, p->frags};
  for (auto& p : parts_) {
    for (const CoreChunk& c : p->core->missing(p->plan)) {
      todo.push_back({p.get(), c, {}, false, {}});
      bytes += c.len;
    }
  }
  if (!todo.empty()) {
    std::unique_ptr<Progress> bar = progress ? progress("core", bytes) : nullptr;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job*> running;
    Status first_error;
    std::vector<std::thread> readers;
    size_t next = 0;
    const size_t window = 8;  // chunks in flight (16 MiB each at most)
    for (;;) {
      while (first_error.ok() && next < todo.size() && running.size() < window) {
        Job* j = &todo[next++];
        j->buf.resize(j->chunk.len);
        running.push_back(j);
        if (j->part->view) {  // a folder: the view reads (and widens) from the shards
          readers.emplace_back([j, &mu, &cv] {
            Status s = j->part->view->read_at(j->chunk.offset, j->buf.data(), j->chunk.len);
            std::lock_guard<std::mutex> lk(mu);
            j->status = s;
            j->done = true;
            cv.notify_all();
          });
          continue;
        }
        get_origin_range(*client_, origins.at(j->part), j->chunk.offset, j->chunk.len, j->buf.data(),
                         IoPriority::Demand, [j, &mu, &cv](const Status& s) {
                             std::lock_guard<std::mutex> lk(mu);
                             j->status = s;
                             j->done = true;
                             cv.notify_all();
                           });
      }
      if (running.empty()) break;
      Job* j = nullptr;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] {
          for (Job* r : running)
            if (r->done) return true;
          return false;
        });
        for (auto it = running.begin(); it != running.end(); ++it)
          if ((*it)->done) {
            j = *it;
            running.erase(it);
            break;
          }
      }
      Status s = j->status;
      if (s.ok()) s = j->part->core->store(j->chunk, j->buf.data());
      if (s.ok() && bar) bar->add(j->chunk.len);
      if (!s.ok() && first_error.ok()) first_error = s;
      std::vector<char>().swap(j->buf);
    }
    for (std::thread& t : readers) t.join();
    if (!first_error.ok()) return first_error;
  }
  for (auto& p : parts_)
    if (!p->core->complete()) DF_TRY(p->core->finish(p->plan));
  return {};
}

}  // namespace deltafin

namespace deltafin {
std::string format_remote_stats(RemoteModel& m) {
  const ExpertCacheStats c = m.experts().stats();
  const HttpStats h = m.client()->stats();
  return fmt::format(
      "disk cache: {} experts from disk, {} fetched from the origin ({:.1f} MiB in {} range requests), {} waited on "
      "another process, {} corrupt dropped, {} write errors, {} evicted\n"
      "network: {} requests ({}), {} retries, {:.1f} MiB received, {:.2f} MiB/s while busy ({:.3f} s busy)\n",
      c.disk_hits, c.fetched, c.fetched_bytes / 1048576.0, c.requests, c.waited, c.corrupt, c.write_errors, c.evicted,
      h.requests, http_versions_text(h), h.retries, h.bytes / 1048576.0, h.busy_s > 0 ? h.bytes / h.busy_s / 1048576.0 : 0.0, h.busy_s);
}
}  // namespace deltafin
