// An owned, 64-byte aligned byte buffer (weights, activations). Aligned to 4096 when
// large so that O_DIRECT reads can target it; from 2 MiB up it is mapped memory
// (core/platform.h map_memory: huge pages where the system gives them).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

#include "core/platform.h"

namespace deltafin {

class AlignedBuffer {
 public:
  static constexpr size_t kMapFrom = size_t(2) << 20;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) : size_(n) {
    if (n == 0) return;
    if (n >= kMapFrom) {
      ptr_ = platform::map_memory(n);
    } else {
      size_t align = n >= 4096 ? 4096 : 64;
      size_t rounded = (n + align - 1) / align * align;
      ptr_ = std::aligned_alloc(align, rounded);
    }
    if (!ptr_) throw std::bad_alloc();
  }
  ~AlignedBuffer() { release(); }
  AlignedBuffer(AlignedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void release() {
    if (size_ >= kMapFrom) platform::unmap_memory(ptr_, size_);
    else std::free(ptr_);
  }
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deltafin
