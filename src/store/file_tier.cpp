#include "store/file_tier.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <xxhash.h>

#include "io/concat_source.h"
#include "io/direct_file.h"
#include "io/io_pool.h"
#include "store/slot_layout.h"

namespace deltafin {

namespace {

class FileTier final : public Tier {
 public:
  FileTier(ModelFile& file, const ExpertIndex& ix, int io_threads, bool direct, bool verify) : file_(file), ix_(ix) {
    if (verify) part_hash_.assign(size_t(ix_.n_keys()) * kExpertParts, 0);
    for (int s = 0; s < file_.shard_count(); ++s) {
      frags_.emplace_back();
      if (auto* c = dynamic_cast<ConcatSource*>(&file_.source(s))) {
        // Byte fragments of one file (format/fragments.h): a DirectFile each.
        for (int k = 0; k < c->count(); ++k) {
          auto f = DirectFile::open(c->part(k).name(), direct);
          if (!f.ok()) {
            frags_.back().clear();
            break;
          }
          frags_.back().push_back({std::move(f).value(), c->start(k)});
        }
        files_.push_back(nullptr);
        continue;
      }
      auto f = DirectFile::open(file_.source(s).name(), direct);
      // Not a local file: read through the model's source.
      files_.push_back(f.ok() ? std::move(f).value() : nullptr);
    }
    io_ = std::make_unique<IoPool>(std::max(1, io_threads));
  }
  ~FileTier() override { io_.reset(); }  // running reads finish; queued ones are dropped

  // One I/O job per part; the last part to finish reports the expert.
  void read(std::vector<TierRead> jobs, bool demand, Done done) override {
    auto cb = std::make_shared<Done>(std::move(done));
    for (const TierRead& j : jobs) {
      const ExpertSlices& sl = ix_.slices(j.key);
      PartLayout lay[kExpertParts];
      slot_layout(sl, lay);
      auto job = std::make_shared<Job>();
      for (int p = 0; p < kExpertParts; ++p) job->parts_left += sl.part[p].bytes > 0;
      for (int p = 0; p < kExpertParts; ++p) {
        if (sl.part[p].bytes == 0) continue;
        const ExpertSlice part = sl.part[p];
        const PartLayout pl = lay[p];
        io_->submit(demand ? IoPriority::Demand : IoPriority::Prefetch,
                    [this, key = j.key, base = j.slot, p, part, pl, job, cb] {
          DirectFile* f = files_[size_t(part.shard)].get();
          bool aligned = f != nullptr;
          Status s = f ? f->read_aligned(pl.file_off, base + pl.slot_pos, pl.len)
                       : read_fragments(part, pl, base, &aligned);
          if (s.ok() && !part_hash_.empty()) s = verify_part(key, p, base + pl.view_pos, part.bytes);
          if (job->finish(s, aligned ? pl.len : part.bytes)) (*cb)(key, job->status, job->bytes);
        });
      }
    }
  }

  bool direct() const override {
    if (!frags_.empty() && !frags_[0].empty()) return frags_[0][0].file->direct();
    return !files_.empty() && files_[0] && files_[0]->direct();
  }

 private:
  struct Fragment {
    std::unique_ptr<DirectFile> file;
    uint64_t start = 0;  // in the whole
  };

  // A part of a shard that is a set of local fragments: its aligned request read
  // piece by piece from the fragments it spans, uncached, when every piece is aligned
  // in its fragment (fragments cut to a multiple of the block size, as `split -b 1G`
  // cuts); else, and for a shard that is not local fragments, the slice alone through
  // the model's source. *aligned: whether the aligned request was read.
  Status read_fragments(const ExpertSlice& part, const PartLayout& pl, char* base, bool* aligned) {
    const std::vector<Fragment>& fr = frags_[size_t(part.shard)];
    *aligned = !fr.empty();
    for (size_t k = 0; *aligned && k < fr.size(); ++k) {
      const uint64_t lo = std::max(pl.file_off, fr[k].start);
      const uint64_t hi = k + 1 < fr.size() ? std::min(pl.file_off + pl.len, fr[k + 1].start) : pl.file_off + pl.len;
      if (lo >= hi) continue;
      *aligned = (lo - fr[k].start) % kDirectAlign == 0 && (hi - lo) % kDirectAlign == 0;
    }
    if (!*aligned) return file_.source(part.shard).read_at(part.offset, base + pl.view_pos, part.bytes);
    for (size_t k = 0; k < fr.size(); ++k) {
      const uint64_t lo = std::max(pl.file_off, fr[k].start);
      const uint64_t hi = k + 1 < fr.size() ? std::min(pl.file_off + pl.len, fr[k + 1].start) : pl.file_off + pl.len;
      if (lo >= hi) continue;
      DF_TRY(fr[k].file->read_aligned(lo - fr[k].start, base + pl.slot_pos + (lo - pl.file_off), hi - lo));
    }
    return {};
  }

  // One expert's reads in flight.
  struct Job {
    std::mutex mu;
    int parts_left = 0;
    Status status;       // the first error
    uint64_t bytes = 0;  // transferred by the parts that succeeded
    // Records one part; true when it was the last.
    bool finish(const Status& s, uint64_t n) {
      std::lock_guard<std::mutex> lk(mu);
      if (s.ok()) bytes += n;
      else if (status.ok()) status = s;
      return --parts_left == 0;
    }
  };

  // --verify: a part's XXH3-64 against the one of its first read by this tier.
  // Only one read of a key is in flight (the store's RAM cache sees to it), and the
  // store's lock orders one read's record before the next read of the same key.
  Status verify_part(int key, int p, const void* data, uint64_t bytes) {
    const uint64_t h = XXH3_64bits(data, size_t(bytes)) | 1;  // 0: not read yet
    uint64_t& first = part_hash_[size_t(key) * kExpertParts + size_t(p)];
    if (first == 0) first = h;
    if (first == h) return {};
    const int moe = ix_.key_moe(key);
    static const char* const names[kExpertParts] = {"gate", "up", "down"};
    return make_error("{}: expert {} of layer {} ({} part, {} bytes at offset {}) is not what it was when first "
                      "read: the model file changed while deltafin ran (--verify)",
                      file_.source(ix_.slices(key).part[p].shard).name(), key - ix_.key(moe, 0),
                      ix_.model_layer(moe), names[p], bytes, ix_.slices(key).part[p].offset);
  }

  ModelFile& file_;
  const ExpertIndex& ix_;
  std::vector<std::unique_ptr<DirectFile>> files_;  // per shard; null: read through file_ (or frags_)
  std::vector<std::vector<Fragment>> frags_;        // per shard: its local fragments, if it is a set of them
  std::vector<uint64_t> part_hash_;  // --verify: per key and part, XXH3-64 | 1 of its first read (0: none yet)
  std::unique_ptr<IoPool> io_;       // last: its threads use the members above
};

}  // namespace

std::unique_ptr<Tier> make_file_tier(ModelFile& file, const ExpertIndex& ix, int io_threads, bool direct,
                                     bool verify) {
  return std::make_unique<FileTier>(file, ix, io_threads, direct, verify);
}

}  // namespace deltafin
