#include "model/core_pager.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/platform.h"

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

}  // namespace

namespace {

// Core bytes per layer and outside the layers; the largest window + 1 layers.
struct CoreSizes {
  std::vector<uint64_t> layer;
  uint64_t other = 0, window = 0;
};

CoreSizes core_sizes(const ModelFile& file, int window) {
  CoreSizes c;
  for (const auto& [name, ref] : file.tensors()) {
    const int layer = core_layer(name);
    if (layer < 0) {
      if (name.find("_exps.") == std::string::npos) c.other += ref.info->bytes;
      continue;
    }
    if (size_t(layer) >= c.layer.size()) c.layer.resize(size_t(layer) + 1, 0);
    c.layer[size_t(layer)] += ref.info->bytes;
  }
  std::vector<uint64_t> sorted = c.layer;
  std::sort(sorted.rbegin(), sorted.rend());
  for (size_t k = 0; k < std::min(size_t(window) + 1, sorted.size()); ++k) c.window += sorted[k];
  return c;
}

}  // namespace

uint64_t CorePager::least_bytes(const ModelFile& file, int window) {
  const CoreSizes c = core_sizes(file, std::max(window, 1));
  return c.other + c.window;
}

Result<std::unique_ptr<CorePager>> CorePager::plan(ModelFile& file, uint64_t resident_budget, int window) {
  std::unique_ptr<CorePager> p(new CorePager());
  p->file_ = &file;
  p->window_ = std::max(window, 1);
  CoreSizes c = core_sizes(file, p->window_);
  const uint64_t other = c.other, window_bytes = c.window;
  p->layer_bytes_ = std::move(c.layer);
  const int n = int(p->layer_bytes_.size());
  if (other + window_bytes > resident_budget)
    return make_error("{}: the memory budget leaves {:.1f} MiB for the core, too little even to stream its layers: "
                      "the tensors outside the layers take {:.1f} MiB and a window of {} streamed layers {:.1f} MiB",
                      file.path(), resident_budget / kMiB, other / kMiB, p->window_ + 1, window_bytes / kMiB);
  uint64_t left = resident_budget - other - window_bytes;
  int first = 0;
  while (first < n && p->layer_bytes_[size_t(first)] <= left) left -= p->layer_bytes_[size_t(first++)];
  p->first_streamed_ = first;
  p->ranges_.resize(size_t(n));
  p->in_.assign(size_t(n), 0);
  p->fds_.assign(size_t(file.shard_count()), -1);
  CorePagerStats& st = p->stats_;
  st.layers = n;
  st.streamed_layers = n - first;
  st.window_bytes = window_bytes;
  st.resident_bytes = other;
  for (int l = 0; l < n; ++l) (l < first ? st.resident_bytes : st.streamed_bytes) += p->layer_bytes_[size_t(l)];
  return p;
}

CorePager::~CorePager() {
  for (const Mapping& m : mappings_) ::munmap(m.base, m.len);
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

Result<const void*> CorePager::map(const std::string& name, const TensorRef& t) {
  const int layer = core_layer(name);
  if (layer < first_streamed_ || size_t(layer) >= ranges_.size()) return static_cast<const void*>(nullptr);
  int& fd = fds_[size_t(t.shard)];
  const std::string& path = file_->source(t.shard).name();
  if (fd < 0) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error("{}: cannot open to map core layer {}: {}", path, layer, std::strerror(errno));
  }
  const uint64_t page = platform::page_size();
  const uint64_t off = t.file_offset / page * page;
  const size_t len = size_t(t.file_offset + t.info->bytes - off);
  void* base = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, off_t(off));
  if (base == MAP_FAILED)
    return make_error("{}: cannot map tensor '{}' ({} bytes at offset {}): {}", path, name, t.info->bytes,
                      t.file_offset, std::strerror(errno));
  mappings_.push_back({base, len});
  ranges_[size_t(layer)].push_back({static_cast<const char*>(base), len, fd, off});
  return static_cast<const void*>(static_cast<const char*>(base) + (t.file_offset - off));
}

void CorePager::page_in(int layer) {
  if (in_[size_t(layer)]) return;
  for (const Range& r : ranges_[size_t(layer)]) platform::advise_willneed(r.addr, r.len);
  in_[size_t(layer)] = 1;
  ++stats_.pages_in;
}

void CorePager::page_out(int layer) {
  if (!in_[size_t(layer)]) return;
  for (const Range& r : ranges_[size_t(layer)]) {
    platform::advise_dontneed(r.addr, r.len);
    // Not ours to keep in the page cache either (the budget is honest).
    platform::drop_cached_pages(r.fd, r.file_offset, r.len);
  }
  in_[size_t(layer)] = 0;
}

void CorePager::on_moe_layer(int layer) {
  const int n = int(ranges_.size());
  if (layer < 0 || layer >= n || layer == last_layer_ || first_streamed_ >= n) return;
  // Every layer since the previous MoE block ran (dense layers included): their
  // pages were touched, whatever the hints did.
  for (int l = (last_layer_ + 1) % n;; l = (l + 1) % n) {
    in_[size_t(l)] = 1;
    if (l == layer) break;
  }
  last_layer_ = layer;
  // Keep layer (in use) and the next window_ layers (wrapping to the next token's
  // first layers); give back the other streamed layers.
  auto in_window = [&](int l) {
    const int ahead = (l - layer + n) % n;
    return ahead <= window_;
  };
  for (int l = first_streamed_; l < n; ++l)
    if (!in_window(l)) page_out(l);
  for (int k = 1; k <= window_; ++k) {
    const int l = (layer + k) % n;
    if (l >= first_streamed_) page_in(l);
  }
}

std::string CorePager::describe() const {
  const CorePagerStats& s = stats_;
  if (s.streamed_layers == 0) return "core: resident";
  return fmt::format("core: {:.1f} MiB resident; layers {}-{} of {} ({:.1f} MiB) stream from the file per layer "
                     "(at most {:.1f} MiB in memory at once)",
                     s.resident_bytes / kMiB, s.layers - s.streamed_layers, s.layers - 1, s.layers,
                     s.streamed_bytes / kMiB, s.window_bytes / kMiB);
}

}  // namespace deltafin
