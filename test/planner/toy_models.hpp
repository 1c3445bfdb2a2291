// Small models for the planner tests: the apps' MLP (Megatron pairs), one wide linear layer
// without tensor-parallel annotations, and a large embedding in front of a small MLP.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/models/gpt.hpp"
#include "apps/models/mlp.hpp"
#include "graph/dsl.hpp"
#include "graph/layers.hpp"

namespace cohort::test {

// The apps' MLP (Megatron pairs: fc1 column-parallel, fc2 row-parallel, ...).
inline var toy_mlp(graph& g, const std::vector<std::int64_t>& dims, std::int64_t rows) {
  return apps::build_mlp(g, dims, rows).loss;
}

inline var toy_wide_linear(graph& g, std::int64_t in, std::int64_t out, std::int64_t rows) {
  var x = g.input("x", {rows, in});
  var y = g.input("y", {rows}, dtype::i32);
  return softmax_cross_entropy(linear(x, out, "wide"), y);
}

/// A large embedding table in front of a small MLP: what a recommender or a language model's
/// input layer looks like to the planner.
inline var toy_embedding_model(graph& g, std::int64_t vocab, std::int64_t d, std::int64_t rows) {
  var ids = g.input("ids", {rows}, dtype::i32);
  var y = g.input("y", {rows}, dtype::i32);
  var h = embed(ids, vocab, d, "tok");
  h = relu(linear(h, d, "fc1"));
  return softmax_cross_entropy(linear(h, 10, "fc2"), y);
}

}  // namespace cohort::test
