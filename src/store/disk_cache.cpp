#include "store/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "cache/cache_admin.h"
#include "cache/expert_entry.h"
#include "core/log.h"

namespace deltafin {

void get_origin_range(HttpClient& client, const OriginPart& part, uint64_t offset, uint64_t n, char* dst,
                      IoPriority prio, HttpClient::Done done, std::shared_ptr<const std::atomic<bool>> urgent) {
  if (part.fragments.empty()) {
    client.get_range(part.url, offset, n, dst, &part.id, prio, std::move(done), std::move(urgent));
    return;
  }
  struct Pieces {
    std::mutex mu;
    int left = 0;
    Status first;
    HttpClient::Done done;
  };
  auto all = std::make_shared<Pieces>();
  all->done = std::move(done);
  struct Piece {
    const OriginFragment* f;
    uint64_t off, len;
    char* dst;
  };
  std::vector<Piece> pieces;
  const auto& fr = part.fragments;
  for (size_t k = 0; k < fr.size() && n > 0; ++k) {
    const uint64_t end = fr[k].start + fr[k].id.size;
    if (offset >= end) continue;
    const uint64_t len = std::min(n, end - offset);
    pieces.push_back({&fr[k], offset - fr[k].start, len, dst});
    offset += len, dst += len, n -= len;
  }
  if (n > 0) {
    all->done(make_error("{}: {} bytes at offset {} are past the end of its fragments", part.url, n, offset));
    return;
  }
  all->left = int(pieces.size());
  for (const Piece& p : pieces)
    client.get_range(p.f->url, p.off, p.len, p.dst, &p.f->id, prio,
                     [all](const Status& s) {
                       std::unique_lock<std::mutex> lk(all->mu);
                       if (!s.ok() && all->first.ok()) all->first = s;
                       if (--all->left > 0) return;
                       const Status st = all->first;
                       lk.unlock();
                       all->done(st);
                     },
                     urgent);
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::open(const std::string& root, const std::string& model_dir,
                                                       const ExpertIndex& ix, std::shared_ptr<HttpClient> client,
                                                       std::vector<OriginPart> parts, ExpertCacheOptions opts) {
  std::unique_ptr<ExpertCache> c(new ExpertCache(ix));
  c->root_ = root;
  c->dir_ = model_dir;
  c->tmp_ = tmp_dir(root);
  c->client_ = std::move(client);
  c->parts_ = std::move(parts);
  c->opts_ = opts;
  c->origin_.resize(size_t(ix.n_keys()));
  for (int k = 0; k < ix.n_keys(); ++k)
    for (int p = 0; p < kExpertParts; ++p) {
      const ExpertSlice& sl = ix.slices(k).part[p];
      if (!sl.bytes) continue;
      Extent& x = c->origin_[size_t(k)][size_t(p)];
      x.bytes = sl.bytes;
      x.part = sl.shard;
      x.offset = sl.offset;
      if (opts.locate) {
        DF_ASSIGN(OriginSpan at, opts.locate(sl));
        x.part = at.part;
        x.offset = at.offset;
        if (at.unpack) c->unpack_[k][size_t(p)] = std::move(at.unpack);
      }
      if (x.part < 0 || size_t(x.part) >= c->parts_.size() || x.offset > c->parts_[size_t(x.part)].id.size ||
          x.bytes > c->parts_[size_t(x.part)].id.size - x.offset)
        return make_error("{}: expert key {} part {} lies outside the origin's files", opts.model, k, p);
    }
  DF_TRY(make_dirs(model_dir + "/experts"));
  DF_TRY(make_dirs(c->tmp_));
  DF_ASSIGN(KeyLocks locks, KeyLocks::open(model_dir + "/experts.lock"));
  c->locks_ = std::make_unique<KeyLocks>(std::move(locks));
  if (opts.budget > 0) {
    DF_ASSIGN(auto models, scan_cache(root));
    c->usage_estimate_ = cache_bytes(models);
  }
  return c;
}

ExpertCache::~ExpertCache() {
  Status s = save_usage();
  if (!s.ok()) DF_LOG_WARN("{}", s.error().message);
}

std::string ExpertCache::entry_path(int key) const {
  const int moe = ix_.key_moe(key);
  return fmt::format("{}/experts/{}-{}", dir_, ix_.model_layer(moe), key - ix_.key(moe, 0));
}

bool ExpertCache::on_disk(int key) const { return ::access(entry_path(key).c_str(), F_OK) == 0; }

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return st_;
}

Status ExpertCache::save_usage() {
  UsageCounts deltas;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [key, n] : new_uses_) {
      const int moe = ix_.key_moe(key);
      deltas[{ix_.model_layer(moe), key - ix_.key(moe, 0)}] = n;
    }
    new_uses_.clear();
  }
  return merge_usage(dir_, tmp_, deltas);
}

