#include "cache/cache_admin.h"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cache/core_file.h"
#include "cache/expert_entry.h"
#include "cache/fs.h"

namespace deltafin {

std::string models_dir(const std::string& root) { return root + "/models"; }
std::string tmp_dir(const std::string& root) { return root + "/tmp"; }

namespace {

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool parse_entry_name(const std::string& name, int* layer, int* expert) {
  int used = 0;
  return std::sscanf(name.c_str(), "%d-%d%n", layer, expert, &used) == 2 && size_t(used) == name.size();
}

CachedModel scan_model(const std::string& dir) {
  CachedModel m;
  m.dir = dir;
  if (auto meta = read_small_file(dir + "/meta.json"); meta.ok()) {
    try {
      auto j = nlohmann::json::parse(*meta);
      m.location = j.value("location", "");
      m.key = j.value("key", "");
      for (const auto& p : j.at("parts")) {
        m.part_sizes.push_back(p.value("size", uint64_t(0)));
        m.model_bytes += m.part_sizes.back();
      }
      m.parts = int(j.at("parts").size());
    } catch (...) {
    }
  }
  for (int p = 1; p <= std::max(m.parts, 1); ++p) {
    const std::string base = fmt::format("{}/core-{}", dir, p);
    m.core_bytes += disk_usage(base + ".bin");
    if (::access((base + ".ok").c_str(), F_OK) == 0) ++m.core_complete_parts;
  }
  const std::string edir = dir + "/experts";
  for (const std::string& name : list_dir(edir)) {
    CachedEntry e;
    if (!parse_entry_name(name, &e.layer, &e.expert)) continue;
    e.path = edir + "/" + name;
    struct stat st;
    if (::stat(e.path.c_str(), &st) != 0) continue;
    e.bytes = uint64_t(st.st_size);
    e.mtime = int64_t(st.st_mtime);
    m.expert_bytes += e.bytes;
    m.entries.push_back(std::move(e));
  }
  return m;
}

int remove_tree_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

}  // namespace

Result<std::vector<CachedModel>> scan_cache(const std::string& root) {
  std::vector<CachedModel> out;
  for (const std::string& name : list_dir(models_dir(root))) out.push_back(scan_model(models_dir(root) + "/" + name));
  return out;
}

uint64_t cache_bytes(const std::vector<CachedModel>& models) {
  uint64_t n = 0;
  for (const CachedModel& m : models) n += m.core_bytes + m.expert_bytes;
  return n;
}

UsageCounts read_usage(const std::string& model_dir) {
  UsageCounts u;
  auto text = read_small_file(model_dir + "/usage");
  if (!text.ok() || text->rfind("deltafin-usage 1\n", 0) != 0) return u;
  size_t pos = text->find('\n') + 1;
  while (pos < text->size()) {
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos) break;
    int l = 0, e = 0;
    double c = 0;
    if (std::sscanf(text->c_str() + pos, "%d %d %lf", &l, &e, &c) == 3 && c > 0) u[{l, e}] = c;
    pos = nl + 1;
  }
  return u;
}

Status merge_usage(const std::string& model_dir, const std::string& tmp, const UsageCounts& deltas) {
  if (deltas.empty()) return {};
  DF_ASSIGN(FileLock lock, FileLock::acquire(model_dir + "/usage.lock"));
  UsageCounts u = read_usage(model_dir);
  double mx = 0;
  for (const auto& [k, c] : deltas) mx = std::max(mx, u[k] += c);
  const double scale = mx > 1e6 ? 0.5 : 1.0;  // let old habits fade
  std::string text = "deltafin-usage 1\n";
  for (const auto& [k, c] : u)
    if (c * scale >= 0.01) text += fmt::format("{} {} {:.3f}\n", k.first, k.second, c * scale);
  return write_file_atomic(model_dir + "/usage", tmp, {text});
}

