// The DSL functions: each one is a node appended through graph::apply.
#include "graph/dsl.hpp"

namespace cohort {
namespace {

var invalid() { return var{}; }

// Appends `kind` to the graph of the operands (any operand may be an empty var).
var build(op_kind kind, op_attrs attrs, std::vector<var> operands) {
  graph* g = nullptr;
  for (const auto& v : operands)
    if (g == nullptr) g = v.g;
  if (g == nullptr) return invalid();
  return g->apply1(kind, std::move(attrs), operands);
}

}  // namespace

var matmul(var a, var b, bool trans_a, bool trans_b) {
  return build(op_kind::matmul, matmul_attrs{trans_a, trans_b}, {a, b});
}
var add(var a, var b) { return build(op_kind::add, no_attrs{}, {a, b}); }
var sub(var a, var b) { return build(op_kind::sub, no_attrs{}, {a, b}); }
var mul(var a, var b) { return build(op_kind::mul, no_attrs{}, {a, b}); }
var div(var a, var b) { return build(op_kind::div, no_attrs{}, {a, b}); }
var bias_add(var x, var bias) { return build(op_kind::bias_add, no_attrs{}, {x, bias}); }
var scale(var x, float factor) { return build(op_kind::scale, scale_attrs{factor}, {x}); }
var relu(var x) { return build(op_kind::relu, no_attrs{}, {x}); }
var gelu(var x) { return build(op_kind::gelu, no_attrs{}, {x}); }
var tanh(var x) { return build(op_kind::tanh, no_attrs{}, {x}); }
var softmax(var x) { return build(op_kind::softmax, no_attrs{}, {x}); }
var log_softmax(var x) { return build(op_kind::log_softmax, no_attrs{}, {x}); }
var softmax_cross_entropy(var logits, var labels) {
  return build(op_kind::softmax_cross_entropy, no_attrs{}, {logits, labels});
}
var mse(var pred, var target) { return build(op_kind::mse, no_attrs{}, {pred, target}); }
var layernorm(var x, var gamma, var beta, float eps) {
  return build(op_kind::layernorm, layernorm_attrs{eps}, {x, gamma, beta});
}
var embedding(var table, var ids) { return build(op_kind::embedding, no_attrs{}, {table, ids}); }
var reshape(var x, shape to) { return build(op_kind::reshape, shape_attrs{std::move(to)}, {x}); }
var transpose(var x, int axis0, int axis1) {
  if (!x.valid()) return invalid();
  graph* g = x.g;
  int rank = x.shape().rank();
  auto a0 = normalize_axis(axis0, rank, "transpose");
  auto a1 = normalize_axis(axis1, rank, "transpose");
  if (!a0 || !a1) {
    g->fail(!a0 ? a0.error() : a1.error());
    return invalid();
  }
  std::vector<int> perm(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) perm[static_cast<std::size_t>(i)] = i;
  std::swap(perm[static_cast<std::size_t>(*a0)], perm[static_cast<std::size_t>(*a1)]);
  return g->apply1(op_kind::permute, permute_attrs{std::move(perm)}, {x});
}
var permute(var x, std::vector<int> perm) { return build(op_kind::permute, permute_attrs{std::move(perm)}, {x}); }
var slice(var x, int axis, std::int64_t start, std::int64_t end) {
  return build(op_kind::slice, slice_attrs{axis, start, end, 0}, {x});
}
var concat(const std::vector<var>& xs, int axis) { return build(op_kind::concat, concat_attrs{axis}, xs); }
var sum(var x, std::vector<int> axes, bool keepdim) {
  return build(op_kind::sum, reduce_attrs{std::move(axes), keepdim}, {x});
}
var mean(var x, std::vector<int> axes, bool keepdim) {
  return build(op_kind::mean, reduce_attrs{std::move(axes), keepdim}, {x});
}
var causal_mask(var x, float fill) { return build(op_kind::causal_mask, causal_mask_attrs{fill}, {x}); }
var embedding_bag(var table, var ids, bool mean) {
  return build(op_kind::embedding_bag, bag_attrs{mean, {}}, {table, ids});
}
var pairwise_dot(var x) { return build(op_kind::pairwise_dot, no_attrs{}, {x}); }
var bce_with_logits(var logits, var labels) { return build(op_kind::bce_with_logits, no_attrs{}, {logits, labels}); }
var attention(var q, var k, var v, float scale, bool causal) {
  return build(op_kind::attention, attention_attrs{scale, causal}, {q, k, v});
}
var sum_to(var x, shape to) { return build(op_kind::sum_to, shape_attrs{std::move(to)}, {x}); }
void annotate(var x, const std::string& axis, placement p) {
  if (x.valid()) x.g->annotate(x, axis, p);
}

var broadcast_to(var x, shape to) { return build(op_kind::broadcast_to, shape_attrs{std::move(to)}, {x}); }

}  // namespace cohort
