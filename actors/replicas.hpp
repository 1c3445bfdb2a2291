// Buddy copies: where a rank's piece of the parameters has no data-parallel replica on another
// process (a pipeline stage, a tensor-parallel rank, a sharded piece), another process keeps a
// copy of it that every commit leaves bit-identical to the original, so the loss of the process
// that owns the piece costs one step, not a checkpoint's worth. The copy takes the least
// traffic that keeps it exact: the piece's state once when a plan starts (the seed: values,
// optimizer slots, steps) and then each step's gradient piece, which the copy applies at the
// same commits with the same deterministic optimizer step (a piece's worth of bytes a step, not
// the state's 1 + slots). The buddy's worker receives the gradient before it reports its step
// done, so a committed step is in the copy.
//
//   planner::parallel_plan plan;  plan.pp = 2;                 // stage 0 on process 0, stage 1 on 1
//   std::vector<int> buddy = buddy_ranks(plan, /*owner=*/{0, 1});
//   assert(buddy == std::vector<int>({1, 0}));                 // each stage's copy on the other process
//   assert(copies_kept_by(buddy, 0) == std::vector<int>{1});
//   transport::in_process_fabric fabric(2);                    // rank 1's worker, once per plan, then every step:
//   piece_state state{tensor::zeros({8}), {tensor::zeros({8}), tensor::zeros({8})}, /*steps=*/4};   // AdamW's
//   if (auto st = send_seed(fabric.endpoint(1), /*buddy=*/0, /*step=*/4, state, 30s); !st) return st;
//   piece_gradient grad;
//   grad.dense = tensor::full({8}, 0.5f);
//   if (auto st = send_gradient(fabric.endpoint(1), 0, 4, grad, 30s); !st) return st;
//   auto seed = receive_seed(fabric.endpoint(0), /*from=*/1, 4, /*slots=*/2, 30s);   // rank 0's worker
//   if (!seed) return seed.error();
//   tensor scratch;
//   auto g = receive_gradient(fabric.endpoint(0), 1, 4, seed->values.numel(), scratch, 30s);
//   if (!g) return g.error();   // the copy: parameter_piece::seed(*seed), then submit(..., *g)
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "actors/param_shard.hpp"
#include "actors/state_layout.hpp"
#include "planner/plan.hpp"
#include "transport/channel.hpp"
#include "transport/in_process.hpp"

namespace cohort::actors {

/// By rank: the rank that keeps a copy of its piece; -1 where none is needed (an identical
/// data-parallel replica lives on another process) or none is possible (the ranks live in one
/// process). The copy lives on the next process in order that hosts ranks; that process's
/// ranks take the copies it keeps in turn. The same on every process (the plan and the owners).
std::vector<int> buddy_ranks(const planner::parallel_plan& plan, const std::vector<int>& owner);

/// The ranks whose copies `rank` keeps (ascending).
std::vector<int> copies_kept_by(const std::vector<int>& buddy, int rank);

/// The seed: the piece's state as it stands before `step`'s update.
status send_seed(transport::channel& ch, int buddy, std::uint64_t step, const piece_state& state,
                 std::chrono::milliseconds timeout);
/// The seed from `from`, validated: `slots` optimizer slots, each as long as the values.
result<piece_state> receive_seed(transport::channel& ch, int from, std::uint64_t step, std::size_t slots,
                                 std::chrono::milliseconds timeout);

/// `step`'s gradient piece: where sparse tables lie in the piece only the runs outside them
/// travel (a table's dense range is zeros, never read) and the tables' entries. Geo mode's
/// local gradients are refused (a copy could not follow the rows they keep).
status send_gradient(transport::channel& ch, int buddy, std::uint64_t step, const piece_gradient& grad,
                     std::chrono::milliseconds timeout);
/// The gradient piece from `from` for a piece of `piece_size` elements, validated. The dense
/// part of a piece with tables is rebuilt in `scratch` (sized once; valid until the next call).
result<piece_gradient> receive_gradient(transport::channel& ch, int from, std::uint64_t step, std::int64_t piece_size,
                                        tensor& scratch, std::chrono::milliseconds timeout);

}  // namespace cohort::actors