// An entry read into dst (null: checked only). A corrupt one is removed.
bool ExpertCache::from_disk(int key, char* const* dst) {
  const int moe = ix_.key_moe(key);
  const std::string path = entry_path(key);
  char* none[kExpertParts] = {};
  EntryRead r = read_entry(path, ix_.model_layer(moe), key - ix_.key(moe, 0), ix_.slices(key), dst ? dst : none);
  if (r.state == EntryState::Corrupt) {
    DF_LOG_WARN("dropping corrupt cache entry {}: {}; fetching it again", path, r.why);
    ::unlink(path.c_str());
    std::lock_guard<std::mutex> lk(mu_);
    ++st_.corrupt;
  }
  return r.state == EntryState::Ok;
}

void ExpertCache::fetch(const std::vector<ExpertFetch>& jobs, bool demand, const Done& done) {
  std::vector<Want> miss;
  for (const ExpertFetch& j : jobs) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      new_uses_[j.key] += 1;
    }
    if (from_disk(j.key, j.dst)) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++st_.disk_hits;
        promoted_early_.erase(j.key);
      }
      done(j.key, {});
    } else {
      miss.push_back({j.key, j.dst});
    }
  }
  if (!miss.empty()) fetch_missing(std::move(miss), demand, done);
}

void ExpertCache::promote(int key) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = urgent_.find(key);
    if (it == urgent_.end()) {
      promoted_early_.insert(key);  // its prefetch has not started its requests yet
      return;
    }
    if (it->second->exchange(true)) return;
  }
  client_->wake();
}

void ExpertCache::release(int key) {
  locks_->unlock(uint64_t(key));
  {
    std::lock_guard<std::mutex> lk(mu_);
    claimed_.erase(key);
    urgent_.erase(key);
    promoted_early_.erase(key);
  }
  released_.notify_all();
}

void ExpertCache::fetch_missing(std::vector<Want> wants, bool demand, const Done& done) {
  // Claim: within this process by the set, across processes by the key lock.
  std::vector<Want> mine, ours_elsewhere, theirs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const Want& w : wants) (claimed_.insert(w.key).second ? mine : ours_elsewhere).push_back(w);
  }
  std::vector<Want> to_fetch;
  for (const Want& w : mine) {
    if (!locks_->try_lock(uint64_t(w.key))) {
      theirs.push_back(w);
      continue;
    }
    // Another process may have written it since we looked.
    if (from_disk(w.key, w.dst)) {
      release(w.key);
      done(w.key, {});
    } else {
      to_fetch.push_back(w);
    }
  }
  if (!to_fetch.empty()) fetch_runs(std::move(to_fetch), demand, done);
  // Another process is fetching these: wait for its entry.
  for (const Want& w : theirs) {
    Status s = locks_->lock(uint64_t(w.key));
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++st_.waited;
    }
    if (s.ok() && from_disk(w.key, w.dst)) {
      release(w.key);
      done(w.key, {});
    } else if (s.ok()) {
      fetch_runs({w}, demand, done);  // it failed there: fetch here
    } else {
      release(w.key);
      done(w.key, s);
    }
  }
  // Another thread of this process is fetching these.
  for (const Want& w : ours_elsewhere) {
    if (demand) promote(w.key);
    {
      std::unique_lock<std::mutex> lk(mu_);
      released_.wait(lk, [&] { return !claimed_.count(w.key); });
    }
    if (from_disk(w.key, w.dst)) done(w.key, {});
    else fetch_missing({w}, demand, done);
  }
}

