// Shape and dtype rules of every op: given the operands' types, the results' types or an
// error value whose message names the op, the operands and their shapes.
//
//   std::vector<value_type> in{{shape{2, 3}, dtype::f32}, {shape{4, 5}, dtype::f32}};
//   op_attrs attrs = matmul_attrs{};
//   auto r = infer_shapes(op_kind::matmul, attrs, in);
//   assert(!r);   // r.error().message == "matmul: inner extents differ: a [2,3] (K=3) @ b [4,5] (K=4)"
#pragma once

#include <span>
#include <vector>

#include "graph/dtype.hpp"
#include "graph/error.hpp"
#include "graph/op.hpp"
#include "graph/shape.hpp"

namespace cohort {

struct value_type {
  cohort::shape shape;
  dtype type = dtype::f32;
  friend bool operator==(const value_type&, const value_type&) = default;
};

/// Result types of `kind` applied to `inputs`. Canonicalizes `attrs` in place (negative
/// axes become positive, a -1 extent in reshape is resolved, reduce axes are sorted).
result<std::vector<value_type>> infer_shapes(op_kind kind, op_attrs& attrs, std::span<const value_type> inputs);

}  // namespace cohort
