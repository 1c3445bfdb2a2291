// Every shape-error path: a mismatch is an error value whose message names the op, the
// operands and their shapes. The graph keeps the first error; later ops are no-ops.
#include <doctest/doctest.h>

#include <functional>

#include "graph/autodiff.hpp"
#include "graph/dsl.hpp"
#include "graph/layers.hpp"

using namespace cohort;

namespace {

// Builds with `f` on a fresh graph and returns the recorded error message ("" if none).
std::string error_of(const std::function<void(graph&)>& f) {
  graph g;
  f(g);
  auto st = g.check();
  return st.ok() ? std::string() : st.error().message;
}

var f32(graph& g, const char* name, shape s) { return g.input(name, std::move(s)); }
var i32(graph& g, const char* name, shape s) { return g.input(name, std::move(s), dtype::i32); }

// Calls infer_shapes directly (for the gradient ops, which models never build by hand).
std::string infer_error(op_kind k, op_attrs attrs, std::vector<value_type> in) {
  auto r = infer_shapes(k, attrs, in);
  return r.ok() ? std::string() : r.error().message;
}

}  // namespace

TEST_CASE("matmul shape errors") {
  CHECK(error_of([](graph& g) {
          matmul(f32(g, "a", {2, 3}), f32(g, "b", {4, 5}));
        }) == "matmul: inner extents differ: a [2,3] (K=3) @ b [4,5] (K=4)");
  CHECK(error_of([](graph& g) {
          matmul(f32(g, "a", {3}), f32(g, "b", {3, 5}));
        }) == "matmul: operands need rank >= 2 (operands: [3], [3,5])");
  CHECK(error_of([](graph& g) {
          matmul(f32(g, "a", {2, 4, 3}), f32(g, "b", {5, 3, 6}));
        }) == "matmul: batch extents must be equal, or b must have rank 2 (operands: [2,4,3], [5,3,6])");
  CHECK(error_of([](graph& g) {
          matmul(f32(g, "a", {2, 3}), f32(g, "b", {2, 3}), false, false);
        }) == "matmul: inner extents differ: a [2,3] (K=3) @ b [2,3] (K=2)");
  CHECK(error_of([](graph& g) { matmul(f32(g, "a", {2, 3}), f32(g, "b", {5, 3}), false, true); }).empty());
}

TEST_CASE("elementwise broadcasting and dtype errors") {
  CHECK(error_of([](graph& g) {
          f32(g, "a", {2, 3}) + f32(g, "b", {4, 3});
        }) == "add: shapes do not broadcast (operands: [2,3], [4,3])");
  CHECK(error_of([](graph& g) {
          f32(g, "a", {2, 3}) * f32(g, "b", {2});
        }) == "mul: shapes do not broadcast (operands: [2,3], [2])");
  CHECK(error_of([](graph& g) { f32(g, "a", {3}) - i32(g, "b", {3}); }) ==
        "sub: operand 1 must be f32, got i32 (operands: [3], [3] i32)");
  CHECK(error_of([](graph& g) { relu(i32(g, "a", {3})); }) ==
        "relu: operand 0 must be f32, got i32 (operands: [3] i32)");
  CHECK(error_of([](graph& g) { f32(g, "a", {2, 3}) / f32(g, "b", {3}); }).empty());
}

