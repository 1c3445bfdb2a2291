// The model DSL: free functions over `var` that append nodes to the var's graph. They read
// like the math; shape errors are recorded in the graph (see graph.hpp), never thrown.
//
//   graph g;
//   var x = g.input("x", {8, 16});                                      // [B,D]
//   var w = g.parameter("w", {16, 64}, init_spec::normal(0.02f));      // [D,4D]
//   var b = g.parameter("b", {64}, init_spec::zeros());                // [4D], broadcast over rows
//   var h = gelu(matmul(x, w) + b);
//   var q = g.input("q", {2, 4, 8}), k = g.input("k", {2, 4, 8});      // [B,T,Dh]
//   var p = softmax(causal_mask(scale(matmul(q, k, false, true), 0.125f), -INFINITY));   // [B,T,T]
//   var l = mean(h * h);                                                // [], a loss
#pragma once

#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace cohort {

var matmul(var a, var b, bool trans_a = false, bool trans_b = false);
var add(var a, var b);
var sub(var a, var b);
var mul(var a, var b);
var div(var a, var b);
inline var operator+(var a, var b) { return add(a, b); }
inline var operator-(var a, var b) { return sub(a, b); }
inline var operator*(var a, var b) { return mul(a, b); }
inline var operator/(var a, var b) { return div(a, b); }
var bias_add(var x, var bias);
var scale(var x, float factor);
inline var operator*(var x, float factor) { return scale(x, factor); }
inline var operator*(float factor, var x) { return scale(x, factor); }

var relu(var x);
var gelu(var x);
var tanh(var x);
var softmax(var x);
var log_softmax(var x);
/// Mean over rows of -log softmax(logits)[label]; logits [*,C], labels i32 [*].
var softmax_cross_entropy(var logits, var labels);
/// Mean of (pred - target)^2 over all elements.
var mse(var pred, var target);
var layernorm(var x, var gamma, var beta, float eps = 1e-5f);
var embedding(var table, var ids);
/// Pooled lookup: for ids [*,L] (i32; bag_padding = -1 fills short bags), the sum (or mean)
/// of each bag's rows of table [V,D] -> [*,D]. torch.nn.EmbeddingBag's (ids, offsets) bags are
/// these rows padded to the longest bag (apps/data/bags.hpp: padded_bags).
var embedding_bag(var table, var ids, bool mean = false);
/// DLRM's dot interaction: x [*,F,D] -> [*,F(F-1)/2], <x_i, x_j> for i > j in row order.
var pairwise_dot(var x);
/// Mean binary cross-entropy of sigmoid(logits) against labels in [0,1] (same shape, f32),
/// computed stably from the logits (torch's binary_cross_entropy_with_logits).
var bce_with_logits(var logits, var labels);

var reshape(var x, shape to);  // one extent may be -1
var transpose(var x, int axis0, int axis1);
var permute(var x, std::vector<int> perm);
var slice(var x, int axis, std::int64_t start, std::int64_t end);
var concat(const std::vector<var>& xs, int axis);
var sum(var x, std::vector<int> axes = {}, bool keepdim = false);
var mean(var x, std::vector<int> axes = {}, bool keepdim = false);
/// Sets element (i, j) of each trailing [T,T] matrix to `fill` where j > i.
var causal_mask(var x, float fill);
/// Fused scaled dot-product attention: softmax(q k^T * scale, causal-masked when `causal`) v,
/// for q [*,T,D], k and v [*,S,D]; the scores are not kept (the backward pass recomputes them).
var attention(var q, var k, var v, float scale, bool causal);
var sum_to(var x, shape to);

/// Asks for placement `p` of `x` on mesh axis `axis` (e.g. annotate(w, "tp", shard{1})).
/// Completion (graph/completion.hpp) derives the placements of everything else.
void annotate(var x, const std::string& axis, placement p);
var broadcast_to(var x, shape to);

}  // namespace cohort
