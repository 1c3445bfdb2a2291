// The pieces of apps/training.cpp that the single- and the multi-process paths share: the
// per-step bookkeeping (progress line, metrics file, throughput), the per-rank task times for
// the cost model and the observations the refit takes from them, and one run on the actor
// runtime. Internal to apps/.
//
//   loop_state loop(job);                                   // progress + metrics of one run
//   task_totals totals;
//   auto r = train_runtime(job, plan, choice, caf_args, loop, totals, {});
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "actors/runtime.hpp"
#include "apps/planning.hpp"
#include "apps/training.hpp"
#include "planner/refit.hpp"

namespace cohort::apps {

/// One run's progress line, metrics file, first and final loss and throughput.
struct loop_state {
  const training_job& job;
  progress_line progress;
  metrics_file metrics;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), timed_start = start;
  training_result out;

  bool quiet = false;  // another process reports

  explicit loop_state(const training_job& j) : job(j), progress(j.app, j.steps) {}

  void on_step(std::int64_t step, float loss, json extra = json::object()) {  // step is 0-based
    if (step == 0) out.first_loss = loss;
    if (step + 1 == job.warmup + 1) timed_start = std::chrono::steady_clock::now();
    out.final_loss = loss;
    double elapsed = seconds_since(start);
    double rate = static_cast<double>((step + 1) * job.batch * job.items_per_sample) / elapsed;
    if (quiet) return;
    progress.update(step + 1, loss, rate, job.rate_unit);
    json rec = {{"step", step + 1}, {"loss", loss}, {"lr", learning_rate(job.optimizer)}, {"time", elapsed}};
    rec[std::string(job.rate_unit) == "tokens/s" ? "tokens_per_s" : "samples_per_s"] = rate;
    for (auto& [k, v] : extra.items()) rec[k] = v;
    metrics.write(rec);
  }

  void finish() {
    if (!quiet) progress.finish();
    std::int64_t timed = job.steps > job.warmup ? job.steps - job.warmup : job.steps;
    if (job.steps <= job.warmup) timed_start = start;
    out.items_per_s = static_cast<double>(timed * job.batch * job.items_per_sample) / seconds_since(timed_start);
  }
};

// Per rank, the seconds of forward, backward and update tasks summed over the timed steps,
// and each timed step's update (the gradient reduction) on its own: a reduction's time is
// that of the last replica to arrive, the one that did not wait for the others, which only
// a step-by-step minimum over the replicas finds (which replica arrives last changes from
// step to step).
struct task_totals {
  std::vector<std::array<double, 3>> per_rank;
  std::vector<std::vector<double>> update_per_step;  // [rank][timed step], the first max_recorded_steps
  static constexpr std::int64_t max_recorded_steps = 4096;
  std::vector<double> step_seconds;
  std::int64_t steps = 0;
};

/// What the refit sets against the prediction, one observation per stage: forward and
/// backward seconds per step averaged over the stage's ranks (ranks in plan order); the
/// update (the gradient reduction) in each step from the replica that waited least in it, the
/// last to arrive, whose time is the reduction itself rather than the wait for slower
/// replicas, averaged over the recorded steps. Stages without a rank are left out.
std::vector<planner::task_observation> stage_observations(const planner::parallel_plan& plan,
                                                          const std::vector<planner::stage_prediction>& predicted,
                                                          const task_totals& t);

/// Trains `job` under `choice` on the actor runtime; `on_totals` sees the task times after
/// every timed step; `customize` may change the runtime's options last (multi-process hooks).
result<training_result> train_runtime(const training_job& job, const plan_options& p, const plan_choice& choice,
                                      const std::vector<std::string>& caf_arguments, loop_state& loop,
                                      task_totals& totals, const std::function<void(const task_totals&)>& on_totals,
                                      const std::function<void(actors::run_options&)>& customize = {});

/// Predicted against measured step time (the median timed step) and the refit of the cost
/// model from the task times, as the summary's "prediction"; saved with the profile when
/// p.refit (`first`: counted as a new refit in the profile, else replacing the run's last).
json compare_and_refit(const plan_choice& choice, planning_setup& setup, const plan_options& p, const task_totals& t,
                       bool first);

/// One process of a multi-process job (apps/training_processes.cpp).
result<training_result> train_processes(const training_job& job, const plan_options& p,
                                        const std::vector<std::string>& caf_arguments);

}  // namespace cohort::apps
