#include "io/concat_source.h"

#include <algorithm>

namespace deltafin {

ConcatSource::ConcatSource(std::vector<std::unique_ptr<ByteSource>> parts, std::string name)
    : parts_(std::move(parts)), name_(std::move(name)) {
  for (const auto& p : parts_) {
    starts_.push_back(size_);
    size_ += p->size();
  }
  starts_.push_back(size_);
}

int ConcatSource::part_at(uint64_t offset) const {
  // The last fragment starting at or before offset (an empty fragment before it is
  // passed over: its start equals the next one's).
  auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, offset);
  return std::max(int(it - starts_.begin()) - 1, 0);
}

Status ConcatSource::read_at(uint64_t offset, void* dst, size_t n) {
  if (offset > size_ || n > size_ - offset)
    return make_error("{}: read of {} bytes at offset {} is past the end of the {} fragments ({} bytes together)",
                      name_, n, offset, parts_.size(), size_);
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const int k = part_at(offset);
    const uint64_t in = offset - starts_[size_t(k)];
    const size_t take = size_t(std::min<uint64_t>(n, parts_[size_t(k)]->size() - in));
    DF_TRY(parts_[size_t(k)]->read_at(in, out, take));
    out += take;
    offset += take;
    n -= take;
  }
  return {};
}

}  // namespace deltafin
