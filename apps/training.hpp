// The training loop the apps share: the plan options (--plan.*, --cluster.*, --fault.*), and
// one call that trains either with the serial trainer (--plan.mode=serial, the reference) or
// on the actor runtime with a plan the planner chose (--plan.mode=auto, the default), given
// (manual) or loaded (--plan.file); reporting progress, metrics, predicted against measured
// step time, and the pieces of the summary JSON.
//
//   plan_options plan;  plan.add_to(opts);            // --plan.dp=2 --plan.tp=2 ...
//   opts.parse(argc, argv);  plan.finish(opts);
//   if (plan.dist.launches()) return launch_processes(argc, argv, plan.dist, opts);
//   training_job job{.model = ..., .data = ..., .batch = 64, .steps = 100, ...};
//   auto r = train(job, plan, opts.caf_arguments());
//   summary["plan"] = r->plan;  summary["final_loss"] = r->final_loss;
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "apps/options.hpp"
#include "apps/processes.hpp"
#include "apps/report.hpp"
#include "graph/init.hpp"
#include "graph/optimizer.hpp"
#include "graph/tensor.hpp"

namespace cohort::apps {

struct plan_options {
  std::string mode = "auto";            // auto, manual, serial
  // Degrees: 0 lets the planner choose (under auto they are constraints; manual: 0 means 1).
  std::int64_t dp = 0, tp = 0, pp = 0, micro_batches = 0;
  std::string schedule;                 // gpipe, 1f1b; empty: the planner's choice (manual: 1f1b)
  bool shard_params = false;
  std::vector<std::int64_t> cuts;       // explicit pipeline cuts (forward node indices)
  bool only = false;                    // print the ranked plans and the chosen one, train nothing
  std::string file;                     // a saved plan (JSON, as --plan.only prints it)
  std::string list;                     // write every candidate plan here, one JSON per line
  std::int64_t ranks = 0;               // devices to plan for on this machine (0: its cores)
  std::int64_t max_micro_batches = 64;
  bool refit = true;                    // refit the cost model from this run, save it with the profile
  std::string cluster_file, cluster_profile;
  bool cluster_calibrate = false;
  bool half_precision = false;          // plan for mixed precision (cluster files)
  bool recompute = false;               // may plan activation recomputation (cluster files)
  std::int64_t inject_rank = -1, inject_step = -1, inject_task = 0, max_restarts = 3;
  std::int64_t timeout_ms = 60000;
  process_options dist;                 // --launch.*, --join, --dist.*: several processes
  void add_to(option_set& opts);
  /// After parsing: a degree, schedule or cut given without --plan.mode means manual; the
  /// process options from the environment. Errors: malformed process options.
  status finish(const option_set& opts);
};

struct training_job {
  std::string app;                      // "mlp", "gpt": progress label and messages
  std::function<var(graph&, std::int64_t batch)> model;
  std::function<std::map<std::string, tensor>(std::int64_t step)> data;  // the global batch
  std::int64_t batch = 0, steps = 0, warmup = 0;
  std::int64_t items_per_sample = 1;    // tokens per sequence for the rate (1: samples)
  const char* rate_unit = "samples/s";
  optimizer_config optimizer;
  std::uint64_t seed = 0;
  int threads = 1;
  std::string metrics_path;
  std::string note;                     // printed on stderr once the plan is known to run
};

struct training_result {
  float first_loss = 0, final_loss = 0;
  double items_per_s = 0;               // after the warm-up steps
  int restarts = 0;
  parameter_store parameters;           // the trained model, whole
  json plan;                            // for the summary
  json prediction;                      // predicted vs measured step time, the refit (runtime runs)
  bool plan_only = false;               // --plan.only: nothing was trained
  bool report = true;                   // false on a job's other processes: process 0 reports
};

/// Errors: bad plan options (exit code 2 material) and failures during training.
result<training_result> train(const training_job& job, const plan_options& plan,
                              const std::vector<std::string>& caf_arguments);

}  // namespace cohort::apps
