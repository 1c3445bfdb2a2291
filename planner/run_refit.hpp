// The refit policy of a run: the task times a run measured, what the refit sets against the
// prediction (one observation per stage), and the step from a run's measurements to the
// summary's "prediction" and the saved profile. The refit arithmetic itself is refit.hpp.
//
//   plan_request request;
//   request.mode = plan_mode::manual;  request.dp = 2;
//   auto setup = prepare_planning(tiny_mlp, /*optimizer_slots=*/0, /*batch=*/64, /*threads=*/2, request,
//                                 machine_profile{}, default_profile_path());
//   if (!setup) return setup.error();
//   auto choice = choose_plan(*setup, request);
//   if (!choice) return choice.error();
//   task_totals totals;                        // filled step by step while the plan runs
//   std::vector<task_seconds> per_rank(2, {.forward_s = 0.010, .backward_s = 0.021, .update_s = 0.002});
//   totals.add_step(per_rank, /*step_s=*/0.035);
//   nlohmann::json j = compare_and_refit(*choice, *setup, /*save=*/false, totals, /*first=*/true);
//   // j: {"predicted_step_s", "measured_step_s", "error_pct", "refit": {...}, "profile": PATH}
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/plan_choice.hpp"
#include "planner/refit.hpp"
#include "planner/task_seconds.hpp"

namespace cohort::planner {

// Per rank, the task seconds summed over the timed steps, and each timed step's update (the
// gradient reduction) on its own: a reduction's time is that of the last replica to arrive,
// the one that did not wait for the others, which only a step-by-step minimum over the
// replicas finds (which replica arrives last changes from step to step).
struct task_totals {
  std::vector<task_seconds> per_rank;
  std::vector<std::vector<double>> update_per_step;  // [rank][timed step], the first max_recorded_steps
  static constexpr std::int64_t max_recorded_steps = 4096;
  std::vector<double> step_seconds;
  std::int64_t steps = 0;

  /// One timed step: every rank's task seconds (ranks of other processes as zeros) and the
  /// step's wall time.
  void add_step(const std::vector<task_seconds>& ranks, double step_s);
};

/// What the refit sets against the prediction, one observation per stage: forward and
/// backward seconds per step averaged over the stage's ranks (ranks in plan order); the
/// update (the gradient reduction) in each step from the replica that waited least in it, the
/// last to arrive, whose time is the reduction itself rather than the wait for slower
/// replicas, averaged over the recorded steps. Stages without a rank are left out.
std::vector<task_observation> stage_observations(const parallel_plan& plan, const std::vector<stage_prediction>& predicted,
                                                 const task_totals& t);

/// Predicted against measured step time (the median timed step) and the refit of the cost
/// model from the task times, as the summary's "prediction"; saved with the profile when
/// `save` and the plan ran on this machine (`first`: counted as a new refit in the profile,
/// else replacing the run's last).
nlohmann::json compare_and_refit(const plan_choice& choice, planning_setup& setup, bool save, const task_totals& t,
                                 bool first);

}  // namespace cohort::planner
