// Measures this machine for the cost model (--cluster.calibrate): one thread's GEMM
// (arithmetic and operand traffic rates, from a square and a skinny shape), a streaming
// copy's bandwidth from memory and within the last-level cache, the optimizer's update rate,
// the embedding path's lookup and sparse-update rates, the in-process allreduce between two threads at 4 KiB and 4 MiB (alpha and beta), the same
// between two processes over each data plane that starts here (tcp, ucx), and the
// actor runtime's own overhead on `threads` threads (actors/runtime_overhead.hpp).
// Efficiencies start at the defaults. Takes a few seconds.
//
//   planner::machine_profile p = actors::calibrate(/*threads=*/2);
//   std::cout << planner::describe(p) << "\n";
//   if (auto st = planner::save_profile(planner::default_profile_path(), p); !st) return st;
#pragma once

#include "graph/progress.hpp"
#include "planner/machine_profile.hpp"

namespace cohort::actors {

/// `progress`: after each of its measurements (done of total).
planner::machine_profile calibrate(int threads, const progress_fn& progress = {});

}  // namespace cohort::actors
