// A Hugging Face folder at an HTTP origin (remote_hf.h).
#include "store/remote_hf.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cache/cache_admin.h"
#include "cache/fs.h"
#include "core/log.h"
#include "format/hf_folder.h"
#include "format/hf_gguf_source.h"
#include "format/safetensors.h"
#include "io/http_source.h"
#include "remote/hf_repo.h"
#include "store/remote_model.h"
#include "store/remote_part.h"

namespace deltafin {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_commit(const std::string& r) {
  return r.size() == 40 &&
         std::all_of(r.begin(), r.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// What meta.json of a folder's directory records.
struct FolderMeta {
  std::string key, base, view_hash;
  std::vector<std::string> revisions;
  std::vector<HttpIdentity> parts;
  std::map<std::string, RemoteShard> shards;
  bool folder = false;
};

Result<FolderMeta> read_folder_meta(const std::string& dir) {
  FolderMeta m;
  auto text = read_small_file(dir + "/meta.json");
  if (!text.ok()) return m;
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    m.key = j.value("key", "");
    m.base = j.value("base", "");
    m.view_hash = j.value("view_hash", "");
    m.folder = j.value("folder", false);
    if (j.contains("revisions")) m.revisions = j.at("revisions").get<std::vector<std::string>>();
    for (const auto& p : j.at("parts")) m.parts.push_back({p.at("size").get<uint64_t>(), "", "", 0});
    if (j.contains("shards"))
      for (const auto& s : j.at("shards")) {
        RemoteShard r;
        r.file = s.at("file").get<std::string>();
        r.url = s.value("url", "");
        r.id = {s.at("size").get<uint64_t>(), s.value("etag", ""), s.value("last_modified", ""), 0};
        m.shards[r.file] = r;
      }
  } catch (const std::exception& e) {
    return make_error("{}/meta.json is malformed ({}); remove the directory to start over", dir, e.what());
  }
  return m;
}

// The cached copy of a folder location with a complete core ("" if none): an
// hf:// location by its repository and revision (a commit, or a branch the copy
// recorded; the newest wins), a URL prefix by its key.
std::string find_cached_folder(const std::string& root, const ModelLocation& loc) {
  std::string best;
  std::filesystem::file_time_type best_time{};
  std::error_code ec;
  const bool hf = loc.kind == ModelLocation::Kind::HuggingFace;
  const std::string prefix = fmt::format("hf://{}@", loc.repo);
  for (const auto& d : std::filesystem::directory_iterator(models_dir(root), ec)) {
    const std::string dir = d.path().string();
    if (::access((dir + "/core-1.ok").c_str(), F_OK) != 0) continue;
    auto m = read_folder_meta(dir);
    if (!m.ok() || !m->folder) continue;
    if (hf) {
      if (m->key.rfind(prefix, 0) != 0 || !ends_with(m->key, "/")) continue;
      const std::string rev = m->key.substr(prefix.size(), m->key.size() - prefix.size() - 1);
      if (rev != loc.revision &&
          std::find(m->revisions.begin(), m->revisions.end(), loc.revision) == m->revisions.end())
        continue;
    } else if (m->key != redact_url(loc.url)) {
      continue;
    }
    const auto t = std::filesystem::last_write_time(dir + "/meta.json", ec);
    if (best.empty() || t > best_time) best = dir, best_time = t;
  }
  return best;
}

// A readable name for the cache directory: the repository's or the URL's last part.
std::string folder_stem(const ModelLocation& loc) {
  std::string s = loc.kind == ModelLocation::Kind::HuggingFace ? loc.repo : redact_url(loc.url);
  while (!s.empty() && s.back() == '/') s.pop_back();
  s = s.substr(s.rfind('/') + 1);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return (s.empty() ? std::string("model") : s.substr(0, 80)) + "-hf";
}

// A shard whose header (the first bytes) is held in memory; the rest comes from the
// origin.
class HeaderedShard final : public ByteSource {
 public:
  HeaderedShard(std::shared_ptr<HttpSource> http, std::string header)
      : http_(std::move(http)), header_(std::move(header)) {}
  uint64_t size() const override { return http_->size(); }
  const std::string& name() const override { return http_->name(); }
  Status read_at(uint64_t offset, void* dst, size_t n) override {
    if (offset <= header_.size() && n <= header_.size() - offset) {
      std::memcpy(dst, header_.data() + offset, n);
      return {};
    }
    return http_->read_at(offset, dst, n);
  }

