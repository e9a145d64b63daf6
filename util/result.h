#pragma once
// A value or an error message. Errors are ordinary outcomes here (garbage in sysfs,
// a file a non-root user cannot read), so they travel as values, not exceptions.
#include <optional>
#include <string>
#include <utility>

namespace gpudiag {

template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  static Result failure(std::string error) {
    Result r;
    r.error_ = std::move(error);
    return r;
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const { return *value_; }
  T& value() { return *value_; }
  const T& operator*() const { return *value_; }
  const T* operator->() const { return &*value_; }
  const std::string& error() const { return error_; }

 private:
  Result() = default;
  std::optional<T> value_;
  std::string error_;
};

}  // namespace gpudiag