TEST_CASE("bias, softmax, losses and layernorm errors") {
  CHECK(error_of([](graph& g) {
          bias_add(f32(g, "x", {2, 3}), f32(g, "b", {2}));
        }) == "bias_add: bias must be [N] where x is [*,N] (operands: [2,3], [2])");
  CHECK(error_of([](graph& g) { softmax(f32(g, "x", {})); }) == "softmax: needs rank >= 1 (operands: [])");
  CHECK(error_of([](graph& g) {
          softmax_cross_entropy(f32(g, "x", {4, 10}), i32(g, "y", {5}));
        }) ==
        "softmax_cross_entropy: labels must have the logits' shape without the class axis (operands: [4,10], [5] i32)");
  CHECK(error_of([](graph& g) {
          softmax_cross_entropy(f32(g, "x", {4, 10}), f32(g, "y", {4}));
        }) == "softmax_cross_entropy: operand 1 must be i32, got f32 (operands: [4,10], [4])");
  CHECK(error_of([](graph& g) {
          mse(f32(g, "p", {4, 2}), f32(g, "t", {4}));
        }) == "mse: shapes must be equal (operands: [4,2], [4])");
  CHECK(error_of([](graph& g) {
          layernorm(f32(g, "x", {2, 8}), f32(g, "g", {4}), f32(g, "b", {8}));
        }) == "layernorm: gamma and beta must be [C] where x is [*,C] (operands: [2,8], [4], [8])");
  CHECK(error_of([](graph& g) { embedding(f32(g, "t", {10}), i32(g, "ids", {3})); }) ==
        "embedding: table must be [V,D] (operands: [10], [3] i32)");
}

TEST_CASE("layout op errors: reshape, permute, transpose, slice, concat") {
  CHECK(error_of([](graph& g) {
          reshape(f32(g, "x", {2, 3}), {4, 2});
        }) == "reshape: element count differs: 6 vs target [4,2] (8) (operands: [2,3])");
  CHECK(error_of([](graph& g) {
          reshape(f32(g, "x", {2, 3}), {-1, -1});
        }) == "reshape: more than one -1 extent (operands: [2,3])");
  CHECK(error_of([](graph& g) {
          reshape(f32(g, "x", {2, 3}), {-1, 4});
        }) == "reshape: cannot infer -1 in [-1,4] (operands: [2,3])");
  CHECK(error_of([](graph& g) {
          reshape(f32(g, "x", {2, 3}), {-2, 3});
        }) == "reshape: negative extent in [-2,3] (operands: [2,3])");
  CHECK(error_of([](graph& g) {
          permute(f32(g, "x", {2, 3}), {0});
        }) == "permute: permutation has 1 axes (operands: [2,3])");
  CHECK(error_of([](graph& g) { permute(f32(g, "x", {2, 3}), {1, 1}); }) == "permute: axis repeated (operands: [2,3])");
  CHECK(error_of([](graph& g) {
          transpose(f32(g, "x", {2, 3}), 0, 2);
        }) == "transpose: axis 2 out of range for rank 2");
  CHECK(error_of([](graph& g) {
          slice(f32(g, "x", {2, 3}), 1, 2, 5);
        }) == "slice: range [2,5) invalid for extent 3 of axis 1 (operands: [2,3])");
  CHECK(error_of([](graph& g) { slice(f32(g, "x", {2, 3}), 4, 0, 1); }) == "slice: axis 4 out of range for rank 2");
  CHECK(error_of([](graph& g) {
          concat({f32(g, "a", {2, 3}), f32(g, "b", {3, 3})}, 1);
        }) == "concat: extents differ on axis 0 (operands: [2,3], [3,3])");
  CHECK(error_of([](graph& g) {
          concat({f32(g, "a", {2, 3}), f32(g, "b", {2})}, 0);
        }) == "concat: ranks differ (operands: [2,3], [2])");
}

TEST_CASE("reduction, mask and broadcast errors") {
  CHECK(error_of([](graph& g) { sum(f32(g, "x", {2, 3}), {2}); }) == "sum: axis 2 out of range for rank 2");
  CHECK(error_of([](graph& g) { mean(f32(g, "x", {2, 3}), {1, -1}); }) == "mean: repeated axis");
  CHECK(error_of([](graph& g) {
          causal_mask(f32(g, "x", {2, 3}), 0.f);
        }) == "causal_mask: needs [*,T,T] (operands: [2,3])");
  CHECK(error_of([](graph& g) {
          sum_to(f32(g, "x", {2, 3}), {4});
        }) == "sum_to: target [4] does not broadcast to the operand (operands: [2,3])");
  CHECK(error_of([](graph& g) {
          broadcast_to(f32(g, "x", {2, 3}), {3, 3});
        }) == "broadcast_to: operand does not broadcast to [3,3] (operands: [2,3])");
}

