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
// Runs are noisy (one run on a shared machine can be 25 % slow), so a profile keeps a running
// mean over its refits rather than the last run's fit: blend(old, fit, 1/n) for the n-th.
//
//   efficiency eff;                                            // the profile's current constants
//   stage_prediction predicted{.forward_s = 0.010, .backward_s = 0.020, .update_s = 0.004};   // planned::stages[s]
//   std::vector<task_observation> obs = {{predicted, {0.012, 0.025, 0.004}}};   // per stage: measured f, b, u
//   refit_result r = refit(obs, eff);          // r.eff: this run's constants
//   assert(r.changed && std::abs(r.compute_factor - 37.0 / 30) < 1e-12);   // measured / predicted f + b
//   int refits = 0;                            // machine_profile::refits, before this one
//   efficiency saved = blend(eff, r.eff, refit_weight(refits + 1));
#pragma once

#include <array>
#include <string>
#include <vector>

#include "planner/cost_model.hpp"
#include "planner/search.hpp"
#include "planner/task_seconds.hpp"

namespace cohort::planner {

struct task_observation {
  stage_prediction predicted;
  task_seconds measured;  // seconds per step; update_s is the gradient reduction
};

struct refit_result {
  efficiency eff;
  double compute_factor = 1;  // measured / predicted compute
  double reduce_factor = 1;   // measured / predicted gradient reduction (1 when not observed)
  bool changed = false;       // false: nothing usable observed, eff is the input
};

refit_result refit(const std::vector<task_observation>& observations, const efficiency& current);

/// `fit` folded into `old` with weight w in [0, 1]: the efficiencies geometrically
/// (old^(1-w) fit^w, a running mean of their logarithms, as the factors multiply), the
/// per-operation and overhead seconds arithmetically (they may start at 0).
efficiency blend(const efficiency& old, const efficiency& fit, double weight);

/// The weight of the n-th refit since calibration (n >= 1): 1/n, a running mean over the
/// runs, but at least 1/max_refits_averaged, so the profile still follows a machine that changes.
constexpr int max_refits_averaged = 8;
double refit_weight(int n);

/// Non-negative least squares with three unknowns, y ~ A x, x >= 0 (the runtime's overhead
/// terms fitted to calibration runs): every subset of the columns solved unconstrained, the
/// best fit whose terms are all non-negative; all zero when none is.
std::array<double, 3> fit_nonnegative(const std::vector<std::array<double, 3>>& a, const std::vector<double>& y);

}  // namespace cohort::planner
