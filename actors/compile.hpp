// From a model and a plan to everything the workers run: the serial training graph at the
// micro-batch size (forward + backward; at both sizes where the batch splits into shares one
// row apart), its tensor-parallel completion, the pipeline stage
// cuts and the task order of every stage. Local programs are partitioned on demand, one per
// worker (stage, tp rank); data-parallel replicas get identical copies.
//
//   model_fn mlp = [](graph& g, std::int64_t rows) {
//     return softmax_cross_entropy(linear(g.input("x", {rows, 8}), 4, "fc"), g.input("y", {rows}, dtype::i32));
//   };
//   auto cm = compile(mlp, planner::parallel_plan{.dp = 2}, /*batch=*/128);   // errors name the tensor or plan
//   if (!cm) return cm.error();
//   auto prog = cm->program(/*stage=*/0, /*tp_rank=*/0);    // a worker's local program, on demand
//   assert(cm->micro_batch == 64 && cm->schedule.size() == 1);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "graph/autodiff.hpp"
#include "graph/completion.hpp"
#include "graph/init.hpp"
#include "graph/partition.hpp"
#include "planner/batch_split.hpp"
#include "planner/plan.hpp"
#include "planner/schedule.hpp"

namespace cohort::actors {

/// Builds the model for `batch` rows into `g` and returns its scalar loss.
using model_fn = std::function<var(graph& g, std::int64_t batch)>;

struct compile_options {
  /// Embedding tables get sparse gradients (autodiff_options::sparse_tables): their entries
  /// are gathered across data-parallel replicas and their parameter owners update the touched
  /// rows only. The optimizer must allow it (kernels::sparse_update_problem).
  bool sparse_tables = false;
};

/// The serial training graph at one micro-batch size, completed and cut into stages.
struct shaped_graph {
  std::int64_t micro_batch = 0;  // the rows it is built with
  std::unique_ptr<graph> serial;
  gradients grads;
  axis_completion tp;
  stage_assignment stages;
};

/// The model at the split's largest share (its shaped_graph) and everything else the workers run.
struct compiled_model : shaped_graph {
  model_fn source;  // what it was compiled from (a plan transition compiles it again)
  compile_options options;
  planner::parallel_plan plan;
  std::int64_t batch = 0;
  std::vector<std::size_t> cuts;  // where stages 1.. begin (forward node indices)
  std::vector<std::vector<planner::task>> schedule;
  /// Where the batch does not split evenly: the same graph at the smaller shares' size
  /// (micro_batch - 1 rows); null for an even split.
  std::unique_ptr<shaped_graph> smaller;

  planner::batch_split split() const { return {batch, plan.dp, plan.micro_batches}; }
  /// The local program at the largest share's size.
  result<stage_program> program(int stage, int tp_rank) const;
  /// The local program for micro-batches of `rows` rows (either of the split's two sizes).
  result<stage_program> program(int stage, int tp_rank, std::int64_t rows) const;
};

/// The full parameters of the model from each rank's piece of its flat parameter buffer
/// (pieces by rank; with shard_params each data-parallel rank holds a piece, otherwise
/// replica 0's pieces are used), tensor-parallel shards joined. A parameter that one piece holds
/// whole is a view of that piece (no copy); shards and ZeRO pieces are copied together.
result<parameter_store> assemble_parameters(const compiled_model& cm, const std::vector<tensor>& pieces);

/// `stage_cuts` are the planner's (plan_choice::cuts); empty with pp > 1 asks the planner for
/// them with its default constants. Errors: an invalid plan for this batch, a model error,
/// tensor parallelism the model's shapes cannot take (naming the tensor), more pipeline
/// stages than operations.
result<compiled_model> compile(const model_fn& model, const planner::parallel_plan& plan, std::int64_t batch,
                               const std::vector<std::size_t>& stage_cuts = {}, compile_options options = {});

}  // namespace cohort::actors
