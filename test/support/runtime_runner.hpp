// Runs a model the serial way (the reference trainer) or on the real actor runtime (the
// coordinator, its planner actor, workers, parameter and data actors, in-process fabric),
// returning the losses: how the equivalence and transition suites compare a plan, or a run
// that changes its plan, with the serial program.
#pragma once

#include <caf/all.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "actors/actor_system.hpp"
#include "actors/runtime.hpp"
#include "kernels/trainer.hpp"

namespace cohort::test {

/// The global batch of a step, by input name ([B, ...] each).
using batch_fn = std::function<std::map<std::string, tensor>(std::int64_t step)>;

inline std::vector<float> serial_losses(const actors::model_fn& model, std::int64_t batch, int steps,
                                        const optimizer_config& opt, std::uint64_t seed, const batch_fn& data,
                                        bool sparse_tables = false) {
  graph g;
  var loss = model(g, batch);
  auto tr = kernels::serial_trainer::create(
      g, loss, {.optimizer = opt, .seed = seed, .threads = 1, .sparse_tables = sparse_tables});
  REQUIRE_MESSAGE(tr.ok(), tr.error().message);
  std::vector<float> out;
  for (int s = 0; s < steps; ++s) {
    for (auto& [name, t] : data(s)) (*tr)->input(name).copy_from(t);
    auto l = (*tr)->step();
    REQUIRE_MESSAGE(l.ok(), l.error().message);
    out.push_back(*l);
  }
  return out;
}

/// The actor system configuration of the runtime suites (two scheduler threads, as a 2-core
/// machine runs). Each run makes its own system from it: CAF 0.17's actor_system must not be
/// destroyed at exit, after main.
inline caf::actor_system_config& test_config() {
  static auto cfg = [] {
    auto c = actors::system_config(2, {});
    REQUIRE(c.ok());
    return std::move(*c);
  }();
  return *cfg;
}

struct runtime_run {
  planner::parallel_plan plan;
  std::vector<std::size_t> cuts;             // empty: the planner's
  std::vector<actors::plan_change> changes;  // plan transitions
  std::shared_ptr<planner::planning_setup> planning;
  bool sparse_tables = false;            // embedding tables with sparse gradients (compile_options)
  actors::table_exchange exchange = {};  // how dp replicas share the tables' updates (sync, geo)
  bool collect_parameters = false;       // the trained model in the summary (geo: replicas checked)
  std::function<void(const actors::step_metrics&)> on_step = nullptr;  // each step as the coordinator reports it
};

/// The run's summary on the actor runtime (REQUIREs that it succeeded).
inline actors::run_summary runtime_summary(const actors::model_fn& model, const runtime_run& run, std::int64_t batch,
                                           int steps, const optimizer_config& opt, std::uint64_t seed,
                                           const batch_fn& data) {
  actors::run_options o;
  o.plan = run.plan;
  o.stage_cuts = run.cuts;
  o.batch = batch;
  o.steps = steps;
  o.optimizer = opt;
  o.seed = seed;
  o.threads = 1;
  o.timeout = std::chrono::milliseconds(30000);
  o.changes = run.changes;
  o.planning = run.planning;
  o.collect_parameters = run.collect_parameters;
  o.compile.sparse_tables = run.sparse_tables;
  o.exchange = run.exchange;
  o.on_step = run.on_step;
  caf::actor_system sys{test_config()};
  auto r = actors::train(
      sys, model, [data](std::int64_t s) -> result<std::map<std::string, tensor>> { return data(s); }, o);
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  return std::move(*r);
}

inline std::vector<float> runtime_losses(const actors::model_fn& model, const runtime_run& run, std::int64_t batch,
                                         int steps, const optimizer_config& opt, std::uint64_t seed,
                                         const batch_fn& data) {
  auto s = runtime_summary(model, run, batch, steps, opt, seed, data);
  return std::vector<float>(s.losses.begin(), s.losses.end());
}

/// The suites' tolerance: every plan computes the same sums in another order (a few ulps per
/// step, fed back through 30 optimizer steps: ~1e-6); a wrong plan is off by 1e-2 after a step or two.
constexpr double loss_tolerance = 1e-5;

/// Fails unless `dist` equals `serial` step by step within loss_tolerance (relative).
inline void check_same_losses(const std::vector<float>& serial, const std::vector<float>& dist,
                              const std::string& plan) {
  CAPTURE(plan);
  REQUIRE(serial.size() == dist.size());
  double worst = 0;
  for (std::size_t i = 0; i < serial.size(); ++i)
    worst = std::max(worst,
                     std::fabs(static_cast<double>(dist[i]) - serial[i]) / std::fabs(static_cast<double>(serial[i])));
  MESSAGE(plan << ": max relative loss difference over " << serial.size() << " steps " << worst << " (first "
               << serial.front() << ", last " << serial.back() << ")");
  CHECK(worst <= loss_tolerance);
}

}  // namespace cohort::test
