// DLRM (Naumov et al. 2019) as facebookresearch/dlrm builds it for Criteo Kaggle, written with
// the DSL: a bottom MLP over the dense features, one sum-pooled embedding table per sparse
// feature, the dot interaction of the bottom output with every embedding (no self-pairs),
// that output concatenated with the dots, a top MLP to one logit, binary cross-entropy.
// The app, the tests and the PyTorch oracle share this function.
//
//   graph g;
//   dlrm_config c;                                    // Criteo Kaggle: 13 dense, 26 tables of dim 16
//   c.tables = {{"c1", 1460}, {"c2", 583}};           // here two small ones
//   dlrm_model m = build_dlrm(g, c, /*batch=*/128);
//   if (auto st = g.check(); !st) return st;
//   assert(m.logits.shape() == (shape{128}));        // inputs: dense [128,13], c1 c2 [128,1] i32, label [128]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "graph/layers.hpp"

namespace cohort::apps {

/// One sparse feature: its input's name, its table's rows, the ids per sample (a bag; short
/// bags are padded with -1), and whether the bag is averaged instead of summed.
struct dlrm_table {
  std::string input;
  std::int64_t rows = 1;
  std::int64_t bag = 1;
  bool mean = false;
};

/// One table's split over "tp": how (graph/layers.hpp), and for a table-wise table the rank
/// that holds it (-1: completion balances the tables by size).
struct table_split {
  table_sharding how = table_sharding::replicated;
  int owner = -1;
  friend bool operator==(const table_split&, const table_split&) = default;
};

struct dlrm_config {
  std::int64_t dense = 13;                         // dense features (input "dense")
  std::int64_t dim = 16;                           // embedding dimension = the bottom MLP's output
  std::vector<std::int64_t> bottom{512, 256, 64};  // hidden widths of the bottom MLP (then dim)
  std::vector<std::int64_t> top{512, 256};         // hidden widths of the top MLP (then 1)
  std::vector<dlrm_table> tables;
  /// How the tables live on the tensor-parallel ranks ("tp"); one choice for all of them,
  /// or one per table (`per_table`, by table index, overriding `sharding`; the planner's
  /// choice, planner/table_placement.hpp).
  table_sharding sharding = table_sharding::replicated;
  std::vector<table_split> per_table;
};

struct dlrm_model {
  var logits;  // [B]: the click logit (sigmoid gives the probability)
  var loss;    // [] mean binary cross-entropy against input "label" [B] f32
};

/// Parameters: bot.fc{i}, top.fc{i} (weight [in,out], bias; N(0, 2/(in+out)) and N(0, 1/out)
/// as dlrm_s_pytorch.py), emb.{input} [rows, dim] ~ U(-1/sqrt(rows), 1/sqrt(rows)). ReLU after
/// every bottom layer and between top layers. The interaction's width: dim + F(F-1)/2 for
/// F = tables + 1 (Criteo: 16 + 351 = 367).
dlrm_model build_dlrm(graph& g, const dlrm_config& cfg, std::int64_t batch);

/// The Criteo Kaggle configuration for these table sizes (inputs c1..c26, one id each).
dlrm_config criteo_dlrm(const std::vector<std::int64_t>& table_rows);

}  // namespace cohort::apps
