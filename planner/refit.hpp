// Online refit: the cost model's efficiencies fitted to the task times the runtime measured.
// Each observation pairs what the planner predicted for one rank's stage with what that rank
// measured (mean seconds per step in forward, backward and update tasks). Two factors are
// fitted, in closed form:
//   compute  a = sum(measured forward + backward) / sum(predicted forward + backward)
//            (tensor-parallel collectives run inside those tasks and share the factor);
//   reduce   c = measured update / predicted reduction, only when the plan reduces
//            gradients (dp > 1): the runtime's update task is the reduction (the optimizer
//            applies the committed gradient at the next step's start, outside the tasks).
// Predicted time scales with 1/efficiency, so the new efficiencies are the old ones divided
// by the factors (and the per-operation cost multiplied by a).
//
//   std::vector<task_observation> obs = {{plan.stages[s], {0.012, 0.025, 0.004}}, ...};
//   refit_result r = refit(obs, eff);          // r.eff: the constants to save and plan with
#pragma once

#include <array>
#include <string>
#include <vector>

#include "planner/cost_model.hpp"
#include "planner/search.hpp"

namespace cohort::planner {

struct task_observation {
  stage_prediction predicted;
  std::array<double, 3> measured_s{};  // forward, backward, update (the reduction): seconds per step
};

struct refit_result {
  efficiency eff;
  double compute_factor = 1;  // measured / predicted compute
  double reduce_factor = 1;   // measured / predicted gradient reduction (1 when not observed)
  bool changed = false;       // false: nothing usable observed, eff is the input
};

refit_result refit(const std::vector<task_observation>& observations, const efficiency& current);

/// Non-negative least squares with three unknowns, y ~ A x, x >= 0 (the runtime's overhead
/// terms fitted to calibration runs): every subset of the columns solved unconstrained, the
/// best fit whose terms are all non-negative; all zero when none is.
std::array<double, 3> fit_nonnegative(const std::vector<std::array<double, 3>>& a, const std::vector<double>& y);

}  // namespace cohort::planner
