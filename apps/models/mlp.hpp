// The multi-layer perceptron the mlp app trains, written with the DSL. Tests build the same
// function, so the app, the convergence tests and the PyTorch oracle test share one definition.
//
//   graph g;
//   mlp_model m = build_mlp(g, {64, 128, 128, 10}, /*batch=*/32);
//   if (auto st = g.check(); !st) return st;
//   assert(m.x.shape() == (shape{32, 64}) && g.find("fc3.weight") != no_value);
//   // m.x [32,64] f32 and m.y [32] i32 are the inputs, m.loss the mean cross-entropy
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace cohort::apps {

struct mlp_model {
  var x;       // input  [B, dims.front()] f32
  var y;       // labels [B] i32
  var logits;  // [B, dims.back()]
  var loss;    // [] mean cross-entropy
};

/// Linear layers dims[0] -> dims[1] -> ... with ReLU between them (torch.nn.Sequential of
/// nn.Linear and nn.ReLU, as ../shared/bench/mlp_torch.py builds it). Layers are fc1, fc2...
/// annotated for tensor parallelism in Megatron pairs (fc1 column, fc2 row, ...).
mlp_model build_mlp(graph& g, const std::vector<std::int64_t>& dims, std::int64_t batch);

}  // namespace cohort::apps
