// Autodiff structure: accumulation over repeated uses, unused parameters, the seed input.
// (Numerical correctness of every rule is in test/kernels/finite_difference_test.cpp.)
#include <doctest/doctest.h>

#include "graph/autodiff.hpp"
#include "graph/dsl.hpp"
#include "graph/layers.hpp"

using namespace cohort;

TEST_CASE("a loss gets a seed input and a gradient for each parameter it depends on") {
  graph g;
  var x = g.input("x", {4, 3});
  var y = g.input("y", {4}, dtype::i32);
  var used = g.parameter("used", {3, 5}, init_spec::zeros());
  g.parameter("unused", {7}, init_spec::zeros());
  var loss = softmax_cross_entropy(matmul(x, used), y);
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  CHECK(g.value(gr->seed).name == "loss.grad");
  CHECK(g.value(gr->seed).type.shape == shape{});
  REQUIRE(gr->param_grads.size() == 1);
  CHECK(gr->param_grads[0].first == used.id);
  CHECK(g.value(gr->param_grads[0].second).type.shape == shape{3, 5});
  CHECK(gr->backward_begin == 2);
}

TEST_CASE("a parameter used twice gets the sum of both contributions") {
  graph g;
  var w = g.parameter("w", {3}, init_spec::ones());
  var loss = sum(w * w);
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  // mul backward yields dy*w twice: they are added
  int adds = 0;
  for (std::size_t i = gr->backward_begin; i < g.nodes().size(); ++i) adds += g.nodes()[i].kind == op_kind::add ? 1 : 0;
  CHECK(adds == 1);
}

TEST_CASE("a transformer block differentiates every parameter") {
  graph g;
  var ids = g.input("ids", {2, 8}, dtype::i32);
  var y = g.input("y", {2, 8}, dtype::i32);
  var h = embed(ids, 32, 16, "tok");
  h = h + causal_self_attention(layer_norm(h, "ln1"), 4, "attn");
  h = h + linear(gelu(linear(layer_norm(h, "ln2"), 64, "fc1")), 16, "fc2");
  var loss = softmax_cross_entropy(linear(h, 32, "head", false), y);
  auto gr = autodiff(g, loss);
  REQUIRE_MESSAGE(gr.ok(), gr.error().message);
  CHECK(gr->param_grads.size() == g.parameters().size());
  for (auto [p, d] : gr->param_grads) CHECK(g.value(p).type.shape == g.value(d).type.shape);
}
