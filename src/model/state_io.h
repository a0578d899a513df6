// Sequence states as bytes (the prompt cache's disk tier): plain values and vectors
// appended to a string in this machine's byte order, and read back with every
// length checked, so that a truncated or foreign blob is an error, never a crash.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace deltafin {

class StateWriter {
 public:
  explicit StateWriter(std::string* out) : out_(out) {}
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_->append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  // n values (a length, then the values).
  template <class T>
  void span(const T* p, size_t n) {
    pod(uint64_t(n));
    out_->append(reinterpret_cast<const char*>(p), n * sizeof(T));
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    span(v.data(), v.size());
  }

 private:
  std::string* out_;
};

class StateReader {
 public:
  explicit StateReader(std::string_view in) : in_(in) {}
  template <class T>
  bool pod(T* v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  // Exactly n values into p.
  template <class T>
  bool span(T* p, size_t n) {
    uint64_t len = 0;
    if (!pod(&len) || len != n || (in_.size() - at_) / sizeof(T) < n) return false;
    std::memcpy(p, in_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return true;
  }
  // A vector of the length written (at most `most` values).
  template <class T>
  bool vec(std::vector<T>* v, size_t most) {
    uint64_t len = 0;
    if (!pod(&len) || len > most || (in_.size() - at_) / sizeof(T) < len) return false;
    v->resize(size_t(len));
    std::memcpy(v->data(), in_.data() + at_, size_t(len) * sizeof(T));
    at_ += size_t(len) * sizeof(T);
    return true;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

}  // namespace deltafin
