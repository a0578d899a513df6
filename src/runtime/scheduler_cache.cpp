// The scheduler's prompt cache: which kept, parked, disk or running state a new
// request starts from (assign_state), and the RAM and disk tiers states go to when
// their batch place is needed (park, to_disk).
#include <algorithm>

#include "core/log.h"
#include "runtime/prompt_disk_cache.h"
#include "runtime/scheduler_internal.h"

namespace deltafin {

namespace {
constexpr size_t kMinCopy = 16;  // shared prompt tokens for which a running sequence's state is copied

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}
}  // namespace

void Scheduler::assign_state(Seq& s, const std::vector<std::unique_ptr<Seq>>& active) {
  const std::vector<int32_t>& prompt = s.req.prompt;
  // At least the prompt's last token is evaluated: its logits give the first token.
  const size_t most = prompt.size() - 1;
  // The shared prefix, as far as the state can roll back to it.
  auto usable = [&](const SeqState& st, const std::vector<int32_t>& tokens) {
    return size_t(st.reachable(int(std::min(common_prefix(tokens, prompt), most))));
  };
  // The longest: a kept state, else (longer) a parked one, else (longer, kMinCopy
  // tokens at least: a copy costs about what a new state's zeroing does) a copy of
  // a running sequence's state (the same system prompt, say).
  enum class From { None, Kept, Parked, Disk, Copy } from = From::None;
  size_t best = 0, best_len = 0;
  // Every prompt position's logits wanted: nothing is taken from the cache.
  const bool reuse = !s.req.prompt_logprobs;
  for (size_t i = 0; reuse && i < kept_.size(); ++i)
    if (const size_t len = usable(*kept_[i].state, kept_[i].tokens); len > best_len)
      from = From::Kept, best = i, best_len = len;
  for (size_t i = 0; reuse && i < parked_.size(); ++i)
    if (const size_t len = usable(*parked_[i].state, parked_[i].tokens); len > best_len)
      from = From::Parked, best = i, best_len = len;
  // The disk tier: its best entry is read (and checked) only when it would beat the
  // states in RAM.
  Kept from_disk;
  if (reuse && opts_.disk) {
    size_t len = 0;
    const int i = opts_.disk->best(prompt, most, &len);
    if (i >= 0 && len > best_len) {
      from_disk.state = model_.new_state(opts_.n_ctx);
      if (Status ls = opts_.disk->load(i, *from_disk.state, &from_disk.tokens); !ls.ok()) {
        DF_LOG_WARN("prompt cache: {}", ls.error().message);
        from_disk.state.reset();
      } else if (const size_t got = usable(*from_disk.state, from_disk.tokens); got > best_len) {
        from = From::Disk, best_len = got;
      }
    }
  }
  const Seq* source = nullptr;
  for (auto& a : active) {
    if (!opts_.prompt_cache || !reuse || a.get() == &s || !a->state || a->held.empty()) continue;
    const size_t len = usable(*a->state, a->held);
    if (len > best_len && len >= kMinCopy) from = From::Copy, source = a.get(), best_len = len;
  }
  // A state of which less than half is used (another conversation that shares the
  // system prompt) is copied, so that its own conversation still finds it later.
  auto share = [&](std::deque<Kept>& q) {
    Kept& c = q[best];
    if (opts_.prompt_cache_bytes > 0 && best_len * 2 < c.tokens.size()) {
      from = From::Copy;
      return Kept{c.state->clone(), {}, 0};
    }
    Kept taken = std::move(c);
    q.erase(q.begin() + std::ptrdiff_t(best));
    return taken;
  };
  Kept k;
  if (from == From::Kept) {
    k = share(kept_);
  } else if (from == From::Parked) {
    k = share(parked_);
    if (from == From::Parked) parked_bytes_ -= k.bytes;
    k.state->fit(opts_.n_ctx);
    note_parked();
  } else if (from == From::Disk) {
    k = std::move(from_disk);
  } else if (from == From::Copy) {
    k.state = source->state->clone();
  }
  // Every state but a kept one taken back adds one: kept states beyond the batch
  // places go to RAM.
  if (from != From::Kept)
    while (!kept_.empty() && int(kept_.size() + active.size()) > opts_.n_parallel) {
      park(std::move(kept_.front()));
      kept_.pop_front();
    }
  if (k.state) {
    Status ts = k.state->truncate(int(best_len));
    if (ts.ok()) {
      s.state = std::move(k.state);
      s.held.assign(prompt.begin(), prompt.begin() + std::ptrdiff_t(best_len));
      s.n_prompt_done = int(best_len);
      {
        std::lock_guard<std::mutex> lk(s.handle->mu_);
        s.handle->n_cached_ = int(best_len);
      }
      std::lock_guard<std::mutex> lk(mu_);
      stats_.cached_prompt_tokens += best_len;
      ++stats_.prompt_cache_hits;
      if (from == From::Disk) ++stats_.prompt_cache_disk_hits;
      return;
    }
    DF_LOG_DEBUG("prompt cache: not reused ({})", ts.error().message);
    k.state.reset();
  }
  s.state = model_.new_state(opts_.n_ctx);
  s.held.clear();
}

void Scheduler::to_disk(const Kept& k) {
  if (!opts_.disk || !k.state) return;
  if (Status st = opts_.disk->put(k.tokens, *k.state); !st.ok()) DF_LOG_WARN("prompt cache: {}", st.error().message);
  note_disk();
}

void Scheduler::note_disk() {
  if (!opts_.disk) return;
  const PromptDiskStats ds = opts_.disk->stats();
  std::lock_guard<std::mutex> lk(mu_);
  stats_.disk_states = ds.entries;
  stats_.disk_bytes = ds.bytes;
}

void Scheduler::park(Kept k) {
  if (!k.state) return;
  if (opts_.prompt_cache_bytes == 0) return to_disk(k);
  k.state->fit(k.state->n_past);
  k.bytes = k.state->memory_bytes();
  if (k.bytes > opts_.prompt_cache_bytes) return to_disk(k);
  while (!parked_.empty() && parked_bytes_ + k.bytes > opts_.prompt_cache_bytes) {
    parked_bytes_ -= parked_.front().bytes;
    to_disk(parked_.front());
    parked_.pop_front();
  }
  parked_bytes_ += k.bytes;
  parked_.push_back(std::move(k));
  note_parked();
}

void Scheduler::note_parked() {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.parked = int(parked_.size());
  stats_.parked_bytes = parked_bytes_;
}

}  // namespace deltafin