Result<PruneReport> prune_cache(const std::string& root, uint64_t budget) {
  DF_TRY(make_dirs(root));
  DF_ASSIGN(FileLock lock, FileLock::acquire(root + "/evict.lock"));
  DF_ASSIGN(std::vector<CachedModel> models, scan_cache(root));
  PruneReport r;
  r.before = r.after = cache_bytes(models);
  if (r.before <= budget) return r;
  struct Candidate {
    const CachedEntry* e;
    double count;
  };
  std::vector<Candidate> cands;
  for (const CachedModel& m : models) {
    UsageCounts u = read_usage(m.dir);
    for (const CachedEntry& e : m.entries) {
      auto it = u.find({e.layer, e.expert});
      cands.push_back({&e, it == u.end() ? 0.0 : it->second});
    }
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    return a.count != b.count ? a.count < b.count : a.e->mtime < b.e->mtime;
  });
  for (const Candidate& c : cands) {
    if (r.after <= budget) break;
    if (::unlink(c.e->path.c_str()) != 0) continue;
    r.after -= c.e->bytes;
    r.freed += c.e->bytes;
    ++r.removed;
  }
  return r;
}

bool model_matches(const CachedModel& m, const std::string& filter) {
  if (filter.empty()) return true;
  std::string name = m.dir.substr(m.dir.rfind('/') + 1);
  return filter == m.location || filter == m.key || filter == name || filter == m.dir;
}

Result<VerifyReport> verify_cache(const std::string& root, const std::string& filter) {
  VerifyReport r;
  r.temps_removed = remove_stale_temps(tmp_dir(root));
  DF_ASSIGN(std::vector<CachedModel> models, scan_cache(root));
  for (const CachedModel& m : models) {
    if (!model_matches(m, filter)) continue;
    for (const CachedEntry& e : m.entries) {
      int l = -1, x = -1;
      uint64_t bytes = 0;
      EntryRead er = check_entry_file(e.path, &l, &x, &bytes);
      if (er.state == EntryState::Missing) continue;  // evicted meanwhile
      if (er.state == EntryState::Ok && (l != e.layer || x != e.expert))
        er = {EntryState::Corrupt, fmt::format("holds expert {} of layer {}", x, l)};
      if (er.state == EntryState::Ok) {
        ++r.entries_ok;
        continue;
      }
      ++r.entries_bad;
      ::unlink(e.path.c_str());
      r.problems.push_back(fmt::format("{}: {} (removed; it will be fetched again)", e.path, er.why));
    }
    // Anything else in experts/ is out of place (entries appear only by rename).
    for (const std::string& name : list_dir(m.dir + "/experts")) {
      int l, x;
      if (!parse_entry_name(name, &l, &x)) r.problems.push_back(fmt::format("{}/experts/{}: stray file", m.dir, name));
    }
    for (int p = 1; p <= std::max(m.parts, 1); ++p) {
      const std::string base = fmt::format("{}/core-{}", m.dir, p);
      auto text = read_small_file(base + ".ok");
      if (!text.ok()) continue;  // not complete: a download resumes it
      unsigned long long size = 0;
      // The part's size as meta.json pinned it: a manifest naming another size must
      // not resize the data file.
      const bool known = size_t(p) <= m.part_sizes.size();
      if (std::sscanf(text->c_str(), "deltafin-core 1 %llu", &size) != 1 ||
          (known && size != m.part_sizes[size_t(p - 1)])) {
        ::unlink((base + ".ok").c_str());
        r.problems.push_back(fmt::format("{}.ok: malformed manifest (removed; the core will be fetched again)", base));
        continue;
      }
      DF_ASSIGN(auto core, CoreFile::open(base, tmp_dir(root), size));
      if (!core->complete()) {  // a damaged manifest: CoreFile dropped it
        r.problems.push_back(fmt::format("{}.ok: damaged manifest (removed; the core will be fetched again)", base));
        continue;
      }
      DF_ASSIGN(int bad, core->verify());
      if (bad == 0) {
        ++r.core_parts_ok;
      } else {
        r.core_chunks_bad += bad;
        r.problems.push_back(fmt::format("{}.bin: {} chunk(s) failed their checksum (they will be fetched again)", base, bad));
      }
    }
  }
  return r;
}

Result<std::vector<CachedModel>> clear_cache(const std::string& root, const std::string& filter) {
  DF_ASSIGN(std::vector<CachedModel> models, scan_cache(root));
  std::vector<CachedModel> removed;
  for (CachedModel& m : models) {
    if (!model_matches(m, filter)) continue;
    if (::nftw(m.dir.c_str(), remove_tree_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
      return make_error("cannot remove '{}': {}", m.dir, std::strerror(errno));
    removed.push_back(std::move(m));
  }
  return removed;
}

}  // namespace deltafin
