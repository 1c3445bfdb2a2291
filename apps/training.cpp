// Serial or actor-runtime training with one progress/metrics path.
#include "apps/training.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>

#include "actors/runtime.hpp"
#include "kernels/trainer.hpp"

namespace cohort::apps {

void plan_options::add_to(option_set& opts) {
  opts.add("plan.mode", mode, "serial (the reference trainer) or manual (the actor runtime with this plan)")
      .add("plan.dp", dp, "data-parallel replicas")
      .add("plan.tp", tp, "tensor-parallel ranks per stage")
      .add("plan.pp", pp, "pipeline stages")
      .add("plan.micro-batches", micro_batches, "micro-batches per step (gradient accumulation)")
      .add("plan.schedule", schedule, "gpipe or 1f1b")
      .add("plan.shard-params", shard_params, "shard optimizer state over dp (ZeRO)")
      .add("plan.cuts", cuts, "pipeline cuts as forward-node indices (empty: balanced)")
      .add("fault.max-restarts", max_restarts, "redo a failed step at most this many times")
      .add("fault.timeout-ms", timeout_ms, "the longest any wait inside a step may take")
      .add("fault.inject-rank", inject_rank, "test hook: this worker rank fails ... (-1: off)")
      .add("fault.inject-step", inject_step, "... at this step ...")
      .add("fault.inject-task", inject_task, "... before this task of its schedule");
}

namespace {

struct loop_state {
  const training_job& job;
  progress_line progress;
  metrics_file metrics;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), timed_start = start;
  training_result out;

  explicit loop_state(const training_job& j) : job(j), progress(j.app, j.steps) {}

  void on_step(std::int64_t step, float loss, json extra = json::object()) {  // step is 0-based
    if (step == 0) out.first_loss = loss;
    if (step + 1 == job.warmup + 1) timed_start = std::chrono::steady_clock::now();
    out.final_loss = loss;
    double elapsed = seconds_since(start);
    double rate = static_cast<double>((step + 1) * job.batch * job.items_per_sample) / elapsed;
    progress.update(step + 1, loss, rate, job.rate_unit);
    json rec = {{"step", step + 1}, {"loss", loss}, {"lr", learning_rate(job.optimizer)}, {"time", elapsed}};
    rec[std::string(job.rate_unit) == "tokens/s" ? "tokens_per_s" : "samples_per_s"] = rate;
    for (auto& [k, v] : extra.items()) rec[k] = v;
    metrics.write(rec);
  }

  void finish() {
    progress.finish();
    std::int64_t timed = job.steps > job.warmup ? job.steps - job.warmup : job.steps;
    if (job.steps <= job.warmup) timed_start = start;
    out.items_per_s = static_cast<double>(timed * job.batch * job.items_per_sample) / seconds_since(timed_start);
  }
};

result<training_result> train_serial(const training_job& job, loop_state& loop) {
  graph g;
  var loss = job.model(g, job.batch);
  if (auto st = g.check(); !st) return st.error();
  auto tr = kernels::serial_trainer::create(g, loss, {.optimizer = job.optimizer, .seed = job.seed, .threads = job.threads});
  if (!tr) return tr.error();
  if (!job.note.empty()) std::fprintf(stderr, "%s\n", job.note.c_str());
  for (std::int64_t step = 0; step < job.steps; ++step) {
    for (auto& [name, t] : job.data(step)) (*tr)->input(name).copy_from(t);
    auto l = (*tr)->step();
    if (!l) return make_error(l.error().code, "step " + std::to_string(step + 1) + ": " + l.error().message);
    loop.on_step(step, *l);
  }
  loop.finish();
  loop.out.parameters = (*tr)->parameters();
  loop.out.plan = {{"mode", "serial"}, {"ranks", 1}};
  return std::move(loop.out);
}

result<training_result> train_runtime(const training_job& job, const plan_options& p,
                                      const std::vector<std::string>& caf_arguments, loop_state& loop) {
  auto schedule = planner::parse_schedule(p.schedule);
  if (!schedule) return schedule.error();
  actors::run_options o;
  o.plan = {.dp = static_cast<int>(p.dp), .tp = static_cast<int>(p.tp), .pp = static_cast<int>(p.pp),
            .micro_batches = static_cast<int>(p.micro_batches), .schedule = *schedule, .shard_params = p.shard_params};
  o.batch = job.batch;
  o.steps = job.steps;
  o.optimizer = job.optimizer;
  o.seed = job.seed;
  o.threads = job.threads;
  o.timeout = std::chrono::milliseconds(p.timeout_ms);
  o.max_restarts = static_cast<int>(p.max_restarts);
  for (auto c : p.cuts) o.stage_cuts.push_back(static_cast<std::size_t>(c));
  o.inject = {static_cast<int>(p.inject_rank), p.inject_step, static_cast<std::size_t>(p.inject_task)};
  o.on_step = [&](const actors::step_metrics& m) {
    // per-step timings for the cost model: the slowest worker's task seconds and the step's
    double busiest = 0;
    json tasks = json::array();
    for (const auto& t : m.task_seconds) {
      busiest = std::max(busiest, t[0] + t[1] + t[2]);
      tasks.push_back({t[0], t[1], t[2]});
    }
    loop.on_step(m.step, static_cast<float>(m.loss),
                 {{"step_s", m.seconds}, {"busiest_worker_s", busiest}, {"task_s", tasks}, {"generation", m.generation}});
  };
  o.on_start = [&] {
    if (!job.note.empty()) std::fprintf(stderr, "%s\n", job.note.c_str());
  };

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
  loop.out.plan = {{"mode", "manual"}, {"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp}, {"micro_batches", p.micro_batches},
                   {"schedule", p.schedule}, {"shard_params", p.shard_params}, {"ranks", o.plan.ranks()}};
  return std::move(loop.out);
}

}  // namespace

result<training_result> train(const training_job& job, const plan_options& plan,
                              const std::vector<std::string>& caf_arguments) {
  if (plan.mode != "serial" && plan.mode != "manual")
    return make_error(errc::invalid_argument, "--plan.mode must be serial or manual, got '" + plan.mode + "'");
  if (auto s = planner::parse_schedule(plan.schedule); !s) return s.error();
  loop_state loop(job);
  if (auto st = loop.metrics.open(job.metrics_path); !st) return st.error();
  if (plan.mode == "serial") return train_serial(job, loop);
  return train_runtime(job, plan, caf_arguments, loop);
}

}  // namespace cohort::apps
