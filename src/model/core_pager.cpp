#include "model/core_pager.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "core/platform.h"
#include "io/direct_file.h"
#include "io/io_pool.h"

namespace deltafin {

namespace {

// Layer of a blk.N.* tensor that is not a routed expert; -1 otherwise.
int core_layer(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  char* end = nullptr;
  long layer = std::strtol(name.c_str() + 4, &end, 10);
  if (end == name.c_str() + 4 || *end != '.' || layer < 0 || layer > 1000000) return -1;
  if (name.find("_exps.") != std::string::npos) return -1;  // ffn_{gate,up,down}_exps
  return int(layer);
}

constexpr double kMiB = 1024.0 * 1024.0;
constexpr uint64_t kChunk = uint64_t(8) << 20;        // one read request at most
constexpr uint64_t kReadAtLoad = uint64_t(1) << 20;   // smaller mapped tensors are read at load

// The most buffer bytes a tensor takes in either layout: its aligned file range.
uint64_t aligned_span(const TensorRef& t) {
  return align_up(t.file_offset + t.info->bytes, kDirectAlign) - align_down(t.file_offset, kDirectAlign);
}

// Core bytes per layer (and their buffer bound) and outside the layers.
struct CoreSizes {
  std::vector<uint64_t> layer, bound;
  uint64_t other = 0;
  // The buffers when layers from `first` on stream: those of the window + 1 largest
  // of them (none when none streams).
  uint64_t window(int first, int window) const {
    std::vector<uint64_t> sorted(bound.begin() + std::min<ptrdiff_t>(first, ptrdiff_t(bound.size())), bound.end());
    std::sort(sorted.rbegin(), sorted.rend());
    uint64_t sum = 0;
    for (size_t k = 0; k < std::min(size_t(window) + 1, sorted.size()); ++k) sum += sorted[k];
    return sum;
  }
};

CoreSizes core_sizes(const ModelFile& file) {
  CoreSizes c;
  for (const auto& [name, ref] : file.tensors()) {
    const int layer = core_layer(name);
    if (layer < 0) {
      if (name.find("_exps.") == std::string::npos) c.other += ref.info->bytes;
      continue;
    }
    if (size_t(layer) >= c.layer.size()) {
      c.layer.resize(size_t(layer) + 1, 0);
      c.bound.resize(size_t(layer) + 1, 0);
    }
    c.layer[size_t(layer)] += ref.info->bytes;
    c.bound[size_t(layer)] += aligned_span(ref);
  }
  return c;
}

}  // namespace

uint64_t CorePager::least_bytes(const ModelFile& file, int window) {
  const CoreSizes c = core_sizes(file);
  return c.other + c.window(0, std::max(window, 1));
}

Result<std::unique_ptr<CorePager>> CorePager::plan(ModelFile& file, uint64_t resident_budget,
                                                   const std::vector<std::string>& local_files, int window,
                                                   int io_threads) {
  std::unique_ptr<CorePager> p(new CorePager());
  p->file_ = &file;
  p->window_ = std::max(window, 1);
  const CoreSizes c = core_sizes(file);
  const int n = int(c.layer.size());
  if (c.other + c.window(0, p->window_) > resident_budget)
    return make_error("{}: the memory budget leaves {:.1f} MiB for the core, too little even to stream its layers: "
                      "the tensors outside the layers take {:.1f} MiB and the buffers of {} streamed layers {:.1f} MiB",
                      file.path(), resident_budget / kMiB, c.other / kMiB, p->window_ + 1,
                      c.window(0, p->window_) / kMiB);
  // The first `first` layers resident, the buffers sized for the others only (a
  // large first layer, such as a dense one, kept resident no longer sizes them);
  // the total grows with `first`, so the largest that fits.
  int first = 0;
  uint64_t prefix = 0;
  while (first < n && c.other + prefix + c.layer[size_t(first)] + c.window(first + 1, p->window_) <= resident_budget)
    prefix += c.layer[size_t(first++)];
  p->first_streamed_ = first;
  p->layers_.resize(size_t(n));
  p->next_.assign(size_t(n), -1);
  for (int s = 0; s < file.shard_count(); ++s) {
    // A remote part's core is a local file with the part's offsets (its disk cache).
    const std::string& local = size_t(s) < local_files.size() && !local_files[size_t(s)].empty()
                                   ? local_files[size_t(s)] : file.source(s).name();
    auto f = DirectFile::open(local);
    p->files_.push_back(f.ok() ? std::move(f).value() : nullptr);  // else: through the source
  }
  CorePagerStats& st = p->stats_;
  st.layers = n;
  st.streamed_layers = n - first;
  st.resident_bytes = c.other;
  for (int l = 0; l < n; ++l) (l < first ? st.resident_bytes : st.streamed_bytes) += c.layer[size_t(l)];
  if (first == n) return p;
  p->buffers_.resize(size_t(std::min(p->window_ + 1, n - first)));
  for (int l = first; l < n; ++l) {
    Layer& L = p->layers_[size_t(l)];
    L.buffer = (l - first) % int(p->buffers_.size());
    DF_TRY(p->place(l));
    Buffer& b = p->buffers_[size_t(L.buffer)];
    b.size = std::max(b.size, size_t(L.bytes));
  }
  for (Buffer& b : p->buffers_) {
    b.size = std::max(b.size, size_t(kDirectAlign));
    st.window_bytes += b.size;
  }
  // A layer alone in its buffer is read once and stays; the others take turns.
  for (int l = first; l < n; ++l) {
    const int b = p->layers_[size_t(l)].buffer;
    int sharing = 0;
    for (int k = first; k < n; ++k) sharing += p->layers_[size_t(k)].buffer == b;
    if (sharing > 1) st.reread_bytes += c.layer[size_t(l)];
  }
  p->io_threads_ = std::max(1, io_threads);
  return p;
}

Status CorePager::start() {
  if (io_ || buffers_.empty()) return {};
  for (Buffer& b : buffers_) {
    b.base = static_cast<char*>(platform::map_memory(b.size));
    if (!b.base) return make_error("cannot allocate {:.1f} MiB for a core layer buffer", b.size / kMiB);
    platform::populate_memory(b.base, b.size);  // committed once, not at every layer's read
  }
  io_ = std::make_unique<IoPool>(io_threads_);
  return {};
}

CorePager::~CorePager() {
  io_.reset();  // running reads finish; queued ones are dropped
  for (Buffer& b : buffers_)
    if (b.base) platform::unmap_memory(b.base, b.size);
}

Status CorePager::place(int layer) {
  std::vector<const TensorRef*> ts;
  for (const auto& [name, ref] : file_->tensors())
    if (core_layer(name) == layer) ts.push_back(&ref);
  std::sort(ts.begin(), ts.end(), [](const TensorRef* a, const TensorRef* b) {
    return a->shard != b->shard ? a->shard < b->shard : a->file_offset < b->file_offset;
  });
  Layer& L = layers_[size_t(layer)];
  uint64_t pos = 0;
  for (const TensorRef* t : ts) {
    if (files_[size_t(t->shard)]) {
      // A local file: aligned ranges, one request for tensors whose ranges touch.
      const uint64_t lo = align_down(t->file_offset, kDirectAlign);
      const uint64_t hi = align_up(t->file_offset + t->info->bytes, kDirectAlign);
      if (!L.extents.empty()) {
        Extent& e = L.extents.back();
        if (e.shard == t->shard && files_[size_t(e.shard)] && lo <= e.file_off + e.len) {
          const uint64_t end = std::max(e.file_off + e.len, hi);
          pos += end - (e.file_off + e.len);
          e.len = end - e.file_off;
          continue;
        }
      }
      L.extents.push_back({t->shard, lo, hi - lo, pos});
      pos += hi - lo;
    } else {
      pos = align_up(pos, kDirectAlign);
      L.extents.push_back({t->shard, t->file_offset, t->info->bytes, pos});
      pos += t->info->bytes;
    }
  }
  L.bytes = align_up(pos, kDirectAlign);
  return {};
}

const CorePager::Extent* CorePager::extent_of(int layer, const TensorRef& t) const {
  for (const Extent& e : layers_[size_t(layer)].extents)
    if (e.shard == t.shard && t.file_offset >= e.file_off && t.file_offset + t.info->bytes <= e.file_off + e.len)
      return &e;
  return nullptr;
}

Result<const void*> CorePager::map(const std::string& name, const TensorRef& t) {
  const int layer = core_layer(name);
  if (layer < first_streamed_ || size_t(layer) >= layers_.size()) return static_cast<const void*>(nullptr);
  DF_TRY(start());
  const Extent* e = extent_of(layer, t);
  if (!e) return make_error("{}: tensor '{}' is not in its layer's plan", file_->path(), name);
  char* p = buffers_[size_t(layers_[size_t(layer)].buffer)].base + e->buf_off + (t.file_offset - e->file_off);
  // Read now what the model may copy out while it loads (to_f32 of a norm); the
  // layer's first run reads everything again.
  if (t.info->bytes < kReadAtLoad) DF_TRY(file_->read_tensor(t, p));
  return static_cast<const void*>(p);
}

Status CorePager::read_extent(const Extent& e, char* dst) {
  if (DirectFile* f = files_[size_t(e.shard)].get()) return f->read_aligned(e.file_off, dst, e.len);
  return file_->source(e.shard).read_at(e.file_off, dst, e.len);
}

void CorePager::start_read(int layer) {
  const Layer& L = layers_[size_t(layer)];
  Buffer& b = buffers_[size_t(L.buffer)];
  b.holder = layer;
  b.status = {};
  ++stats_.pages_in;
  for (const Extent& e : L.extents) {
    for (uint64_t k = 0; k < e.len; k += kChunk) {
      // A piece of the extent: aligned pieces of an aligned one.
      Extent piece{e.shard, e.file_off + k, std::min(kChunk, e.len - k), e.buf_off + k};
      ++b.pending;
      stats_.bytes_read += piece.len;
      io_->submit(IoPriority::Demand, [this, &b, piece] {
        Status s = read_extent(piece, b.base + piece.buf_off);
        std::lock_guard<std::mutex> lk(mu_);
        if (!s.ok() && b.status.ok()) b.status = s;
        --b.pending;
        cv_.notify_all();
      });
    }
  }
}

Status CorePager::wait_for(int layer, std::unique_lock<std::mutex>& lk) {
  Buffer& b = buffers_[size_t(layers_[size_t(layer)].buffer)];
  const auto t0 = std::chrono::steady_clock::now();
  if (b.holder != layer) {
    cv_.wait(lk, [&] { return b.pending == 0; });  // another layer's read, not wanted now
    start_read(layer);
  }
  cv_.wait(lk, [&] { return b.pending == 0; });
  stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (b.status.ok()) return {};
  b.holder = -1;  // read again when next wanted
  return make_error("core layer {}: {}", layer, b.status.error().message);
}

void CorePager::read_ahead(int from) {
  const int n = int(layers_.size());
  std::vector<int> taken;  // buffers of the layers running or wanted before
  if (current_ >= 0 && layers_[size_t(current_)].buffer >= 0) taken.push_back(layers_[size_t(current_)].buffer);
  int l = from, found = 0;
  for (int step = 0; step < n && found < window_; ++step) {
    l = next_[size_t(l)] >= 0 ? next_[size_t(l)] : (l + 1 < n ? l + 1 : 0);
    if (l == from) break;
    const int b = layers_[size_t(l)].buffer;
    if (b < 0) continue;
    // A buffer still wanted by a layer before this one: stop (it comes later).
    if (std::find(taken.begin(), taken.end(), b) != taken.end()) break;
    taken.push_back(b);
    ++found;
    Buffer& buf = buffers_[size_t(b)];
    if (buf.holder == l && (buf.pending > 0 || buf.status.ok())) continue;
    if (buf.pending > 0) break;  // a read nobody waits for: let it finish first
    start_read(l);
  }
}

Status CorePager::enter(int layer) {
  if (layer < 0 || size_t(layer) >= layers_.size() || first_streamed_ >= int(layers_.size())) return {};
  std::unique_lock<std::mutex> lk(mu_);
  if (current_ >= 0 && current_ != layer) next_[size_t(current_)] = layer;
  current_ = layer;
  const int b = layers_[size_t(layer)].buffer;
  if (b < 0) {
    read_ahead(layer);
    return {};
  }
  Buffer& buf = buffers_[size_t(b)];
  if (buf.holder != layer && buf.pending == 0) start_read(layer);  // first in the queue
  read_ahead(layer);
  return wait_for(layer, lk);
}

Status CorePager::peek(int layer) {
  if (layer < 0 || size_t(layer) >= layers_.size() || layers_[size_t(layer)].buffer < 0) return {};
  std::unique_lock<std::mutex> lk(mu_);
  if (current_ >= 0 && current_ != layer && layers_[size_t(current_)].buffer == layers_[size_t(layer)].buffer)
    return make_error("core layer {} shares its buffer with layer {}, which is running", layer, current_);
  return wait_for(layer, lk);
}

CorePagerStats CorePager::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

std::string CorePager::describe() const {
  const CorePagerStats s = stats();
  if (s.streamed_layers == 0) return "core: resident";
  return fmt::format("core: {:.1f} MiB resident; layers {}-{} of {} ({:.1f} MiB) stream from the file per layer "
                     "through {} layer buffers ({:.1f} MiB)",
                     s.resident_bytes / kMiB, s.layers - s.streamed_layers, s.layers - 1, s.layers,
                     s.streamed_bytes / kMiB, buffers_.size(), s.window_bytes / kMiB);
}

}  // namespace deltafin
