// What the planner knows about a model, computed once: the training graph built at two batch
// sizes, so every per-node cost and size is an exact affine function of the rows it runs on
// (cost(r) = fixed + per_row * r), without building the model at every candidate micro-batch
// size; the forward node each backward node belongs to; the parameters each forward node
// reads; and, per tensor-parallel degree, the completed placements (cached).
//
//   auto a = analyze_model(tiny_mlp, /*optimizer_slots=*/2);   // or [&](graph& g, std::int64_t rows) { ... }
//   if (!a) return a.error();
//   double flops = (*a)->node_cost[0].at(/*rows=*/32).flops;   // node 0 (fc1's matmul) at 32 rows
//   result<const axis_completion*> c = (*a)->completion(/*tp=*/2);   // placements on the tp axis, cached
//   if (!c) return c.error();
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/autodiff.hpp"
#include "graph/completion.hpp"
#include "planner/cost_model.hpp"

namespace cohort::planner {

/// A cost that is affine in the batch rows.
struct affine_cost {
  op_profile fixed, per_row;
  op_profile at(double rows) const {
    return {fixed.flops + per_row.flops * rows, fixed.bytes + per_row.bytes * rows, per_row.gemm || fixed.gemm,
            per_row.attention || fixed.attention};
  }
};

struct model_analysis {
  std::unique_ptr<graph> g;  // built at 3 rows (costs come from node_cost, not its shapes)
  gradients grads;
  std::vector<affine_cost> node_cost;     // every node of g
  std::vector<double> value_bytes_fixed;  // every value: bytes = fixed + per_row * rows
  std::vector<double> value_bytes_per_row;
  std::vector<int> owner;                      // every node: the forward node it belongs to
  std::vector<double> param_bytes_of_forward;  // forward node -> bytes of parameters it reads first
  double param_bytes = 0;
  int optimizer_slots = 0;
  /// Layer boundaries: forward node indices where a new top-level scope starts (cut points).
  std::vector<std::size_t> boundaries;
  /// Where the model's repeated layers begin: the longest run of consecutive top-level scopes
  /// with the same operations (a gpt's blocks; the embedding before them and the head after
  /// belong to none); empty where no scope repeats.
  std::vector<std::size_t> layer_starts;
  /// One past the last forward node that looks up an embedding table (embedding_bag); 0: the
  /// model looks nothing up. The heterogeneous pipeline keeps forward nodes [0, lookups_end)
  /// in its first stage.
  std::size_t lookups_end = 0;
  /// Bytes a pipeline cut before forward node j hands to the next stage (values produced
  /// before j and read at or after j): fixed + per_row * rows, for j in [0, forward].
  std::vector<double> cut_bytes_fixed, cut_bytes_per_row;
  std::size_t forward_nodes() const { return grads.backward_begin; }
  double cut_bytes(std::size_t j, double rows) const { return cut_bytes_fixed[j] + cut_bytes_per_row[j] * rows; }

  double value_bytes(value_id v, double rows) const {
    return value_bytes_fixed[static_cast<std::size_t>(v)] + value_bytes_per_row[static_cast<std::size_t>(v)] * rows;
  }
  /// Completed placements for tensor-parallel degree `tp` (computed once per degree).
  result<const axis_completion*> completion(int tp) const;

 private:
  mutable std::map<int, std::unique_ptr<axis_completion>> completions_;
};

/// Builds the model twice (at 3 and 5 rows: extents unlikely to collide with the model's own)
/// and derives the affine costs. Errors: a model error, graphs that differ beyond the batch.
/// `sparse_tables`: embedding tables take sparse gradients, as the runtime runs them with
/// compile_options::sparse_tables (grads.sparse_grads lists them; the cost model prices their
/// entries, not a dense table gradient).
result<std::unique_ptr<model_analysis>> analyze_model(const std::function<var(graph&, std::int64_t)>& model,
                                                      int optimizer_slots, bool sparse_tables = false);

}  // namespace cohort::planner
