// An owned, 64-byte aligned byte buffer (weights, activations). Aligned to 4096 when
// large so that O_DIRECT reads can target it.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

namespace deltafin {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) : size_(n) {
    if (n == 0) return;
    size_t align = n >= 4096 ? 4096 : 64;
    size_t rounded = (n + align - 1) / align * align;
    ptr_ = std::aligned_alloc(align, rounded);
    if (!ptr_) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(ptr_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deltafin
