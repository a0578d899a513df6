// Result<T>: a value or an error message. Errors are values at the edges (parsing,
// disk, network); the message names the file, offset, field or URL at fault.
#pragma once
#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace deltafin {

struct Error {
  std::string message;
};

template <typename... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  void check() const {
    if (!ok()) throw std::logic_error("Result::value() on error: " + std::get<1>(v_).message);
  }
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : e_(std::move(e)) {}
  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *e_; }

 private:
  std::optional<Error> e_;
};

using Status = Result<void>;

// Propagate an error: TRY(x) returns x's error from the enclosing function.
#define DF_CONCAT_(a, b) a##b
#define DF_CONCAT(a, b) DF_CONCAT_(a, b)
#define DF_TRY(expr)                                  \
  do {                                                \
    auto&& df_try_r_ = (expr);                        \
    if (!df_try_r_.ok()) return df_try_r_.error();    \
  } while (0)
// DF_ASSIGN(auto x, expr): declares x from a Result's value or returns its error.
#define DF_ASSIGN(decl, expr)                                      \
  auto DF_CONCAT(df_r_, __LINE__) = (expr);                        \
  if (!DF_CONCAT(df_r_, __LINE__).ok()) return DF_CONCAT(df_r_, __LINE__).error(); \
  decl = std::move(DF_CONCAT(df_r_, __LINE__)).value()

}  // namespace deltafin
