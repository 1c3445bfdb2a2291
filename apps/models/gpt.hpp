// The tiny GPT the gpt app trains (../shared/bench/gpt_torch.py), written with the DSL. Tests
// build the same function, so the app, the equivalence tests and the PyTorch oracle share it.
//
//   graph g;
//   gpt_model m = build_gpt(g, gpt_config{.layers = 2, .d = 64}, /*batch=*/16);
//   if (auto st = g.check(); !st) return st;
//   assert(m.tokens.shape() == (shape{16, 128}) && m.logits.shape() == (shape{16, 128, 256}));
//   // m.tokens, m.targets [16, cfg.seq] i32 are the inputs, m.loss the mean cross-entropy
#pragma once

#include <cstdint>

#include "graph/graph.hpp"

namespace cohort::apps {

struct gpt_config {
  std::int64_t layers = 4, d = 256, heads = 4, seq = 128, vocab = 256;
  bool fused_attention = false;       // one attention op per layer instead of scores, mask, softmax, product
  bool column_parallel_head = false;  // the output layer split over tp by vocabulary (the logits gathered)
};

struct gpt_model {
  var tokens;   // [B, T] i32
  var targets;  // [B, T] i32, the tokens shifted by one
  var logits;   // [B, T, V]
  var loss;     // [] mean cross-entropy
};

/// Token embedding + learned positions (zero init), pre-LN blocks (causal self-attention,
/// GELU MLP of width 4d), final LayerNorm, a bias-free head. Parameter names: tok, pos,
/// block{i}.{ln1,attn.{q,k,v,proj},ln2,fc1,fc2}, ln, head. Annotated for tensor parallelism
/// as Megatron: attention heads and fc1 column-parallel, the attention projection and fc2
/// row-parallel.
gpt_model build_gpt(graph& g, const gpt_config& cfg, std::int64_t batch);

}  // namespace cohort::apps