namespace {
// Sorted by (part, offset), ranges that continue each other joined.
template <class E>
std::vector<E> merge_extents(std::vector<E> v) {
  std::sort(v.begin(), v.end(), [](const E& a, const E& b) { return a.part != b.part ? a.part < b.part : a.offset < b.offset; });
  std::vector<E> out;
  for (const E& e : v) {
    if (!out.empty() && out.back().part == e.part && out.back().offset + out.back().bytes == e.offset)
      out.back().bytes += e.bytes;
    else
      out.push_back(e);
  }
  return out;
}
}  // namespace

// Fetches claimed experts from the origin. Experts whose bytes continue each other's
// at the origin share range requests: an expert joins a run when its parts merge into
// the run's requests without adding one (adjacent experts of a GGUF layer, one
// request per part; experts lying one after another in a safetensors shard, one).
void ExpertCache::fetch_runs(std::vector<Want> wants, bool demand, const Done& done) {
  if (!opts_.offline_reason.empty()) {
    for (const Want& w : wants) {
      const int moe = ix_.key_moe(w.key);
      Error e = make_error("{}: expert {} of layer {} is not in the disk cache ({}) and {}", opts_.model,
                           w.key - ix_.key(moe, 0), ix_.model_layer(moe), entry_path(w.key), opts_.offline_reason);
      release(w.key);
      done(w.key, e);
    }
    return;
  }
  auto extents = [&](int key) {
    std::vector<Extent> v;
    for (const Extent& x : origin_[size_t(key)])
      if (x.bytes) v.push_back(x);
    return v;
  };
  auto first_at = [&](int key) {
    const std::vector<Extent> v = merge_extents(extents(key));
    return v.empty() ? std::pair<int, uint64_t>{0, 0} : std::pair<int, uint64_t>{v[0].part, v[0].offset};
  };
  std::sort(wants.begin(), wants.end(), [&](const Want& a, const Want& b) { return first_at(a.key) < first_at(b.key); });
  struct Run {
    std::vector<Want> experts;
    std::vector<Extent> reqs;  // the range requests, merged
    std::vector<uint64_t> req_pos;  // where each starts in buf
    std::vector<char> buf;
    int pending = 0;
    Status status;
    bool handled = false;
  };
  std::vector<std::unique_ptr<Run>> runs;
  uint64_t run_bytes = 0;
  for (const Want& w : wants) {
    const uint64_t b = ix_.slices(w.key).bytes();
    const std::vector<Extent> mine = extents(w.key);
    if (!runs.empty() && run_bytes + b <= opts_.max_request) {
      std::vector<Extent> joined = runs.back()->reqs;
      joined.insert(joined.end(), mine.begin(), mine.end());
      joined = merge_extents(std::move(joined));
      if (joined.size() <= runs.back()->reqs.size()) {
        runs.back()->experts.push_back(w);
        runs.back()->reqs = std::move(joined);
        run_bytes += b;
        continue;
      }
    }
    runs.push_back(std::make_unique<Run>());
    runs.back()->experts.push_back(w);
    runs.back()->reqs = merge_extents(mine);
    run_bytes = b;
  }
  std::mutex mu;
  std::condition_variable cv;
  const IoPriority prio = demand ? IoPriority::Demand : IoPriority::Prefetch;
  for (auto& r : runs) {
    std::shared_ptr<std::atomic<bool>> urgent;
    if (!demand) {  // promote() turns the whole run into a demand fetch
      urgent = std::make_shared<std::atomic<bool>>(false);
      std::lock_guard<std::mutex> lk(mu_);
      for (const Want& w : r->experts) {
        urgent_[w.key] = urgent;
        if (promoted_early_.erase(w.key)) urgent->store(true);
      }
    }
    uint64_t total = 0;
    for (const Extent& q : r->reqs) {
      r->req_pos.push_back(total);
      total += q.bytes;
    }
    r->buf.resize(total);
    r->pending = int(r->reqs.size());
    for (size_t q = 0; q < r->reqs.size(); ++q) {
      const Extent& x = r->reqs[q];
      const OriginPart& origin = parts_[size_t(x.part)];
      Run* run = r.get();
      get_origin_range(*client_, origin, x.offset, x.bytes, run->buf.data() + run->req_pos[q], prio,
                         [run, &mu, &cv](const Status& s) {
                           std::lock_guard<std::mutex> lk(mu);
                           if (!s.ok() && run->status.ok()) run->status = s;
                           if (--run->pending == 0) cv.notify_all();
                         },
                         urgent);
    }
    std::lock_guard<std::mutex> lk(mu_);
    st_.requests += r->reqs.size();
  }
  // Hand out each run as it lands; then store its entries.
  for (size_t handled = 0; handled < runs.size(); ++handled) {
    Run* run = nullptr;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] {
        for (auto& r : runs)
          if (!r->handled && r->pending == 0) return true;
        return false;
      });
      for (auto& r : runs)
        if (!r->handled && r->pending == 0) {
          run = r.get();
          break;
        }
      run->handled = true;
    }
    if (!run->status.ok()) {
      for (const Want& w : run->experts) {
        release(w.key);
        done(w.key, run->status);
      }
      continue;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      st_.fetched += run->experts.size();
      st_.fetched_bytes += run->buf.size();
    }
    std::vector<std::array<const char*, kExpertParts>> where;
    std::vector<char> fetched;
    for (const Want& w : run->experts) {
      const ExpertSlices& sl = ix_.slices(w.key);
      const auto unpack = unpack_.find(w.key);
      std::array<char*, kExpertParts> src{};
      for (int p = 0; p < kExpertParts; ++p) {
        if (!sl.part[p].bytes) continue;
        const Extent& x = origin_[size_t(w.key)][size_t(p)];
        for (size_t q = 0; q < run->reqs.size(); ++q) {
          const Extent& r = run->reqs[q];
          if (r.part == x.part && x.offset >= r.offset && x.offset + x.bytes <= r.offset + r.bytes) {
            src[size_t(p)] = run->buf.data() + run->req_pos[q] + (x.offset - r.offset);
            break;
          }
        }
        if (unpack != unpack_.end() && unpack->second[size_t(p)]) {  // in place: the bytes are the slice's alone
          fetched.assign(src[size_t(p)], src[size_t(p)] + x.bytes);
          unpack->second[size_t(p)](fetched.data(), src[size_t(p)]);
        }
        if (w.dst && w.dst[p]) std::memcpy(w.dst[p], src[size_t(p)], sl.part[p].bytes);
      }
      where.emplace_back();
      std::copy(src.begin(), src.end(), where.back().begin());
      if (w.dst) done(w.key, {});  // the caller may compute while we write
    }
    for (size_t i = 0; i < run->experts.size(); ++i) {
      const Want& w = run->experts[i];
      Status stored = store_entry(w.key, where[i].data(), /*warn=*/w.dst != nullptr);
      release(w.key);
      if (!w.dst) done(w.key, stored);  // filling the disk: not storing is the failure
    }
  }
}

