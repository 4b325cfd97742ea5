// Result<T>: a value or an Error carrying errno and what was being done.
// Exceptions are not used for recoverable errors.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace cordon {

struct Error {
  std::string message;  // what failed, with context, for a person
  int err = 0;          // errno when a syscall failed, else 0

  std::string ToString() const {
    if (err == 0) return message;
    return message + ": " + std::strerror(err);
  }
  // Prepends context: Error{"open x"}.Wrap("load policy") -> "load policy: open x".
  Error Wrap(const std::string& context) const { return Error{context + ": " + message, err}; }
};

inline Error SysError(std::string message, int err = errno) { return Error{std::move(message), err}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace cordon

// Propagates an error: CORDON_TRY(expr) for Status-returning expressions.
#define CORDON_TRY(expr)                                  \
  do {                                                    \
    auto cordon_try_status_ = (expr);                     \
    if (!cordon_try_status_.ok()) return cordon_try_status_.error(); \
  } while (0)
