// The executor: buffers are reused by liveness, reshape aliases, kept values survive,
// parameters are shared with the caller's store, node ranges run separately.
#include <doctest/doctest.h>

#include "graph/autodiff.hpp"
#include "graph/dsl.hpp"
#include "graph/layers.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/executor.hpp"
#include "support/tensor_checks.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("a chain of elementwise ops reuses buffers instead of allocating one per value") {
  graph g;
  var x = g.input("x", {1024});
  var h = x;
  for (int i = 0; i < 10; ++i) h = relu(scale(h, 1.5f));
  REQUIRE(g.check().ok());
  auto table = kernels::cpu_kernels();
  auto ex = kernels::executor::create(g, {}, {h.id}, {&table, nullptr});
  REQUIRE(ex.ok());
  // 20 activations of 4 KiB each; liveness needs only a few buffers at once.
  CHECK(ex->arena_bytes() <= 3 * 4096);
  ex->input(x.id).fill(1.f);
  REQUIRE(ex->run().ok());
  CHECK(ex->value(h.id).at(0) == doctest::Approx(std::pow(1.5, 10)));
}

TEST_CASE("reshape outputs alias their input and intermediate values are not readable") {
  graph g;
  var x = g.input("x", {2, 6});
  var y = scale(x, 2.f);
  var r = reshape(y, {3, 4});
  var z = scale(r, 1.f);
  REQUIRE(g.check().ok());
  auto table = kernels::cpu_kernels();
  auto ex = kernels::executor::create(g, {}, {z.id, r.id}, {&table, nullptr});
  REQUIRE(ex.ok());
  for (int i = 0; i < 12; ++i) ex->input(x.id).data<float>()[i] = static_cast<float>(i);
  REQUIRE(ex->run().ok());
  CHECK(ex->value(r.id).shape() == shape{3, 4});
  CHECK(ex->value(z.id).at(11) == 22.f);
  CHECK_THROWS_AS((void)ex->value(y.id), std::invalid_argument);
}

TEST_CASE("parameters are shared with the store, so updates show in the next run") {
  graph g;
  var x = g.input("x", {1, 2});
  var w = g.parameter("w", {2, 1}, init_spec::ones());
  var y = matmul(x, w);
  parameter_store ps = init_parameters(g, 0);
  auto table = kernels::cpu_kernels();
  auto ex = kernels::executor::create(g, ps, {y.id}, {&table, nullptr});
  REQUIRE(ex.ok());
  ex->input(x.id).fill(3.f);
  REQUIRE(ex->run().ok());
  CHECK(ex->value(y.id).at(0) == 6.f);
  ps.at("w").fill(2.f);
  REQUIRE(ex->run().ok());
  CHECK(ex->value(y.id).at(0) == 12.f);
}

TEST_CASE("executor errors: missing parameter, wrong parameter shape, bad kept id") {
  graph g;
  var x = g.input("x", {1, 2});
  var w = g.parameter("w", {2, 3}, init_spec::ones());
  var y = matmul(x, w);
  auto table = kernels::cpu_kernels();
  auto missing = kernels::executor::create(g, {}, {y.id}, {&table, nullptr});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "executor: parameter 'w' has no tensor");
  parameter_store wrong{{"w", tensor::zeros({3, 2})}};
  auto bad_shape = kernels::executor::create(g, wrong, {y.id}, {&table, nullptr});
  REQUIRE_FALSE(bad_shape.ok());
  CHECK(bad_shape.error().message == "executor: parameter 'w' is [3,2], the graph expects [2,3]");
  auto bad_keep = kernels::executor::create(g, init_parameters(g, 0), {999}, {&table, nullptr});
  REQUIRE_FALSE(bad_keep.ok());
}

TEST_CASE("running the forward range and then the backward range equals one full run") {
  graph g;
  var x = g.input("x", {4, 8});
  var y = g.input("y", {4}, dtype::i32);
  var loss = softmax_cross_entropy(linear(relu(linear(x, 16, "fc1")), 5, "fc2"), y);
  auto gr = autodiff(g, loss);
  REQUIRE(gr.ok());
  auto ps = init_parameters(g, 7);
  auto table = kernels::cpu_kernels();
  std::vector<value_id> keep{loss.id};
  for (auto [p, d] : gr->param_grads) keep.push_back(d);
  auto a = kernels::executor::create(g, ps, keep, {&table, nullptr});
  auto b = kernels::executor::create(g, ps, keep, {&table, nullptr});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  tensor xv = random_tensor({4, 8}, 3);
  tensor yv = random_ints({4}, 4, 5);
  for (auto* ex : {&*a, &*b}) {
    ex->input(x.id).copy_from(xv);
    ex->input(y.id).copy_from(yv);
    ex->input(gr->seed).fill(1.f);
  }
  REQUIRE(a->run().ok());
  REQUIRE(b->run(0, gr->backward_begin).ok());
  REQUIRE(b->run(gr->backward_begin, g.nodes().size()).ok());
  for (auto id : keep) CHECK(close(a->value(id), b->value(id), 0.f, 0.f));
}
