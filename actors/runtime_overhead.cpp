// The runtime's overhead terms fitted to a tiny model's step times under a few plans.
#include "actors/runtime_overhead.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <array>
#include <limits>

#include "actors/actor_system.hpp"
#include "actors/runtime.hpp"
#include "graph/dsl.hpp"
#include "graph/layers.hpp"
#include "planner/analysis.hpp"
#include "planner/refit.hpp"
#include "planner/search.hpp"

namespace cohort::actors {
namespace {

constexpr std::int64_t tiny_batch = 16;
const std::vector<std::int64_t> tiny_dims{16, 8, 8, 4};
constexpr std::int64_t timed_steps = 120, warmup_steps = 20;

// 16 -> 8 -> 8 -> 4, ReLU between, softmax cross-entropy (the mlp app's model, with its
// Megatron pair fc1 column, fc2 row): almost no arithmetic.
var tiny_model(graph& g, std::int64_t rows) {
  var x = g.input("x", {rows, tiny_dims[0]});
  var y = g.input("y", {rows}, dtype::i32);
  var h = relu(linear(x, tiny_dims[1], "fc1", true, tp_style::column));
  h = relu(linear(h, tiny_dims[2], "fc2", true, tp_style::row));
  return softmax_cross_entropy(linear(h, tiny_dims[3], "fc3"), y);
}

// Median step seconds of the tiny model under `plan` on the runtime.
result<double> measured_step_seconds(const planner::parallel_plan& plan, const std::vector<std::size_t>& cuts,
                                     int threads) {
  std::map<std::string, tensor> batch{{"x", tensor::full({tiny_batch, tiny_dims.front()}, 0.5f)},
                                      {"y", tensor::zeros({tiny_batch}, dtype::i32)}};
  actors::run_options o;
  o.plan = plan;
  o.batch = tiny_batch;
  o.steps = timed_steps + warmup_steps;
  o.optimizer = sgd_config{.lr = 0.01f};
  o.threads = threads;
  o.timeout = std::chrono::milliseconds(10000);
  o.max_restarts = 0;
  o.stage_cuts = cuts;
  o.collect_parameters = false;
  std::vector<double> seconds;
  o.on_step = [&](const actors::step_metrics& m) {
    if (m.step >= warmup_steps) seconds.push_back(m.seconds);
  };
  auto cfg = system_config(threads, {});
  if (!cfg) return cfg.error();
  caf::actor_system sys{**cfg};
  auto r = actors::train(
      sys, tiny_model, [&](std::int64_t) -> result<std::map<std::string, tensor>> { return batch; }, o);
  if (!r) return r.error();
  if (seconds.empty()) return make_error(errc::unsupported, "runtime calibration: no timed step");
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

result<runtime_overhead> measure_runtime_overhead(const planner::machine_profile& p, int threads) {
  threads = std::max(1, threads);
  auto analysis = planner::analyze_model(tiny_model, 1);
  if (!analysis) return analysis.error();
  // one rank; two ranks three ways; a deep pipeline; and, where ranks outnumber the threads, four
  std::vector<planner::parallel_plan> plans = {{.dp = 1},
                                               {.dp = 2},
                                               {.tp = 2},
                                               {.pp = 2},
                                               {.pp = 2, .micro_batches = 8},
                                               {.dp = 4},
                                               {.pp = 4, .micro_batches = 4}};
  std::vector<std::array<double, 3>> rows;  // coefficients of (per task, per step, per rank)
  std::vector<double> excess;               // measured - the simulation without overheads
  std::vector<double> base;
  runtime_overhead out;
  constexpr double probe_task_s = 1e-4;
  for (const auto& plan : plans) {
    planner::search_options o;
    o.batch = tiny_batch;
    o.topo = planner::local_topology(p, plan.ranks(), threads);
    o.eff = p.eff.without_runtime_overhead();
    auto without = planner::evaluate_plan(**analysis, plan, o);
    if (!without) return without.error();
    o.eff.per_task_seconds = probe_task_s;
    auto with = planner::evaluate_plan(**analysis, plan, o, without->cuts);
    if (!with) return with.error();
    // the faster of two runs' medians: a neighbour's burst on a shared machine slows a run, never speeds it
    double measured = std::numeric_limits<double>::infinity();
    for (int pass = 0; pass < 2; ++pass) {
      auto once = measured_step_seconds(plan, without->cuts, threads);
      if (!once)
        return make_error(once.error().code,
                          "runtime calibration, " + planner::describe(plan) + ": " + once.error().message);
      measured = std::min(measured, *once);
    }
    rows.push_back({(with->step_s - without->step_s) / probe_task_s, 1.0, static_cast<double>(plan.ranks() - 1)});
    excess.push_back(measured - without->step_s);
    base.push_back(without->step_s);
    out.samples.push_back({planner::describe(plan), measured, 0});
  }
  const std::array<double, 3> best = planner::fit_nonnegative(rows, excess);
  out.per_task_s = best[0];
  out.per_step_s = best[1];
  out.per_rank_s = best[2];
  for (std::size_t i = 0; i < rows.size(); ++i)
    out.samples[i].predicted_s = base[i] + rows[i][0] * best[0] + rows[i][1] * best[1] + rows[i][2] * best[2];
  return out;
}

}  // namespace cohort::actors
