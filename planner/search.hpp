// The planner: every dp x tp x pp x micro-batches x schedule x sharding for the devices at
// hand, each cut into pipeline stages by dynamic programming over the model's layer
// boundaries, each step played by the simulator on cost-model durations, each checked
// against device memory; ranked by predicted step time and explained.
//
//   auto a = analyze_model(model, /*optimizer_slots=*/2);
//   search_options o{.batch = 16, .topo = topology_of(cluster), .eff = profile.eff};
//   auto ranked = rank_plans(**a, o);          // fitting plans first, fastest first
//   std::cout << explain(*ranked, 10);          // plan, step time, memory, bubble, comm
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/analysis.hpp"
#include "planner/plan.hpp"

namespace cohort::planner {

/// The devices a plan runs on, seen as uniform: `devices` of one speed and memory, grouped
/// `devices_per_machine` to a machine, one link speed inside a machine and one between.
struct topology {
  int devices = 1;
  int devices_per_machine = 1;
  device_speed speed;
  double memory_bytes = 8e9;
  link_speed intra{1e10, 2e-6}, inter{1e9, 2e-5};
};

struct planned {
  parallel_plan plan;
  std::vector<std::size_t> cuts;   // forward nodes where stages 1.. begin
  double step_s = 0;               // predicted
  double peak_memory_bytes = 0;    // the fullest rank
  double bubble = 0;               // idle fraction of the pipeline
  double comm_s = 0;               // communication on the step's critical path (estimate)
  bool fits = true;
  std::string rejected;            // why it does not run, when !fits
};

struct search_options {
  std::int64_t batch = 1;
  topology topo;
  efficiency eff;
  int max_micro_batches = 64;
  bool consider_gpipe = true;
  double memory_margin = 0.9;      // use at most this fraction of device memory
};

/// Predicts one plan (stage cuts chosen here unless `cuts` is given).
result<planned> evaluate_plan(const model_analysis& a, const parallel_plan& p, const search_options& o,
                              const std::vector<std::size_t>& cuts = {});

/// Every candidate on o.topo.devices devices: fitting ones by step time, then the rejected.
result<std::vector<planned>> rank_plans(const model_analysis& a, const search_options& o);

/// A table of the first `rows` plans: plan, predicted step time, peak memory, bubble %, comm %.
std::string explain(const std::vector<planned>& ranked, std::size_t rows);

/// "dp2 tp2 pp2 m4 1f1b sharded"
std::string describe(const parallel_plan& p);

}  // namespace cohort::planner