Status ExpertCache::store_entry(int key, const char* const parts[kExpertParts], bool warn) {
  const ExpertSlices& sl = ix_.slices(key);
  const int moe = ix_.key_moe(key);
  uint64_t bytes[kExpertParts];
  for (int p = 0; p < kExpertParts; ++p) bytes[p] = sl.part[p].bytes;
  const std::string header = encode_entry_header(ix_.model_layer(moe), key - ix_.key(moe, 0), sl, hash_parts(parts, bytes));
  std::vector<std::string_view> pieces = {header};
  for (int p = 0; p < kExpertParts; ++p)
    if (bytes[p]) pieces.emplace_back(parts[p], bytes[p]);
  const uint64_t need = kEntryHeaderBytes + sl.bytes();
  make_room(need, /*disk_full=*/false);
  int err = 0;
  Status s = write_file_atomic(entry_path(key), tmp_, pieces, &err);
  if (!s.ok() && opts_.budget > 0 && (err == ENOSPC || err == EDQUOT)) {
    // The disk filled before the budget did: evict more, and try once again.
    make_room(need, /*disk_full=*/true);
    s = write_file_atomic(entry_path(key), tmp_, pieces, &err);
  }
  if (!s.ok()) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++st_.write_errors;
      first = warn && !warned_write_;
      warned_write_ |= warn;
    }
    if (first) DF_LOG_WARN("disk cache: {}; experts are served from memory without being cached", s.error().message);
    return s;
  }
  std::lock_guard<std::mutex> lk(mu_);
  usage_estimate_ += need;
  return {};
}

