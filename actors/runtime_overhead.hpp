// What the actor runtime itself costs on this machine, apart from the model's arithmetic:
// a tiny MLP (almost no compute) is trained under a few plans on the runtime, and the
// median step times are fitted to the cost model's three overhead terms
// (planner::efficiency::per_task_seconds, per_step_seconds, per_rank_seconds) by least
// squares, each plan's coefficients taken from the planner's own simulation — so the terms
// mean in the prediction exactly what they were fitted as. Part of --cluster.calibrate.
//
//   planner::machine_profile profile;                  // its compute and link constants: calibrate()'s
//   result<runtime_overhead> o = measure_runtime_overhead(profile, /*threads=*/2);
//   if (!o) return o.error();
//   profile.eff.per_task_seconds = o->per_task_s;
//   profile.eff.per_step_seconds = o->per_step_s;
//   profile.eff.per_rank_seconds = o->per_rank_s;
#pragma once

#include <string>
#include <vector>

#include "graph/error.hpp"
#include "planner/machine_profile.hpp"

namespace cohort::actors {

struct runtime_overhead {
  double per_task_s = 0, per_step_s = 0, per_rank_s = 0;
  struct sample {
    std::string plan;        // "dp2 tp1 pp1 m1 ..."
    double measured_s = 0;   // median step time of the tiny model
    double predicted_s = 0;  // the cost model's, with the fitted terms
  };
  std::vector<sample> samples;
};

/// Trains the tiny model twice for 140 steps under each calibration plan on `threads` threads
/// and keeps the faster median (a few seconds in all). `p` supplies the compute and link constants the
/// simulation subtracts; its overhead terms are ignored.
result<runtime_overhead> measure_runtime_overhead(const planner::machine_profile& p, int threads);

}  // namespace cohort::actors
