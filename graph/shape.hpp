// Tensor shapes: a list of extents, outermost first (row-major), and the broadcasting rule
// of NumPy/PyTorch (align from the right; an extent of 1 stretches).
//
//   shape s{4, 1, 3};
//   assert(s.numel() == 12 && s.to_string() == "[4,1,3]" && s.at(-1) == 3);
//   result<shape> b = broadcast_shapes(s, shape{5, 3}, "add");   // [4,5,3]
//   assert(b && *b == (shape{4, 5, 3}));
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "graph/error.hpp"

namespace cohort {

class shape {
 public:
  shape() = default;
  shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return dims_[static_cast<std::size_t>(i)]; }
  /// Extent of axis i counted from the end when negative (-1 = last).
  std::int64_t at(int i) const { return (*this)[i < 0 ? i + rank() : i]; }
  std::int64_t numel() const;
  const std::vector<std::int64_t>& dims() const { return dims_; }
  /// Row-major strides, in elements.
  std::vector<std::int64_t> contiguous_strides() const;
  std::string to_string() const;

  friend bool operator==(const shape&, const shape&) = default;

 private:
  std::vector<std::int64_t> dims_;
};

/// The broadcast of a and b, or shape_mismatch naming `op` and both shapes.
result<shape> broadcast_shapes(const shape& a, const shape& b, const char* op);

/// Turns a possibly negative axis into [0, rank), or invalid_argument naming `op`.
result<int> normalize_axis(int axis, int rank, const char* op);

/// Product of extents in [begin, end).
std::int64_t product(const shape& s, int begin, int end);

}  // namespace cohort