void ExpertCache::make_room(uint64_t need, bool disk_full) {
  if (opts_.budget == 0) return;
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!disk_full && usage_estimate_ + need <= opts_.budget) return;
    // Evict to 90% of the budget less what comes, so that evictions come in batches.
    const uint64_t batch = opts_.budget / 10 * 9;
    target = batch > need ? batch - need : 0;
    // A full disk: free what comes and a tenth of the budget more, below what is there.
    const uint64_t more = need + opts_.budget / 10;
    if (disk_full) target = std::min(target, usage_estimate_ > more ? usage_estimate_ - more : 0);
  }
  Status s = save_usage();  // let the counts of this process count
  if (!s.ok()) DF_LOG_WARN("{}", s.error().message);
  auto r = prune_cache(root_, target);
  std::lock_guard<std::mutex> lk(mu_);
  if (!r.ok()) {
    DF_LOG_WARN("disk cache: eviction failed: {}", r.error().message);
    usage_estimate_ = 0;
    return;
  }
  st_.evicted += uint64_t(r->removed);
  usage_estimate_ = r->after;
  if (r->after > opts_.budget)
    DF_LOG_WARN("disk cache: {:.1f} MiB of cores exceed the --disk-cache budget of {:.1f} MiB", r->after / 1048576.0,
                opts_.budget / 1048576.0);
}

Status ExpertCache::fill(const std::vector<int>& keys, uint64_t window,
                         const std::function<void(uint64_t)>& progress) {
  std::mutex mu;
  Status first_error;
  auto done = [&](int key, const Status& s) {
    std::lock_guard<std::mutex> lk(mu);
    if (!s.ok() && first_error.ok()) first_error = s;
    if (s.ok() && progress) progress(ix_.slices(key).bytes());
  };
  // Batches of a quarter of the window, four in flight, so that the link stays busy
  // while a finished batch is written out.
  std::vector<std::vector<Want>> batches(1);
  uint64_t batch_bytes = 0;
  for (int key : keys) {
    if (on_disk(key) && from_disk(key, nullptr)) {
      if (progress) progress(ix_.slices(key).bytes());
      continue;
    }
    if (batch_bytes >= std::max<uint64_t>(window / 4, 1)) {
      batches.emplace_back();
      batch_bytes = 0;
    }
    batches.back().push_back({key, nullptr});
    batch_bytes += ix_.slices(key).bytes();
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < batches.size();) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (!first_error.ok()) return;
      }
      if (!batches[i].empty()) fetch_missing(std::move(batches[i]), /*demand=*/true, done);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min<size_t>(4, batches.size()); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return first_error;
}

}  // namespace deltafin
