// The simulator: plays one training step of a plan on modelled durations, as discrete
// events in time order. Each stage is one compute stream that runs its task order
// (planner/schedule.hpp: the same order the runtime's workers run); a forward task waits for
// the previous stage's activation, a backward task for the next stage's gradient, each plus
// its transfer time; the amplifier (gradient reduction, update) runs after a stage's last
// backward. It judges schedules the closed forms cannot (uneven stages, transfers, GPipe
// against 1F1B) and predicts plans far too big to run here.
//
// Interleaved 1F1B: a rank's chunks are stages of their own (with their transfers) that
// share the rank's one compute stream, in the order the credit rule gives.
//
// Shared cores: when ranks outnumber the cores they run on (this machine running a 4-rank
// plan on 2 cores), the running stages share the cores — processor sharing: each of the
// busy ranks progresses at min(1, cores / busy ranks) of its own speed, so a stage computing
// while the others wait in the pipeline's bubble gets a whole core. Where no core is shared
// (a cluster's devices) the same timeline is computed directly, each task from those it waits
// for (the longest path through the task orders): linear in the tasks, where the event loop
// visits every rank at every event (pp 96 with 1,024 micro-batches: 196,608 tasks).
//
//   stage_timing t{.forward_s = 1, .backward_s = 2};
//   auto r = simulate_step(4, 8, std::vector<stage_timing>(4, t), [](int s) { return 4 - s; });   // 1F1B
//   assert(r.step_s == (8 + 3) * 3 && r.bubble == 3.0 / 11);   // (m + p - 1) (f + b); (p - 1) / (m + p - 1)
#pragma once

#include <array>
#include <functional>
#include <vector>

#include "planner/schedule.hpp"

namespace cohort::planner {

struct stage_timing {
  double forward_s = 0;        // per micro-batch
  double backward_s = 0;       // per micro-batch
  double send_forward_s = 0;   // activation to the next stage, per micro-batch
  double send_backward_s = 0;  // gradient to the previous stage, per micro-batch
  double update_s = 0;         // the amplifier, once per step
};

/// Cores shared by the ranks: `cores` = 0 means every rank has its own (no sharing).
struct core_sharing {
  double cores = 0;
  int ranks_per_stage = 1;  // dp x tp: ranks that run each stage's tasks at the same time
};

struct simulation {
  double step_s = 0;           // from the first task's start to the last task's end
  std::vector<double> busy_s;  // per stage: time spent computing
  double bubble = 0;           // 1 - (busiest compute before the update) / (pipeline span)
  /// Per stage, wall seconds from start to end of its forward, backward and update tasks
  /// (more than their durations when shared cores slow them): what the runtime measures.
  std::vector<std::array<double, 3>> task_wall_s;
};

simulation simulate_step(int stages, int micro_batches, const std::vector<stage_timing>& timing,
                         const std::function<int(int stage)>& buffer_size, const core_sharing& sharing = {});

/// Interleaved 1F1B: `ranks` compute streams, each running `chunks` stages (rank r: stages
/// r + c * ranks; `timing` has ranks x chunks entries, by stage). busy_s and task_wall_s are
/// per rank; a rank's update task takes its stages' update_s together. Empty when the
/// schedule stalls or `timing` has the wrong size.
simulation simulate_step(int ranks, int chunks, int micro_batches, const std::vector<stage_timing>& timing,
                         const std::function<int(int rank)>& credit, const core_sharing& sharing = {});

}  // namespace cohort::planner
