// The error vocabulary shared by the layers that do not include CAF (graph, kernels,
// planner, transport), and result<T>, the one way they return a value or an error.
//
//   shape a{4, 1, 3}, b{5, 3};
//   result<shape> r = broadcast_shapes(a, b, "add");
//   if (!r) return r.error();   // with b [5,2]: {errc::shape_mismatch, "add: cannot broadcast [4,1,3] with [5,2] ..."}
//   shape s = *r;               // [4,5,3]
//   status st = make_error(errc::not_found, "data/x.bin: no such file");   // a status or a result takes an error
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace cohort {

/// Why an operation failed. Every enumerator says when it occurs.
enum class errc {
  /// Operand shapes do not fit the operation (the message names op, operands, shapes).
  shape_mismatch = 1,
  /// Operand element types do not fit the operation.
  dtype_mismatch,
  /// A value outside its allowed range (negative size, bad axis, unknown name...).
  invalid_argument,
  /// A named thing (file, parameter, value) does not exist.
  not_found,
  /// Reading or writing a file failed, or its content is malformed.
  io_error,
  /// The operation is valid but this build or backend does not provide it.
  unsupported,
  /// A distributed wait ran past its deadline (the message names who waited for whom).
  timeout,
  /// The other side is gone: a closed channel, a dead peer, a stopped runtime.
  closed,
};

const char* to_string(errc code);

/// An error code plus a one-line message for a human.
struct error {
  errc code = errc::invalid_argument;
  std::string message;
};

/// A value of type T or an error. C++20 has no std::expected; this is the small subset used.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : state_(std::move(value)) {}
  result(cohort::error err) : state_(std::move(err)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const cohort::error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, cohort::error> state_;
};

/// Success or an error, for operations that return nothing.
class [[nodiscard]] status {
 public:
  status() = default;
  status(cohort::error err) : err_(std::move(err)), failed_(true) {}

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const cohort::error& error() const { return err_; }

 private:
  cohort::error err_;
  bool failed_ = false;
};

inline error make_error(errc code, std::string message) { return error{code, std::move(message)}; }

}  // namespace cohort