TEST_CASE("gradient op errors") {
  using v = value_type;
  CHECK(infer_error(op_kind::relu_grad, no_attrs{}, {v{{2}}, v{{3}}}) ==
        "relu_grad: shapes must be equal (operands: [2], [3])");
  CHECK(infer_error(op_kind::softmax_cross_entropy_grad, no_attrs{}, {v{{2}}, v{{4, 3}}, v{{4}, dtype::i32}}) ==
        "softmax_cross_entropy_grad: expects (dloss [], logits [*,C], labels [*]) (operands: [2], [4,3], [4] i32)");
  CHECK(infer_error(op_kind::mse_grad, no_attrs{}, {v{{}}, v{{4}}, v{{5}}}) ==
        "mse_grad: expects (dloss [], pred, target) with equal shapes (operands: [], [4], [5])");
  CHECK(infer_error(op_kind::layernorm_grad, no_attrs{}, {v{{2, 4}}, v{{2, 4}}, v{{3}}}) ==
        "layernorm_grad: expects (dy [*,C], x [*,C], gamma [C]) (operands: [2,4], [2,4], [3])");
  CHECK(infer_error(op_kind::embedding_grad, shape_attrs{{10, 4}}, {v{{3, 5}}, v{{3}, dtype::i32}}) ==
        "embedding_grad: expects (dy [*,D], ids [*]) for table [10,4] (operands: [3,5], [3] i32)");
  CHECK(infer_error(op_kind::slice_grad, slice_attrs{0, 1, 3, 5}, {v{{3}}}) ==
        "slice_grad: gradient extent does not match the slice (operands: [3])");
  CHECK(infer_error(op_kind::add, no_attrs{}, {v{{3}}}) == "add: expected 2 operands, got 1");
}

TEST_CASE("graph-level errors: names, extents, attention, foreign operands, autodiff") {
  CHECK(error_of([](graph& g) {
          g.parameter("w", {2}, init_spec::zeros());
          g.parameter("w", {2}, init_spec::zeros());
        }) == "parameter: name 'w' is already used");
  CHECK(error_of([](graph& g) { g.input("x", {2, -1}); }) == "input 'x': negative extent in [2,-1]");
  CHECK(error_of([](graph& g) {
          g.parameter("w", {0, 3}, init_spec::zeros());
        }) == "parameter 'w': extents must be positive, got [0,3]");
  CHECK(error_of([](graph& g) {
          causal_self_attention(f32(g, "x", {2, 4, 6}), 4, "attn");
        }) == "causal_self_attention 'attn': x must be [B,T,D] with D divisible by heads=4, got [2,4,6]");
  CHECK(error_of([](graph& g) {
          graph other;
          var a = other.input("a", {2});
          add(f32(g, "b", {2}), a);
        }) == "add: operand from another graph");
  {
    graph g;
    var x = f32(g, "x", {2, 3});
    auto r = autodiff(g, scale(x, 2.f));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "autodiff: loss must be a scalar [], got [2,3]");
  }
}

TEST_CASE("the first error is kept and later ops on its result are no-ops") {
  graph g;
  var a = f32(g, "a", {2, 3});
  var bad = matmul(a, a);
  CHECK_FALSE(bad.valid());
  var worse = relu(bad + a);
  CHECK_FALSE(worse.valid());
  auto st = g.check();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == errc::shape_mismatch);
  CHECK(st.error().message == "matmul: inner extents differ: a [2,3] (K=3) @ b [2,3] (K=2)");
  CHECK(g.nodes().empty());
}

TEST_CASE("errors inside a scope name the scope") {
  graph g;
  var x = f32(g, "x", {2, 3});
  {
    auto _ = g.scope("block1");
    linear(x, 4, "fc");  // fine
    var w = g.parameter("w", {5, 4}, init_spec::zeros());
    matmul(x, w);
  }
  REQUIRE_FALSE(g.check().ok());
  CHECK(g.check().error().message == "in block1: matmul: inner extents differ: a [2,3] (K=3) @ b [5,4] (K=5)");
}
