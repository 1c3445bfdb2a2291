// Small models for the planner tests, written with the DSL directly (the planner does not
// depend on the apps): an MLP with Megatron pairs, and one wide linear layer without
// tensor-parallel annotations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/dsl.hpp"
#include "graph/layers.hpp"

namespace cohort::test {

inline var toy_mlp(graph& g, const std::vector<std::int64_t>& dims, std::int64_t rows) {
  var h = g.input("x", {rows, dims.front()});
  var y = g.input("y", {rows}, dtype::i32);
  const std::size_t layers = dims.size() - 1;
  for (std::size_t i = 1; i <= layers; ++i) {
    bool paired = (i % 2 == 1) ? i < layers : true;
    tp_style style = !paired ? tp_style::none : (i % 2 == 1 ? tp_style::column : tp_style::row);
    h = linear(h, dims[i], "fc" + std::to_string(i), true, style);
    if (i < layers) h = relu(h);
  }
  return softmax_cross_entropy(h, y);
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
