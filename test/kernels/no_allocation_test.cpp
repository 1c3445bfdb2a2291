// Steady-state training steps allocate nothing: this binary replaces the global operator
// new with a counting one and trains an MLP and a small transformer for a few steps.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "graph/dsl.hpp"
#include "graph/layers.hpp"
#include "kernels/trainer.hpp"
#include "support/tensor_checks.hpp"

namespace {
std::atomic<long> allocations{0};
}

void* operator new(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace cohort;
using namespace cohort::test;

namespace {

long allocations_during_steps(kernels::serial_trainer& tr, int steps) {
  REQUIRE(tr.step().ok());  // the first step may warm anything lazy
  long before = allocations.load();
  for (int i = 0; i < steps; ++i) REQUIRE(tr.step().ok());
  return allocations.load() - before;
}

}  // namespace

TEST_CASE("an MLP training step with SGD momentum allocates nothing") {
  graph g;
  var x = g.input("x", {16, 32});
  var y = g.input("y", {16}, dtype::i32);
  var loss = softmax_cross_entropy(linear(relu(linear(x, 64, "fc1")), 10, "fc2"), y);
  auto tr =
      kernels::serial_trainer::create(g, loss, {.optimizer = sgd_config{.lr = 0.1f, .momentum = 0.9f}, .threads = 2});
  REQUIRE(tr.ok());
  (*tr)->input("x").copy_from(random_tensor({16, 32}, 1));
  (*tr)->input("y").copy_from(random_ints({16}, 2, 10));
  CHECK(allocations_during_steps(**tr, 5) == 0);
}

TEST_CASE("a transformer block training step with AdamW allocates nothing") {
  graph g;
  var ids = g.input("ids", {2, 8}, dtype::i32);
  var y = g.input("y", {2, 8}, dtype::i32);
  var h = embed(ids, 32, 16, "tok");
  h = h + causal_self_attention(layer_norm(h, "ln1"), 4, "attn");
  h = h + linear(gelu(linear(layer_norm(h, "ln2"), 64, "fc1")), 16, "fc2");
  var loss = softmax_cross_entropy(linear(layer_norm(h, "lnf"), 32, "head", false), y);
  auto tr = kernels::serial_trainer::create(g, loss, {.optimizer = adamw_config{}, .threads = 2});
  REQUIRE(tr.ok());
  (*tr)->input("ids").copy_from(random_ints({2, 8}, 1, 32));
  (*tr)->input("y").copy_from(random_ints({2, 8}, 2, 32));
  CHECK(allocations_during_steps(**tr, 5) == 0);
}
