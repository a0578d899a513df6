#include "store/cache_tier.h"

#include "io/io_pool.h"
#include "store/slot_layout.h"

namespace deltafin {

namespace {

class CacheTier final : public Tier {
 public:
  CacheTier(ExpertCache& cache, int io_threads)
      : cache_(cache), io_(std::make_unique<IoPool>(std::max(1, io_threads))) {}
  ~CacheTier() override { io_.reset(); }  // running fetches finish; queued ones are dropped

  void read(std::vector<TierRead> jobs, bool demand, Done done) override {
    std::vector<ExpertFetch> fetches;
    fetches.reserve(jobs.size());
    for (const TierRead& j : jobs) {
      const ExpertSlices& sl = cache_.index().slices(j.key);
      PartLayout lay[kExpertParts];
      slot_layout(sl, lay);
      ExpertFetch f;
      f.key = j.key;
      for (int p = 0; p < kExpertParts; ++p)
        if (sl.part[p].bytes > 0) f.dst[p] = j.slot + lay[p].view_pos;
      fetches.push_back(f);
    }
    io_->submit(demand ? IoPriority::Demand : IoPriority::Prefetch,
                [this, fetches = std::move(fetches), demand, done = std::move(done)] {
      cache_.fetch(fetches, demand, [this, &done](int key, const Status& s) {
        done(key, s, s.ok() ? cache_.index().slices(key).bytes() : 0);
      });
    });
  }

  void promote(int key) override { cache_.promote(key); }

 private:
  ExpertCache& cache_;
  std::unique_ptr<IoPool> io_;  // last: its threads use cache_
};

}  // namespace

std::unique_ptr<Tier> make_cache_tier(ExpertCache& cache, int io_threads) {
  return std::make_unique<CacheTier>(cache, io_threads);
}

}  // namespace deltafin
