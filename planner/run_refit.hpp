// The refit policy of a run: the task times a run measured, what the refit sets against the
// prediction (one observation per stage), and the step from a run's measurements to the
// summary's "prediction" and the saved profile. The refit arithmetic itself is refit.hpp.
//
//   plan_request request;
//   request.mode = plan_mode::manual;  request.dp = 2;
//   auto prepared = prepare_planning(tiny_mlp, /*optimizer_slots=*/0, /*batch=*/64, /*threads=*/2, request,
//                                    machine_profile{}, default_profile_path());
//   if (!prepared) return prepared.error();
//   auto setup = std::make_shared<planning_setup>(std::move(*prepared));
//   auto choice = choose_plan(*setup, request);
//   if (!choice) return choice.error();
//   online_refit refit(*choice, setup, /*save=*/false, /*warmup=*/0, /*steps=*/20);
//   std::vector<task_seconds> per_rank(2, {.forward_s = 0.010, .backward_s = 0.021, .update_s = 0.002});
//   for (std::int64_t step = 0; step < 20; ++step) refit.observe(step, /*layout=*/0, per_rank, /*step_s=*/0.035);
//   nlohmann::json j = refit.finish();
//   // j: {"predicted_step_s", "measured_step_s", "error_pct", "refit": {...}, "profile": PATH}
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
std::vector<task_observation> stage_observations(const parallel_plan& plan,
                                                 const std::vector<stage_prediction>& predicted, const task_totals& t);

/// Predicted against measured step time (the median timed step) and the refit of the cost
/// model from the task times, as the summary's "prediction"; saved with the profile when
/// `save` and the plan ran on this machine (`first`: counted as a new refit in the profile,
/// else replacing the run's last).
nlohmann::json compare_and_refit(const plan_choice& choice, planning_setup& setup, bool save, const task_totals& t,
                                 bool first);

/// A job of several processes on this machine (setup.processes > 1): its compute is refit from
/// its forward and backward tasks (the same kernels as in one process; gemm, memory and per-op
/// into the profile's running mean, the link and overhead terms untouched). Then the slowdown of
/// the data plane's link at which the plan is predicted to take its measured step (the median
/// timed step) — the job's messages meet receivers that are busy or asleep, more so where its
/// processes outnumber the cores, which the calibration (both ends idle) does not see — is
/// folded into process_link::by_processes[processes] as a geometric running mean (the n-th run
/// with weight refit_weight(n)). Tensor-parallel collectives between the processes run inside
/// the tasks, which cannot tell slow compute from a slow link: there the compute takes their
/// excess and the slowdown the rest. Saved with the profile when `save`. Returns the summary's
/// "between_processes": {"plane", "processes", "excess_s" (over the link as calibrated),
/// "run_slowdown", "slowdown" (the mean), "refits", "compute_factor" when the compute was
/// refit, "profile" when saved}.
nlohmann::json refit_between_processes(const plan_choice& choice, planning_setup& setup, const task_totals& t,
                                       bool save);

/// A run's online refit, as the planner actor keeps it: fed every committed step of the first
/// plan, it refits once after `early_steps` timed steps (saved with the profile, so a run stopped
/// later still leaves it behind) and again from every timed step at the end, replacing the
/// early one in the profile's running mean.
class online_refit {
 public:
  online_refit(plan_choice choice, std::shared_ptr<planning_setup> setup, bool save, std::int64_t warmup,
               std::int64_t steps, std::int64_t early_steps = 10);
  /// A committed step (0-based) of plan layout `layout` (0: the first plan; later ones are not
  /// what was predicted and are left out). Returns the early refit when this step made it.
  std::optional<nlohmann::json> observe(std::int64_t step, int layout, const std::vector<task_seconds>& ranks,
                                        double step_s);
  /// Predicted against measured and the refit from every timed step (the summary's "prediction").
  nlohmann::json finish();
  const task_totals& totals() const { return totals_; }

 private:
  plan_choice choice_;
  std::shared_ptr<planning_setup> setup_;
  bool save_;
  std::int64_t warmup_, steps_, early_steps_;
  bool saved_ = false;
  task_totals totals_;
};

}  // namespace cohort::planner
