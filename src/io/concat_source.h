// A ByteSource over byte fragments read as one: a GGUF published cut into parts that
// are meant to be concatenated (model.gguf.part1of3, ...), read where they lie, never
// joined on disk. Fragment k holds bytes [start(k), start(k) + size(k)) of the whole;
// a read that crosses a boundary reads from each fragment in turn. Thread-safe as its
// fragments are.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/byte_source.h"

namespace deltafin {

class ConcatSource final : public ByteSource {
 public:
  // `name`: what messages call the whole (fragments' own names say which part).
  ConcatSource(std::vector<std::unique_ptr<ByteSource>> parts, std::string name);

  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Status read_at(uint64_t offset, void* dst, size_t n) override;

  int count() const { return int(parts_.size()); }
  ByteSource& part(int k) { return *parts_[size_t(k)]; }
  uint64_t start(int k) const { return starts_[size_t(k)]; }
  // The fragment holding byte `offset` (< size()).
  int part_at(uint64_t offset) const;

 private:
  std::vector<std::unique_ptr<ByteSource>> parts_;
  std::vector<uint64_t> starts_;  // count() + 1 entries, the last one size()
  std::string name_;
  uint64_t size_ = 0;
};

}  // namespace deltafin
