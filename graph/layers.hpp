// Layers: DSL helpers that create their own parameters (named inside the graph's current
// scope) with PyTorch's default initializers, so a model reads like its PyTorch twin.
//
//   graph g;
//   std::int64_t d = 64;
//   var x = g.input("x", {4, 16, d});               // [B,T,D]
//   auto _ = g.scope("block0");                     // parameters block0.ln1.weight, block0.attn.q.weight, ...
//   var h = x + causal_self_attention(layer_norm(x, "ln1"), /*heads=*/4, "attn");
//   h = h + linear(gelu(linear(layer_norm(h, "ln2"), 4 * d, "fc1")), d, "fc2");
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "graph/dsl.hpp"

namespace cohort {

/// How a linear layer's weights are split over the tensor-parallel axis "tp" (annotations
/// only: completion derives everything else). column: W = S(1), b = S(0), the output stays
/// split; row: W = S(0), b replicated, the output is a partial sum. `granule` keeps groups of
/// output columns (attention heads) together.
enum class tp_style { none, column, row };

/// y = x @ W (+ b). W [in,out] and b [out] ~ U(-1/sqrt(in), 1/sqrt(in)) as torch.nn.Linear.
var linear(var x, std::int64_t out_features, const std::string& name, bool bias = true, tp_style style = tp_style::none,
           std::int64_t granule = 1);

/// How an embedding table [rows, dim] is split over "tp", as TorchRec names the ways:
/// - replicated: every rank holds and looks up the whole table;
/// - column: each rank holds a range of every row's columns (S(1));
/// - row: each rank holds a near-equal range of rows and pools the ids that fall in it; the
///   ranks' partial sums are added (S(0));
/// - table: the whole table on one rank (S(0) with an owner); the others pool nothing, so
///   the same sum gives every rank the owner's output.
enum class table_sharding { replicated, column, row, table };
const char* to_string(table_sharding s);
/// "replicated", "column", "row" or "table"; nullopt for anything else.
std::optional<table_sharding> parse_table_sharding(std::string_view s);

/// Annotates `table` for `how`. A table-wise table goes whole to rank `owner`, or, with
/// owner -1, to the rank completion picks (largest tables first onto the least loaded).
void annotate_table(var table, table_sharding how, int owner = -1);

/// LayerNorm over the last axis with gamma = 1, beta = 0 (torch.nn.LayerNorm).
var layer_norm(var x, const std::string& name, float eps = 1e-5f);

/// Token embedding: a table [vocab, dim] ~ N(0, 1) (torch.nn.Embedding), looked up by ids.
var embed(var ids, std::int64_t vocab, std::int64_t dim, const std::string& name);

/// Multi-head causal self-attention on x [B,T,D]: separate q, k, v projections [D,D] (the
/// same function as one fused [D,3D] projection), heads split the projection columns,
/// softmax(q k^T / sqrt(D/H) + causal mask) v, then an output projection. For tensor
/// parallelism q, k, v are column-parallel in whole heads and the projection row-parallel.
/// `fused`: the scores, mask, softmax and weighted sum as one attention op (the [B,H,T,T]
/// scores never stored; the same function to rounding).
var causal_self_attention(var x, std::int64_t heads, const std::string& name, bool fused = false);

}  // namespace cohort
