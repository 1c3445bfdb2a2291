// The refit policy of a run: observations per stage, predicted against measured, the refit
// saved with the profile.
#include "planner/run_refit.hpp"

#include "planner/rank_layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace cohort::planner {

using json = nlohmann::json;

void task_totals::add_step(const std::vector<task_seconds>& ranks, double step_s) {
  per_rank.resize(std::max(per_rank.size(), ranks.size()));
  update_per_step.resize(per_rank.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    per_rank[r] += ranks[r];
    if (steps < max_recorded_steps) {
      update_per_step[r].resize(static_cast<std::size_t>(steps), 0.0);
      update_per_step[r].push_back(ranks[r].update_s);
    }
  }
  step_seconds.push_back(step_s);
  ++steps;
}

std::vector<task_observation> stage_observations(const parallel_plan& plan,
                                                 const std::vector<stage_prediction>& predicted, const task_totals& t) {
  std::vector<task_observation> obs;
  if (t.steps <= 0) return obs;
  const auto stages = predicted.size();
  std::size_t timed = static_cast<std::size_t>(t.steps);  // the steps every rank's updates are known for
  for (std::size_t r = 0; r < t.per_rank.size(); ++r)
    timed = std::min(timed, r < t.update_per_step.size() ? t.update_per_step[r].size() : 0);
  std::vector<task_seconds> per_stage(stages);
  std::vector<std::vector<double>> least_update(
      stages, std::vector<double>(std::max<std::size_t>(timed, 1), std::numeric_limits<double>::infinity()));
  std::vector<int> count(stages, 0);
  const double n = static_cast<double>(t.steps);
  for (std::size_t r = 0; r < t.per_rank.size(); ++r) {
    const auto stage = static_cast<std::size_t>(rank_layout(plan).place_of(static_cast<int>(r)).stage);
    if (stage >= stages) continue;
    per_stage[stage].forward_s += t.per_rank[r].forward_s / n;
    per_stage[stage].backward_s += t.per_rank[r].backward_s / n;
    if (timed == 0)  // no step-by-step record: the replica that waited least over the run
      least_update[stage][0] = std::min(least_update[stage][0], t.per_rank[r].update_s / n);
    for (std::size_t i = 0; i < timed; ++i)
      least_update[stage][i] = std::min(least_update[stage][i], t.update_per_step[r][i]);
    ++count[stage];
  }
  for (std::size_t s = 0; s < stages; ++s) {
    if (count[s] == 0) continue;
    per_stage[s].forward_s /= count[s];
    per_stage[s].backward_s /= count[s];
    for (double u : least_update[s]) per_stage[s].update_s += u / static_cast<double>(least_update[s].size());
    obs.push_back({predicted[s], per_stage[s]});
  }
  return obs;
}

