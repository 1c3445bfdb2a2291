// Partitioning: the serial training graph (forward + backward), its completed placements on
// the tensor-parallel axis, and a stage for every forward node become one local program per
// (pipeline stage, tensor-parallel rank). Each local program computes on its shard shapes,
// with the communication that keeps it equal to the serial program inserted as nodes
// (allreduce, all_gather, reduce_scatter, or a local slice), and lists what it must receive
// from and send to the other stages for every micro-batch.
//
//   graph g;
//   var h = relu(linear(g.input("x", {64, 8}), 16, "fc1", true, tp_style::column));   // nodes 0-2
//   var loss = softmax_cross_entropy(linear(h, 4, "fc2", true, tp_style::row), g.input("y", {64}, dtype::i32));
//   auto gr = autodiff(g, loss);
//   if (!gr) return gr.error();
//   auto c = complete_axis(g, "tp", 2);                          // after autodiff: the backward too
//   if (!c) return c.error();
//   auto stages = stages_from_cuts(g, *gr, {3});                 // stage 1 starts at node 3 (fc2)
//   if (!stages) return stages.error();
//   auto prog = partition(g, *gr, *c, *stages, /*stage=*/1, /*tp_rank=*/0);
//   if (!prog) return prog.error();
//   const graph& local = prog->g;      // run it with an executor whose table has the runtime's collectives
//   assert(prog->recvs.size() == 1);   // h, from stage 0, for every micro-batch
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/autodiff.hpp"
#include "graph/completion.hpp"
#include "graph/graph.hpp"

namespace cohort {

/// The stage of every forward node (backward nodes follow their forward origin).
struct stage_assignment {
  int stages = 1;
  std::vector<int> of_forward_node;
};

/// Stages from cut points: forward node indices where stages 1..n-1 begin. The cuts come from
/// the planner (planner::stage_cuts), the only stage cutter.
result<stage_assignment> stages_from_cuts(const graph& g, const gradients& gr, const std::vector<std::size_t>& cuts);

/// One pipeline rank's program. With one stage per rank (`stage` = the stage) it is the
/// stage's forward nodes, then its backward nodes from backward_begin. With virtual stages
/// (interleaved 1F1B) the rank's stages are its chunks, in the order one micro-batch runs them:
/// every chunk's forward nodes in stage order, then their backward nodes in reverse stage
/// order, each chunk's range listed in `chunks`; `stage` is then the pipeline rank.
struct stage_program {
  int stage = 0, stages = 1;  // the pipeline rank and how many there are
  std::int64_t tp_rank = 0, tp = 1;
  graph g;                         // the local program
  std::size_t backward_begin = 0;  // first node of the backward tasks
  value_id loss = no_value;        // on the stage that computes the loss
  value_id seed = no_value;        // the loss gradient seed input, same stage
  int loss_chunk = 0;              // the chunk that computes the loss (and takes the seed)
  /// Data inputs of the serial graph this stage reads (by name), as local inputs, and the
  /// chunk whose forward task reads each (data_chunks, parallel to data_inputs).
  std::vector<std::pair<std::string, value_id>> data_inputs;
  std::vector<int> data_chunks;
  /// The rank's stages and where each one's forward and backward tasks are in g's nodes.
  struct chunk {
    int stage = 0;
    std::size_t forward_begin = 0, forward_end = 0, backward_begin = 0, backward_end = 0;
  };
  std::vector<chunk> chunks;
  struct transfer {
    value_id serial;    // the value in the serial graph
    int peer_stage;     // where it comes from / goes to (the first such stage of peer_rank)
    value_id local;     // local input (recv) or local value (send)
    bool backward;      // received for / sent by the backward task
    int chunk = 0;      // the chunk whose task receives / sends it
    int peer_rank = 0;  // the pipeline rank of peer_stage
  };
  std::vector<transfer> recvs, sends;
  struct param {
    std::string name;  // the serial parameter's name
    value_id local;    // local parameter
    value_id grad;     // its local gradient, placed like the parameter (none for a sparse table)
    placement tp;      // how the local tensor slices the full one
    /// A sparse table's gradient (autodiff_options::sparse_tables): entries whose sum by row
    /// is the local gradient — rows i32 [N] (-1: none), values [N, local columns].
    value_id sparse_rows = no_value, sparse_values = no_value;
    /// A table split by rows: the entries name global rows; this rank holds rows from here.
    std::int64_t sparse_first_row = 0;
    bool sparse() const { return sparse_rows != no_value; }
  };
  std::vector<param> params;
  /// Values the executor must keep readable: sends, the loss, parameter gradients (dense or
  /// sparse).
  std::vector<value_id> kept() const;
};

/// The local program of `stage` on tensor-parallel rank `tp_rank`. With `pipeline_ranks` > 0
/// (fewer than the stages, which it must divide) `stage` is a pipeline rank and the program
/// holds its stages stage, stage + pipeline_ranks, ... as chunks. Errors: a parameter used
/// by two stages (tied weights across stages), or a placement change partitioning cannot do.
result<stage_program> partition(const graph& g, const gradients& gr, const axis_completion& tp,
                                const stage_assignment& stages, int stage, std::int64_t tp_rank,
                                int pipeline_ranks = 0);

/// The local extent of `s` under placement `p` on rank `index` of `parts`.
shape local_shape(const shape& s, const placement& p, std::int64_t parts, std::int64_t index);

}  // namespace cohort
