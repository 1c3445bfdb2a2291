// One run on the actor runtime, with the progress/metrics bookkeeping of apps/training_loop.hpp.
#include "apps/training_loop.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace cohort::apps {

result<training_result> train_runtime(const training_job& job, const plan_options& p, const plan_choice& choice,
                                      const std::vector<std::string>& caf_arguments, loop_state& loop,
                                      task_totals& totals, const std::function<void(const task_totals&)>& on_totals,
                                      const std::function<void(actors::run_options&)>& customize) {
  actors::run_options o;
  o.plan = choice.plan;
  o.batch = job.batch;
  o.steps = job.steps;
  o.optimizer = job.optimizer;
  o.seed = job.seed;
  o.threads = job.threads;
  o.timeout = std::chrono::milliseconds(p.timeout_ms);
  o.max_restarts = static_cast<int>(p.max_restarts);
  o.stage_cuts = choice.cuts;
  o.inject = {static_cast<int>(p.inject_rank), p.inject_step, static_cast<std::size_t>(p.inject_task)};
  o.on_step = [&](const actors::step_metrics& m) {
    // per-step timings for the cost model: the slowest worker's task seconds and the step's
    double busiest = 0;
    json tasks = json::array();
    for (const auto& t : m.task_seconds) {
      busiest = std::max(busiest, t[0] + t[1] + t[2]);
      tasks.push_back({t[0], t[1], t[2]});
    }
    if (m.step >= job.warmup || job.steps <= job.warmup) {
      totals.per_rank.resize(std::max(totals.per_rank.size(), m.task_seconds.size()));
      totals.update_per_step.resize(totals.per_rank.size());
      for (std::size_t r = 0; r < m.task_seconds.size(); ++r) {
        for (std::size_t k = 0; k < 3; ++k) totals.per_rank[r][k] += m.task_seconds[r][k];
        if (totals.steps < task_totals::max_recorded_steps) {
          totals.update_per_step[r].resize(static_cast<std::size_t>(totals.steps), 0.0);
          totals.update_per_step[r].push_back(m.task_seconds[r][2]);
        }
      }
      totals.step_seconds.push_back(m.seconds);
      ++totals.steps;
      if (on_totals) on_totals(totals);
    }
    loop.on_step(m.step, static_cast<float>(m.loss),
                 {{"step_s", m.seconds}, {"busiest_worker_s", busiest}, {"task_s", tasks}, {"generation", m.generation}});
  };
  o.on_start = [&] {
    if (!job.note.empty() && !loop.quiet) std::fprintf(stderr, "%s\n", job.note.c_str());
  };
  if (customize) customize(o);

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::max(1, job.threads));
  // Workers compute on their own threads; the scheduler only runs the light coordinator,
  // data and parameter actors. Work stealing's polling would take cores from the workers;
  // the sharing policy sleeps when idle. Both can be overridden with --scheduler.*.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  std::vector<std::string> args = caf_arguments;
  if (auto err = cfg.parse(args); err)
    return make_error(errc::invalid_argument, "CAF options: " + caf::to_string(err));
  caf::actor_system sys{cfg};
  auto data = job.data;
  auto r = actors::train(sys, job.model,
                         [data](std::int64_t step) -> result<std::map<std::string, tensor>> { return data(step); }, o);
  if (!r) return r.error();
  loop.finish();
  loop.out.restarts = r->restarts;
  loop.out.parameters = std::move(r->parameters);
  loop.out.plan = choice.to_json();
  return std::move(loop.out);
}

std::vector<planner::task_observation> stage_observations(const planner::parallel_plan& plan,
                                                          const std::vector<planner::stage_prediction>& predicted,
                                                          const task_totals& t) {
  std::vector<planner::task_observation> obs;
  if (t.steps <= 0) return obs;
  const auto stages = predicted.size();
  std::size_t timed = static_cast<std::size_t>(t.steps);  // the steps every rank's updates are known for
  for (std::size_t r = 0; r < t.per_rank.size(); ++r)
    timed = std::min(timed, r < t.update_per_step.size() ? t.update_per_step[r].size() : 0);
  std::vector<std::array<double, 3>> per_stage(stages, {0.0, 0.0, 0.0});
  std::vector<std::vector<double>> least_update(stages, std::vector<double>(std::max<std::size_t>(timed, 1),
                                                                            std::numeric_limits<double>::infinity()));
  std::vector<int> count(stages, 0);
  const double n = static_cast<double>(t.steps);
  for (std::size_t r = 0; r < t.per_rank.size(); ++r) {
    const auto stage = static_cast<std::size_t>((static_cast<int>(r) / plan.tp) % plan.pp);
    if (stage >= stages) continue;
    per_stage[stage][0] += t.per_rank[r][0] / n;
    per_stage[stage][1] += t.per_rank[r][1] / n;
    if (timed == 0)  // no step-by-step record: the replica that waited least over the run
      least_update[stage][0] = std::min(least_update[stage][0], t.per_rank[r][2] / n);
    for (std::size_t i = 0; i < timed; ++i) least_update[stage][i] = std::min(least_update[stage][i], t.update_per_step[r][i]);
    ++count[stage];
  }
  for (std::size_t s = 0; s < stages; ++s) {
    if (count[s] == 0) continue;
    per_stage[s][0] /= count[s];
    per_stage[s][1] /= count[s];
    for (double u : least_update[s]) per_stage[s][2] += u / static_cast<double>(least_update[s].size());
    obs.push_back({predicted[s], per_stage[s]});
  }
  return obs;
}

}  // namespace cohort::apps
