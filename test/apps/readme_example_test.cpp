// The "write your own model" snippet of README.md, compiled and run: it must train.
#include <doctest/doctest.h>

#include <stdexcept>

#include "graph/dsl.hpp"
#include "graph/layers.hpp"
#include "graph/random.hpp"
#include "kernels/trainer.hpp"

using namespace cohort;

namespace {

// A learnable stand-in for the user's data: labels from a fixed linear teacher.
float last_loss = 0, first_loss = 0;
rng data_rng(3);
void next_batch(tensor& x, tensor& y) {
  for (std::int64_t i = 0; i < 32; ++i) {
    float best = -1e30f;
    for (std::int64_t j = 0; j < 64; ++j) x.data<float>()[i * 64 + j] = data_rng.normal();
    for (int c = 0; c < 10; ++c) {
      float s = 0;
      for (std::int64_t j = 0; j < 64; ++j) s += x.data<float>()[i * 64 + j] * static_cast<float>(((j * 7 + c * 13) % 5) - 2);
      if (s > best) { best = s; y.data<std::int32_t>()[i] = c; }
    }
  }
}

}  // namespace

TEST_CASE("the README example builds, trains and lowers its loss") {
  // --- begin README snippet ---
  graph g;
  var x = g.input("x", {32, 64});                       // a batch of 32 feature vectors
  var y = g.input("y", {32}, dtype::i32);               // their class labels
  var h = gelu(linear(x, 128, "fc1"));                  // creates fc1.weight [64,128], fc1.bias [128]
  var loss = softmax_cross_entropy(linear(h, 10, "fc2"), y);
  if (auto st = g.check(); !st) throw std::runtime_error(st.error().message);

  auto trainer = kernels::serial_trainer::create(g, loss, {.optimizer = adamw_config{.lr = 1e-3f}, .threads = 2});
  if (!trainer) throw std::runtime_error(trainer.error().message);
  auto& tr = **trainer;
  for (int step = 0; step < 100; ++step) {
    next_batch(tr.input("x"), tr.input("y"));          // your data, written into the input buffers
    result<float> l = tr.step();                        // forward, backward, AdamW update
  // --- end README snippet ---
    REQUIRE(l.ok());
    if (step == 0) first_loss = *l;
    last_loss = *l;
  }
  MESSAGE("loss " << first_loss << " -> " << last_loss);
  CHECK(last_loss < 0.6f * first_loss);
}