// What the refit tasks do not explain is the runtime's overhead (see below).
json compare_and_refit(const plan_choice& choice, planning_setup& setup, bool save, const task_totals& t, bool first) {
  json out = json::object();
  if (!choice.predicted || t.steps == 0) return out;
  std::vector<double> steps = t.step_seconds;
  std::sort(steps.begin(), steps.end());
  const double measured = steps[steps.size() / 2];
  const double predicted = choice.predicted->step_s;
  out["predicted_step_s"] = predicted;
  out["measured_step_s"] = measured;
  out["error_pct"] = 100.0 * (predicted - measured) / measured;
  const auto& plan = choice.plan;
  const auto obs = stage_observations(plan, choice.predicted->stages, t);
  auto fit = refit(obs, setup.search.eff);  // the constants the prediction was made with
  if (!fit.changed) return out;
  // What the refit tasks do not explain (messages, waking threads, the commit) is the
  // runtime's overhead: the calibrated overhead terms are scaled by one factor so that the
  // refit model predicts the measured step (their proportions stay what calibration found;
  // without calibrated terms the whole excess becomes per-step overhead).
  if (!setup.cluster) {
    search_options again = setup.search;
    again.topo = local_topology_of(setup, plan.ranks(), setup.threads);
    again.eff = fit.eff;
    auto with = evaluate_plan(*setup.analysis, plan, again, choice.predicted->cuts, choice.predicted->recompute);
    again.eff = fit.eff.without_runtime_overhead();
    auto bare = evaluate_plan(*setup.analysis, plan, again, choice.predicted->cuts, choice.predicted->recompute);
    if (bare && with) {
      const double excess = std::max(0.0, measured - bare->step_s), modelled = with->step_s - bare->step_s;
      if (modelled > 0) {
        const double k = excess / modelled;
        fit.eff.per_task_seconds *= k, fit.eff.per_step_seconds *= k, fit.eff.per_rank_seconds *= k;
        out["overhead_factor"] = k;
      } else {
        fit.eff.per_step_seconds = excess;
      }
    }
  }
  auto to_json = [](const efficiency& e) {
    return json{{"gemm", e.gemm},
                {"memory", e.memory},
                {"link", e.link},
                {"per_op_seconds", e.per_op_seconds},
                {"per_task_seconds", e.per_task_seconds},
                {"per_step_seconds", e.per_step_seconds},
                {"per_rank_seconds", e.per_rank_seconds}};
  };
  out["refit"] = {
      {"compute_factor", fit.compute_factor}, {"reduce_factor", fit.reduce_factor}, {"efficiency", to_json(fit.eff)}};
  // a fraction of the peak above 1 says the peak is wrong (never calibrated), not that the
  // machine beat it: refused, and the profile keeps what it had
  if (auto problem = efficiency_problem(fit.eff); !problem.empty()) {
    out["refit"]["refused"] = problem + "; --cluster.calibrate measures the peak";
    if (save && !setup.cluster && !setup.refit_refusal_reported) {
      setup.refit_refusal_reported = true;  // the early refit and the final one: said once
      std::fprintf(stderr, "warning: the refit is not saved to %s: %s; --cluster.calibrate measures the peak\n",
                   setup.profile_path.c_str(), problem.c_str());
    }
    return out;
  }
  if (save && !setup.cluster) {
    // the profile keeps a running mean over its refits (one run can catch a slow minute);
    // blended with the constants this run was planned with, so a run's later refit replaces its first
    const int n = std::max(1, first ? setup.profile.refits + 1 : setup.profile.refits);
    const double weight = refit_weight(n);
    setup.profile.eff = blend(setup.search.eff, fit.eff, weight);
    out["refit"]["weight"] = weight;
    out["refit"]["saved_efficiency"] = to_json(setup.profile.eff);
    if (first) ++setup.profile.refits;
    if (auto st = save_profile(setup.profile_path, setup.profile); !st)
      std::fprintf(stderr, "warning: %s\n", st.error().message.c_str());
    else
      out["profile"] = setup.profile_path;
  }
  return out;
}

namespace {

/// The factor in [min_link_slowdown, max_link_slowdown] at which `quantity` (predicted, growing
/// with the factor) equals `measured`: bisection on its logarithm, clamped at the ends; nullopt
/// when the quantity does not depend on the factor or cannot be predicted.
template <class Quantity>
std::optional<double> solve_factor(Quantity quantity, double measured) {
  const std::optional<double> lowest = quantity(min_link_slowdown), highest = quantity(max_link_slowdown);
  if (!lowest || !highest || !(*highest > *lowest)) return std::nullopt;
  if (measured <= *lowest) return min_link_slowdown;
  if (measured >= *highest) return max_link_slowdown;
  double lo = std::log(min_link_slowdown), hi = std::log(max_link_slowdown);
  for (int i = 0; i < 32; ++i) {
    const double mid = (lo + hi) / 2;
    const auto at = quantity(std::exp(mid));
    if (!at) return std::nullopt;
    (*at < measured ? lo : hi) = mid;
  }
  return std::exp((lo + hi) / 2);
}

/// One more run's factor `x` into a geometric running mean over `runs` runs (counted here).
void fold_into(double& mean, int& runs, double x) {
  const double w = refit_weight(++runs);
  mean = std::exp((1 - w) * std::log(mean) + w * std::log(x));
}

}  // namespace

