// The training driver (apps use it through app.hpp): the plan options (--plan.*, --cluster.*,
// --fault.*), and one call that trains either with the serial trainer (--plan.mode=serial, the
// reference) or on the actor runtime with a plan the planner chose (--plan.mode=auto, the
// default), given (manual) or loaded (--plan.file); reporting progress, metrics, predicted
// against measured step time, plan transitions, and the pieces of the summary JSON.
//
//   option_set opts("mlp", "Trains a multi-layer perceptron.");
//   plan_options plan;
//   plan.add_to(opts);                                   // --plan.dp=2 --plan.tp=2 ...
//   if (auto r = opts.parse({"--plan.dp=2"}); !r) return r.error();
//   if (auto st = plan.finish(opts); !st) return st;     // a degree given: --plan.mode=manual
//   training_job job;
//   job.app = "mlp";  job.model = tiny_mlp;  job.data = tiny_batch;  job.batch = 64;  job.steps = 100;
//   job.optimizer = sgd_config{.lr = 0.05f};
//   result<training_result> r = train(job, plan, opts.caf_arguments());
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actors/planner_actor.hpp"
#include "actors/table_exchange.hpp"
#include "apps/driver/checkpointing.hpp"
#include "apps/driver/live_metrics.hpp"
#include "apps/driver/options.hpp"
#include "apps/driver/processes.hpp"
#include "apps/driver/report.hpp"
#include "apps/driver/run_report.hpp"
#include "apps/driver/tracing.hpp"
#include "graph/init.hpp"
#include "graph/optimizer.hpp"
#include "graph/tensor.hpp"
#include "planner/plan_choice.hpp"

namespace cohort::apps {

/// The --plan.*, --cluster.* and --fault.* options: what the planner is asked (the
/// plan_request part) and how the run goes about it.
struct plan_options : planner::plan_request {
  std::string mode_text = "auto";  // --plan.mode, parsed into mode by finish()
  std::string list;                // write every candidate plan here, one JSON per line
  bool refit = true;               // refit the cost model from this run, save it with the profile
  std::string cluster_profile;
  bool cluster_calibrate = false;
  std::int64_t inject_rank = -1, inject_step = -1, inject_task = 0, max_restarts = 3;
  std::int64_t timeout_ms = 60000;
  // Plan transitions: after change_at[i] steps the job switches to change_to's i-th entry (a
  // saved plan file, "serial" for one rank, or "auto" for the planner's choice).
  std::vector<std::int64_t> change_at;
  std::string change_to;                    // comma-separated, one per change_at
  std::vector<std::string> change_targets;  // change_to split, by finish()
  process_options dist;                     // --launch.*, --join, --dist.*: several processes
  checkpoint_options checkpoint;            // --checkpoint.*, --init.from
  trace_options trace;                      // --trace.*
  report_options report;                    // --report.*
  prometheus_options prometheus;            // --metrics.listen, --metrics.linger-s
  void add_to(option_set& opts);
  /// After parsing: the mode (a degree, schedule or cut given without --plan.mode means
  /// manual), the process options from the environment. Errors: a malformed value, named.
  status finish(const option_set& opts);
};

/// One tensor-parallel degree's version of a model whose layout depends on it (a recommender's
/// tables, each placed for that many ranks): the model, the line that explains it, and the
/// summary fields it adds.
struct model_variant {
  std::function<var(graph&, std::int64_t batch)> model;
  std::string note;
  json summary = json::object();
};
/// The variant for `tp` tensor-parallel ranks in `dp` data-parallel replicas; an error when the
/// model cannot take that degree (it is then not a candidate).
using model_variants = std::function<result<model_variant>(int tp, int dp)>;

struct training_job {
  std::string app;  // "mlp", "gpt": progress label and messages
  std::function<var(graph&, std::int64_t batch)> model;
  /// Under --plan.mode=auto, in one process: the planner plans each degree's variant with that
  /// degree fixed and the run trains the fastest (joint_plan.hpp); `model` is then unused.
  model_variants variants;
  std::function<std::map<std::string, tensor>(std::int64_t step)> data;  // the global batch
  std::int64_t batch = 0, steps = 0, warmup = 0;
  std::int64_t first_step = 0;        // steps done before (a resumed run; set by train())
  std::int64_t items_per_sample = 1;  // tokens per sequence for the rate (1: samples)
  const char* rate_unit = "samples/s";
  optimizer_config optimizer;
  std::uint64_t seed = 0;
  int threads = 1;
  std::string metrics_path;
  std::string note;            // printed on stderr once the plan is known to run
  bool sparse_tables = false;  // the serial trainer's sparse table updates, where the optimizer allows
  /// --eval.every: `evaluate` on the parameters after every that many steps (either trainer).
  std::int64_t evaluate_every = 0;
  std::function<result<json>(const parameter_store&)> evaluate;
  /// --exec.mode, --exec.geo-steps: how data-parallel replicas share sparse tables' updates.
  actors::table_exchange exchange;
};

struct training_result {
  float first_loss = 0, final_loss = 0;
  double items_per_s = 0;  // after the warm-up steps
  int restarts = 0;
  parameter_store parameters;        // the trained model, whole
  json plan;                         // for the summary
  json prediction;                   // predicted vs measured step time, the refit (runtime runs)
  json transitions = json::array();  // each plan change: {"step", "from", "to", "seconds", "bytes_moved", ...}
  json checkpoints =
      json::array();  // each checkpoint: {"step", "path", "snapshot_s", "write_s", "bytes"} or its "error"
  json resumed_from;  // {"path", "step"} when the run resumed
  json recoveries = json::array();          // each failure the job recovered from (restarts.hpp)
  json scale_out = json::array();           // each answer to processes waiting to join (process 0)
  std::int64_t sparse_bytes = 0;            // sent by this process's workers for sparse tables' rows
  std::int64_t max_table_staleness = -1;    // the most steps a lookup's tables lagged (-1: none measured)
  bool plan_only = false;                   // --plan.only: nothing was trained
  bool report = true;                       // false on a job's other processes: process 0 reports
  std::int64_t left_after = -1;             // a node that left the running job: after this many steps
  json model_summary = json::object();      // the chosen model variant's fields (training_job::variants)
  std::shared_ptr<run_record> report_page;  // --report.file: the page's record (the app finishes it)
  std::shared_ptr<void> metrics_endpoint;   // --metrics.listen: serving until released (the app lingers)
};

/// The planner's inputs for this job: the machine profile (loaded, or measured now with
/// --cluster.calibrate and saved), the model's analysis, the devices.
result<planner::planning_setup> prepare_planning(const training_job& job, const plan_options& p, int threads);

/// The plan changes the options ask for, as the planner actor takes them.
std::vector<actors::plan_change> plan_changes(const plan_options& p);

/// Errors: bad plan options (exit code 2 material) and failures during training.
result<training_result> train(const training_job& job, const plan_options& plan,
                              const std::vector<std::string>& caf_arguments);

}  // namespace cohort::apps
