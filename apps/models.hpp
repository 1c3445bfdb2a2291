// The models the apps train, written with the DSL. Tests build the same functions, so the
// apps, the convergence tests and the PyTorch oracle test share one definition.
//
//   graph g;
//   mlp_model m = build_mlp(g, {64, 128, 128, 10}, /*batch=*/32);
//   gpt_model t = build_gpt(g2, gpt_config{}, /*batch=*/16);   // ../shared/bench/gpt_torch.py
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

struct gpt_config {
  std::int64_t layers = 4, d = 256, heads = 4, seq = 128, vocab = 256;
};

struct gpt_model {
  var tokens;   // [B, T] i32
  var targets;  // [B, T] i32, the tokens shifted by one
  var logits;   // [B, T, V]
  var loss;     // [] mean cross-entropy
};

/// The tiny GPT of ../shared/bench/gpt_torch.py: token embedding + learned positions (zero
/// init), pre-LN blocks (causal self-attention, GELU MLP of width 4d), final LayerNorm,
/// a bias-free head. Parameter names: tok, pos, block{i}.{ln1,attn.{q,k,v,proj},ln2,fc1,fc2},
/// ln, head. Annotated for tensor parallelism as Megatron: attention heads and fc1 column-
/// parallel, the attention projection and fc2 row-parallel.
gpt_model build_gpt(graph& g, const gpt_config& cfg, std::int64_t batch);

}  // namespace cohort::apps
