// Shape arithmetic: element counts, strides, broadcasting.
#include "graph/shape.hpp"

#include <algorithm>

namespace cohort {

std::int64_t shape::numel() const {
  std::int64_t n = 1;
  for (auto d : dims_) n *= d;
  return n;
}

std::vector<std::int64_t> shape::contiguous_strides() const {
  std::vector<std::int64_t> strides(dims_.size(), 1);
  for (int i = rank() - 2; i >= 0; --i)
    strides[static_cast<std::size_t>(i)] =
        strides[static_cast<std::size_t>(i) + 1] * dims_[static_cast<std::size_t>(i) + 1];
  return strides;
}

std::string shape::to_string() const {
  std::string out = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

result<shape> broadcast_shapes(const shape& a, const shape& b, const char* op) {
  int rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i;
    int ib = b.rank() - rank + i;
    std::int64_t da = ia >= 0 ? a[ia] : 1;
    std::int64_t db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return make_error(errc::shape_mismatch, std::string(op) + ": cannot broadcast " + a.to_string() + " with " +
                                                  b.to_string() + " (axis " + std::to_string(i - rank) + ": " +
                                                  std::to_string(da) + " vs " + std::to_string(db) + ")");
    dims[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  return shape(std::move(dims));
}

result<int> normalize_axis(int axis, int rank, const char* op) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return make_error(errc::invalid_argument, std::string(op) + ": axis " + std::to_string(axis) +
                                                  " out of range for rank " + std::to_string(rank));
  return a;
}

std::int64_t product(const shape& s, int begin, int end) {
  std::int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= s[i];
  return n;
}

}  // namespace cohort
