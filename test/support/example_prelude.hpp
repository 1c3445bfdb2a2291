// The few names the header examples may use without declaring them (scripts/header-examples.py
// compiles every header's example; see the rules there). Everything else an example uses, it
// declares itself, so that it reads as real code. The examples are compiled, never linked or
// run: `sys` is declared only.
//
//   graph g;
//   var loss = tiny_mlp(g, /*rows=*/64);                     // x [64,8] -> 16 -> relu -> 4 classes
//   std::map<std::string, tensor> b = tiny_batch(/*step=*/0);  // {"x": [64,8], "y": [64]}
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "graph/dsl.hpp"
#include "graph/graph.hpp"
#include "graph/layers.hpp"
#include "graph/tensor.hpp"

namespace cohort::examples {

/// A model function (the shape of actors::model_fn, apps::job::model, planner::analyze_model's
/// argument): inputs x [rows, 8] f32 and y [rows] i32, fc1 (8 -> 16), relu, fc2 (16 -> 4),
/// the mean cross-entropy.
inline var tiny_mlp(graph& g, std::int64_t rows) {
  var x = g.input("x", {rows, 8});
  var y = g.input("y", {rows}, dtype::i32);
  return softmax_cross_entropy(linear(relu(linear(x, 16, "fc1")), 4, "fc2"), y);
}

/// A batch function for tiny_mlp at batch 64 (the shape of actors::batch_fn, apps::job::data):
/// every step's global batch, by input name.
inline std::map<std::string, tensor> tiny_batch(std::int64_t step) {
  tensor x = tensor::full({64, 8}, 0.01f * static_cast<float>(step % 100));
  tensor y = tensor::zeros({64}, dtype::i32);
  return {{"x", x}, {"y", y}};
}

/// The actor system of a program that runs actors (actors/actor_system.hpp makes one).
extern caf::actor_system& sys;

}  // namespace cohort::examples
