// The plan and a degree-dependent model chosen together (issue 19's tables): where a model's
// layout depends on the tensor-parallel degree — a recommender's embedding tables, each placed
// replicated, column-, row- or table-wise for that many ranks — the planner cannot rank the
// degrees on one graph. Under --plan.mode=auto in one process, every degree the devices allow
// gets its own variant of the model (training_job::variants), the planner's best plan with that
// degree fixed is predicted on that variant's graph, and the run trains the fastest; every
// candidate, and why a degree was not one, goes to stderr and the summary.
//
//   training_job job;
//   job.app = "tiny";  job.batch = 64;  job.steps = 10;  job.optimizer = sgd_config{.lr = 0.05f};
//   job.variants = [](int tp, int /*dp*/) -> result<model_variant> {   // the layout for tp ranks
//     model_variant v;
//     v.model = [tp](graph& g, std::int64_t rows) {
//       return softmax_cross_entropy(linear(g.input("x", {rows, 8 * tp}), 4, "fc"), g.input("y", {rows}, dtype::i32));
//     };
//     v.note = "fc for " + std::to_string(tp) + " ranks";
//     return v;
//   };
//   plan_options plan;                              // --plan.mode=auto: the default
//   if (plans_jointly(job, plan)) {
//     auto joint = plan_jointly(job, plan, /*threads=*/2);
//     if (!joint) return joint.error();           // no degree gave a plan: each one's reason
//     std::fprintf(stderr, "%s\n", joint->explanation.c_str());   // then train joint->job
//   }
#pragma once

#include <memory>
#include <string>

#include "apps/driver/training.hpp"

namespace cohort::apps {

struct joint_plan {
  training_job job;  // the job with the chosen variant's model (its note: in `explanation`)
  std::shared_ptr<planner::planning_setup> setup;
  planner::plan_choice choice;
  /// One entry per degree: {"tp", "plan", "predicted_step_s", the variant's summary} or
  /// {"tp", "error"}; the chosen one has "chosen": true.
  json candidates = json::array();
  json model_summary = json::object();  // the chosen variant's summary fields
  std::string explanation;              // the candidates and the choice, for stderr
};

/// Whether `job` is planned jointly: it has variants, the planner chooses (--plan.mode=auto, no
/// --plan.file) and it plans for this machine (no --cluster.file).
bool plans_jointly(const training_job& job, const plan_options& p);

/// For each tensor-parallel degree t the devices allow (a --plan.tp fixes it; with
/// --plan.ranks, t divides them), the variant for t ranks in as many whole replicas as the
/// devices hold, planned with tp = t;
/// the fastest predicted plan that fits wins (the smaller degree on a near tie). Errors: no
/// degree gave a plan (each degree's reason), a profile that cannot be read.
result<joint_plan> plan_jointly(const training_job& job, const plan_options& p, int threads);

}  // namespace cohort::apps