 private:
  std::shared_ptr<HttpSource> http_;
  std::string header_;
};

constexpr uint64_t kMaxSmallFile = uint64_t(256) << 20;
constexpr uint64_t kMaxHeader = uint64_t(100) << 20;  // as format/safetensors.h bounds it

}  // namespace

std::vector<CoreChunk> plan_view_core(const GGUFFile& meta, uint64_t header_bytes,
                                      const std::set<std::string>& expert_tensors) {
  std::vector<CoreChunk> ranges = {{0, header_bytes, 0}};
  for (const auto& t : meta.tensors)
    if (!expert_tensors.count(t.name) && t.bytes > 0) ranges.push_back({meta.data_offset + t.offset, t.bytes, 0});
  std::sort(ranges.begin(), ranges.end(), [](const CoreChunk& x, const CoreChunk& y) { return x.offset < y.offset; });
  std::vector<CoreChunk> merged;
  for (const CoreChunk& r : ranges) {
    // Alignment padding between tensors costs nothing: the view makes it.
    if (!merged.empty() && r.offset <= merged.back().offset + merged.back().len + 4096)
      merged.back().len = std::max(merged.back().offset + merged.back().len, r.offset + r.len) - merged.back().offset;
    else
      merged.push_back(r);
  }
  std::vector<CoreChunk> chunks;
  for (const CoreChunk& m : merged)
    for (uint64_t o = m.offset; o < m.offset + m.len; o += kMaxCoreChunk)
      chunks.push_back({o, std::min(kMaxCoreChunk, m.offset + m.len - o), 0});
  return chunks;
}

bool hf_listing_is_folder(const std::vector<std::string>& files) {
  bool config = false, safetensors = false;
  for (const std::string& f : files) {
    const std::string l = lower(f);
    if (ends_with(l, ".gguf")) return false;
    config |= f == "config.json";
    safetensors |= ends_with(l, ".safetensors");
  }
  return config && safetensors;
}

bool url_is_folder(const std::string& url) {
  const size_t q = url.find_first_of("?#");
  const std::string path = url.substr(0, q);
  return !path.empty() && path.back() == '/';
}

Status RemoteModel::open_folder() {
  const ModelLocation& loc = loc_;
  const bool hf = loc.kind == ModelLocation::Kind::HuggingFace;
  folder_ = std::make_unique<RemoteFolder>();
  RemoteFolder& F = *folder_;
  F.base = hf ? loc.hf_url(loc.revision, "") : loc.url;
  const std::string cached = find_cached_folder(root_, loc);
  if (opts_.offline) {
    if (cached.empty())
      return make_error("--offline: {} is not in the disk cache {} (run `deltafin pull {}` while the origin is "
                        "reachable)", loc.text, root_, loc.text);
    offline_reason_ = "--offline is set";
  } else {
    // config.json: it must be there, and the hub says which commit the revision is.
    bool unreachable = false;
    const std::string cfg = F.base + "config.json";
    auto probed = client_->probe(cfg, cached.empty() ? 0 : 2, &unreachable);
    if (!probed.ok()) {
      if (!(unreachable && !cached.empty()))
        return make_error("{}: cannot open {}: {}{}", loc.text, redact_url(cfg), probed.error().message,
                          hf_access_hint(loc, http_status_in(probed.error().message)));
      offline_reason_ = fmt::format("the origin is unreachable ({})", probed.error().message);
    } else if (hf) {
      const std::string& commit = probed->repo_commit;
      if (!commit.empty() && commit != loc.revision) {
        F.base = loc.hf_url(commit, "");
        DF_LOG_INFO("{}: revision {} is commit {}", loc.text, loc.revision, commit);
      }
      key_ = fmt::format("hf://{}@{}/", loc.repo, commit.empty() ? loc.revision : commit);
    } else {
      key_ = redact_url(F.base);
    }
  }
  FolderMeta meta;
  if (!offline_reason_.empty()) {
    DF_LOG_WARN("{}: {}; working offline from the disk cache {}", loc.text, offline_reason_, cached);
    dir_ = cached;
    DF_ASSIGN(meta, read_folder_meta(dir_));
    if (meta.key.empty() || meta.base.empty()) return make_error("{}/meta.json names no folder", dir_);
    key_ = meta.key;
    F.base = meta.base;
  } else {
    dir_ = fmt::format("{}/{}-{:016x}", models_dir(root_), folder_stem(loc), XXH3_64bits(key_.data(), key_.size()));
    DF_ASSIGN(meta, read_folder_meta(dir_));
  }
  revisions_ = meta.revisions;
  pinned_ = meta.parts;
  DF_TRY(make_dirs(dir_ + "/files"));
  DF_TRY(make_dirs(tmp_dir(root_)));
  remove_stale_temps(tmp_dir(root_));
  if (hf && !is_commit(loc.revision) &&
      std::find(revisions_.begin(), revisions_.end(), loc.revision) == revisions_.end()) {
    revisions_.push_back(loc.revision);
    meta_dirty_ = true;
  }
  const size_t at = key_.find('@');
  const bool commit_pinned = hf && at != std::string::npos && is_commit(key_.substr(at + 1, key_.size() - at - 2));
  const std::string files_dir = dir_ + "/files/";

  // The small files: from files/, else fetched once and kept.
  auto open_small = [&](const std::string& rel) -> Result<std::unique_ptr<ByteSource>> {
    const std::string path = files_dir + rel, url = F.base + rel;
    if (auto text = read_small_file(path); text.ok()) return memory_source(std::move(*text), redact_url(url));
    if (::access((path + ".absent").c_str(), F_OK) == 0) return make_error("{}: not in the folder", redact_url(url));
    if (!offline_reason_.empty())
      return make_error("{} is not in the disk cache ({}) and {}", redact_url(url), path, offline_reason_);
    DF_ASSIGN(HttpText t, client_->get_text(url, size_t(kMaxSmallFile)));
    if (t.status == 404) {
      DF_TRY(write_file_atomic(path + ".absent", tmp_dir(root_), {}));
      return make_error("{}: HTTP 404", redact_url(url));
    }
    if (t.status != 200)
      return make_error("GET {}: HTTP {}{}", redact_url(url), t.status, hf_access_hint(loc, t.status));
    DF_TRY(write_file_atomic(path, tmp_dir(root_), {t.body}));
    return memory_source(std::move(t.body), redact_url(url));
  };

  // A shard: its identity pinned (probed unless a commit pins it), its header from
  // files/ or fetched by two range requests (the length, then the JSON).
  std::map<std::string, RemoteShard> opened;
  auto open_shard = [&](const std::string& rel) -> Result<std::unique_ptr<ByteSource>> {
    const std::string url = F.base + rel;
    auto pin = meta.shards.find(rel);
    const HttpIdentity* pinned = pin == meta.shards.end() ? nullptr : &pin->second.id;
    std::shared_ptr<HttpSource> http;
    if (!offline_reason_.empty()) {
      if (!pinned) return make_error("{} is not in the disk cache and {}", redact_url(url), offline_reason_);
      http = std::make_shared<HttpSource>(client_, url, *pinned);
    } else if (pinned && commit_pinned) {
      http = std::make_shared<HttpSource>(client_, url, *pinned);  // the commit pins its bytes
    } else {
      DF_ASSIGN(std::unique_ptr<HttpSource> probed, HttpSource::open(client_, url, pinned));
      http = std::move(probed);
    }
    const std::string path = files_dir + rel + ".header";
    std::string header;
    if (auto text = read_small_file(path); text.ok() && text->size() >= 8) {
      header = std::move(*text);
    } else if (!offline_reason_.empty()) {
      return make_error("the header of {} is not in the disk cache ({}) and {}", redact_url(url), path,
                        offline_reason_);
    } else if (http->size() >= 8) {
      char len[8];
      DF_TRY(http->read_at(0, len, 8));
      uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(len[i]);
      header.assign(len, 8);
      // A length the file cannot hold is left for the parser to report.
      if (n <= kMaxHeader && n <= http->size() - 8) {
        header.resize(size_t(8 + n));
        DF_TRY(http->read_at(8, header.data() + 8, size_t(n)));
        DF_TRY(write_file_atomic(path, tmp_dir(root_), {header}));
      }
    }
    opened[rel] = {rel, url, http->identity()};
    return std::unique_ptr<ByteSource>(new HeaderedShard(std::move(http), std::move(header)));
  };

  SourceOpener opener = [&](const std::string& rel) -> Result<std::unique_ptr<ByteSource>> {
    if (ends_with(lower(rel), ".safetensors")) return open_shard(rel);
    return open_small(rel);
  };
  DF_ASSIGN(std::shared_ptr<HfFolder> folder, open_hf_folder(loc.text, opener));
  for (const std::string& f : folder->shard_files) {
    auto it = opened.find(f);
    if (it == opened.end()) return make_error("{}: shard {} was not opened", loc.text, f);
    F.shards.push_back(it->second);
  }
  DF_ASSIGN(std::unique_ptr<HfGgufSource> view, HfGgufSource::build(std::move(folder)));
  F.view = view.get();
  std::string header(size_t(view->header_size()), '\0');
  DF_TRY(view->read_at(0, header.data(), header.size()));
  F.view_hash = fmt::format("{:016x}", XXH3_64bits(header.data(), header.size()));
  if (!meta.view_hash.empty() && meta.view_hash != F.view_hash) {
    // Another build synthesized another GGUF header: the cached core does not match.
    if (!offline_reason_.empty())
      return make_error("{}: the core in the disk cache {} was made by another version of deltafin, and {}",
                        loc.text, dir_, offline_reason_);
    DF_LOG_WARN("{}: the core in the disk cache was made by another version of deltafin; fetching it again",
                loc.text);
    for (const char* ext : {".bin", ".journal", ".ok", ".verified"}) ::unlink((dir_ + "/core-1" + ext).c_str());
    pinned_.clear();
    meta_dirty_ = true;
  }
  if (meta.view_hash != F.view_hash) meta_dirty_ = true;

  auto part = std::make_unique<Part>();
  part->url = F.base;
  part->id.size = view->size();
  part->view_header = view->header_size();
  part->view = std::move(view);
  part->core_base = dir_ + "/core-1";
  DF_ASSIGN(part->core, CoreFile::open(part->core_base, tmp_dir(root_), part->id.size));
  if (part->core->complete()) {
    DF_ASSIGN(int bad, part->core->verify_if_changed());
    if (bad)
      DF_LOG_WARN("{}: {} core chunk(s) failed their checksum; fetching them again", part->core->data_path(), bad);
  }
  if (!offline_reason_.empty() && !part->core->complete())
    return make_error("{}: the core is not complete in the disk cache {} and {}; run `deltafin pull {}` while the "
                      "origin is reachable",
                      loc.text, dir_, offline_reason_, loc.text);
  parts_.push_back(std::move(part));
  return {};
}

}  // namespace deltafin
