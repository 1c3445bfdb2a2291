// Training on the actor runtime: a plan becomes a coordinator, a data actor, one parameter
// actor and one worker actor per (replica, stage, tensor-parallel rank), all in this
// process. The coordinator drives the steps, commits each one when every worker finished
// it, reports metrics and per-task timings, and recovers from a worker that dies: it sees
// the death through a monitor, ends the generation (survivors blocked on the dead worker
// are released), respawns the worker, which refills its parameters from its parameter
// actor, and redoes the interrupted step — losses equal those of a run without the failure.
//
//   caf::actor_system sys{cfg};
//   run_options o{.plan = {.dp = 2, .tp = 2}, .batch = 64, .steps = 100, .optimizer = sgd_config{...}};
//   o.on_step = [](const step_metrics& m) { std::printf("%lld %f\n", m.step, m.loss); };
//   result<run_summary> r = train(sys, model, data, o);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/compile.hpp"
#include "actors/data_actor.hpp"
#include "actors/messages.hpp"
#include "actors/worker_actor.hpp"
#include "graph/optimizer.hpp"

namespace cohort::actors {

struct step_metrics {
  std::int64_t step = 0;
  double loss = 0;
  double seconds = 0;           // wall time of the step, commit included
  std::int64_t generation = 0;
  /// Per rank: seconds in forward, backward and update tasks this step (zeros for the ranks
  /// of other processes).
  std::vector<planner::task_seconds> task_seconds;
};

struct failure_event {
  int rank = -1;
  std::int64_t step = -1;
  std::string reason;
  double detect_seconds = 0;   // from the step's start to the coordinator seeing the death
  double recover_seconds = 0;  // from seeing it to the redone step starting
};

struct run_summary {
  std::vector<double> losses;
  parameter_store parameters;  // the trained model, whole (when run_options::collect_parameters)
  std::vector<failure_event> failures;
  int restarts = 0;
  double seconds = 0;
};

struct run_options {
  planner::parallel_plan plan;
  std::int64_t batch = 0;
  std::int64_t steps = 0;
  optimizer_config optimizer = sgd_config{};
  std::uint64_t seed = 0;
  int threads = 1;                                // OpenBLAS + kernel pools, split over workers
  std::chrono::milliseconds timeout{60000};       // every wait inside a step
  int max_restarts = 3;
  std::vector<std::size_t> stage_cuts;            // explicit pipeline cuts (empty: balanced)
  failure_injection inject;
  bool collect_parameters = true;                 // return the trained parameters in the summary
  std::function<void(const step_metrics&)> on_step;  // called by the coordinator, in order
  std::function<void()> on_start;                  // once the plan compiled, before any actor runs

  // Multi-process jobs (all three set together): the job's fabric, whose local ranks alone
  // run in this process; a failure ends the run (recovery across processes is not built yet).
  fabric_ptr fabric;
  /// This process's share of a step's loss -> the job's loss (called in step order).
  std::function<result<double>(std::int64_t step, double local_loss)> combine_loss;
  /// This process's parameter pieces by rank (empty where not local) -> every rank's piece
  /// on the process that assembles the model; an empty vector elsewhere (no parameters).
  std::function<result<std::vector<tensor>>(std::vector<tensor> pieces)> gather_pieces;
};

/// Trains `steps` steps of `model` on `data` under `o.plan`. Errors: the plan cannot run
/// this model (named), a step failed more than max_restarts times (the first failure named).
result<run_summary> train(caf::actor_system& sys, const model_fn& model, batch_fn data, const run_options& o);

}  // namespace cohort::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(cohort::actors::run_summary)