json refit_between_processes(const plan_choice& choice, planning_setup& setup, const task_totals& t, bool save) {
  json out = json::object();
  if (setup.cluster || setup.processes < 2 || !choice.predicted || t.step_seconds.empty()) return out;
  std::vector<double> steps = t.step_seconds;
  std::sort(steps.begin(), steps.end());
  const double measured = steps[steps.size() / 2];
  process_link& link = setup.profile.process_links[setup.data_plane];
  if (link.cost.bandwidth_bytes_per_s <= 0) link.cost = unmeasured_process_link;  // what the prediction used
  out["plane"] = setup.data_plane;
  out["processes"] = setup.processes;
  // The run's compute first (its forward and backward tasks run the same kernels as in one
  // process); the slowdown is then what the measured step leaves. Where tensor-parallel
  // collectives between the processes run inside the tasks, the tasks cannot tell slow compute
  // from a slow link: their excess is taken as compute, and the slowdown explains the rest.
  search_options o = setup.search;
  o.topo = local_topology_of(setup, choice.plan.ranks(), setup.threads);
  efficiency compute = setup.search.eff;
  refit_result fit = refit(stage_observations(choice.plan, choice.predicted->stages, t), compute);
  fit.eff.link = compute.link;  // the reduction's fit: the slowdown's to explain, not kept
  if (fit.changed && efficiency_problem(fit.eff).empty()) {
    compute.gemm = fit.eff.gemm;
    compute.memory = fit.eff.memory;
    compute.gemm_by_flops = fit.eff.gemm_by_flops;
    compute.per_op_seconds = fit.eff.per_op_seconds;
    // into the profile's running mean, as a run in one process would
    setup.profile.eff = blend(setup.search.eff, compute, refit_weight(setup.profile.refits + 1));
    ++setup.profile.refits;
    out["compute_factor"] = fit.compute_factor;
  }
  o.eff = compute;
  auto predict = [&](double latency, double bandwidth) {
    o.topo.inter = slowed(link.cost, latency, bandwidth);
    return evaluate_plan(*setup.analysis, choice.plan, o, choice.predicted->cuts, choice.predicted->recompute);
  };
  if (auto calibrated = predict(1, 1)) out["excess_s"] = measured - calibrated->step_s;  // over the link as calibrated
  // The data-parallel reduction's tasks time the bulk of the bytes between the processes: the
  // bandwidth factor is solved from them (where they cross processes), the latency factor from
  // what the step leaves, and the two again in turn.
  // this count's kept factors to start from (no entry made yet: a run that refits nothing must
  // not hide a smaller count's factors behind a default one)
  const auto kept = link.by_processes.find(setup.processes);
  const job_link start = kept != link.by_processes.end() ? kept->second : job_link{};
  double latency = start.slowdown, bandwidth = start.bandwidth_slowdown;
  std::optional<double> run_latency, run_bandwidth;
  auto reduction_at = [&](double factor) -> std::optional<double> {
    auto p = predict(latency, factor);
    if (!p) return std::nullopt;
    double predicted = 0;
    for (const auto& stage : stage_observations(choice.plan, p->stages, t)) predicted += stage.predicted.update_comm_s;
    return predicted;
  };
  double measured_reduction = 0;
  for (const auto& stage : stage_observations(choice.plan, choice.predicted->stages, t))
    if (stage.predicted.update_comm_s > 0) measured_reduction += stage.measured.update_s;
  for (int round = 0; round < 4; ++round) {  // each round's change is the other's small correction
    if (measured_reduction > 0)
      if ((run_bandwidth = solve_factor(reduction_at, measured_reduction))) bandwidth = *run_bandwidth;
    run_latency = solve_factor(
        [&](double factor) -> std::optional<double> {
          auto p = predict(factor, bandwidth);
          if (!p) return std::nullopt;
          return p->step_s;
        },
        measured);
    if (!run_latency) break;
    latency = *run_latency;
  }
  if (!run_latency) {
    out["note"] = "the plan's step does not depend on the link between processes: nothing to refit";
    return out;
  }
  job_link& job = link.by_processes[setup.processes];
  fold_into(job.slowdown, job.refits, *run_latency);
  out["run_slowdown"] = *run_latency;
  out["slowdown"] = job.slowdown;
  out["refits"] = job.refits;
  if (run_bandwidth) {
    fold_into(job.bandwidth_slowdown, job.bandwidth_refits, *run_bandwidth);
    out["run_bandwidth_slowdown"] = *run_bandwidth;
    out["bandwidth_slowdown"] = job.bandwidth_slowdown;
    out["bandwidth_refits"] = job.bandwidth_refits;
  }
  if (save) {
    if (auto st = save_profile(setup.profile_path, setup.profile); !st)
      std::fprintf(stderr, "warning: %s\n", st.error().message.c_str());
    else
      out["profile"] = setup.profile_path;
  }
  return out;
}

online_refit::online_refit(plan_choice choice, std::shared_ptr<planning_setup> setup, bool save, std::int64_t warmup,
                           std::int64_t steps, std::int64_t early_steps)
    : choice_(std::move(choice)),
      setup_(std::move(setup)),
      save_(save),
      warmup_(warmup),
      steps_(steps),
      early_steps_(early_steps) {}

std::optional<json> online_refit::observe(std::int64_t step, int layout, const std::vector<task_seconds>& ranks,
                                          double step_s) {
  if (layout != 0 || (step < warmup_ && steps_ > warmup_)) return std::nullopt;
  totals_.add_step(ranks, step_s);
  if (totals_.steps != early_steps_ || totals_.steps == steps_ - warmup_ || !setup_) return std::nullopt;
  json early = compare_and_refit(choice_, *setup_, save_, totals_, !saved_);
  if (!early.contains("refit")) return std::nullopt;
  saved_ = saved_ || early.contains("profile");
  return early;
}

json online_refit::finish() {
  if (!setup_) return json::object();
  return compare_and_refit(choice_, *setup_, save_, totals_, !saved_);
}

}  // namespace cohort::planner
