// Index arithmetic for broadcasting: the stride of each output axis in an operand whose
// shape broadcasts to the output (0 where the operand's extent is 1 or missing).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/shape.hpp"

namespace cohort::kernels::detail {

/// Strides (in elements) of `operand` seen through the axes of `out`.
inline std::vector<std::int64_t> broadcast_strides(const shape& operand, const shape& out) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(out.rank()), 0);
  auto own = operand.contiguous_strides();
  int shift = out.rank() - operand.rank();
  for (int i = 0; i < operand.rank(); ++i)
    if (operand[i] != 1) strides[static_cast<std::size_t>(i + shift)] = own[static_cast<std::size_t>(i)];
  return strides;
}

/// Offset into an operand with `strides` (from broadcast_strides) of output element `flat`.
inline std::int64_t broadcast_offset(const shape& out, const std::vector<std::int64_t>& strides, std::int64_t flat) {
  std::int64_t off = 0;
  for (int d = out.rank() - 1; d >= 0; --d) {
    off += (flat % out[d]) * strides[static_cast<std::size_t>(d)];
    flat /= out[d];
  }
  return off;
}

/// Rows and columns of a [*, C] tensor viewed as a matrix over its last axis.
struct rows_cols {
  std::int64_t rows, cols;
};
inline rows_cols as_rows(const shape& s) {
  std::int64_t cols = s.rank() == 0 ? 1 : s.at(-1);
  return {cols == 0 ? 0 : s.numel() / cols, cols};
}

}  // namespace cohort::kernels::detail
