// The driver library's entry header: what a program includes to become a cohort app. An
// `app` registers the standard options (train.*, metrics.file, plan.*, cluster.*, fault.*,
// launch.*, dist.*, checkpoint.*, init.from) after the app's own, and `run` does everything in the one right order:
// parse (--help, config files, errors exit 2 naming the option) -> finish the plan and
// process options -> launch local processes (--launch.nproc) -> check the standard values ->
// the app's job (its data loaded; an error exits 2) -> train (serial, on the actor runtime,
// across processes) -> the summary JSON with the standard fields, the job's own and what its
// `evaluate` returns. The app writes the model and the data and nothing else.
//
//   int main(int argc, char** argv) {
//     apps::app a("tiny", "Fits a linear classifier to noise.", {.steps = 50, .batch = 32});
//     std::int64_t classes = 4;
//     a.options().add("model.classes", classes, "output classes");
//     return a.run(argc, argv, [&](const apps::app&) -> result<apps::job> {
//       apps::job j;
//       j.model = [&](graph& g, std::int64_t rows) {
//         return softmax_cross_entropy(linear(g.input("x", {rows, 8}), classes, "fc"), g.input("y", {rows}, dtype::i32));
//       };
//       j.data = [&](std::int64_t /*step*/) {
//         return std::map<std::string, tensor>{{"x", tensor::full({32, 8}, 0.5f)}, {"y", tensor::zeros({32}, dtype::i32)}};
//       };
//       j.summary = {{"classes", classes}};
//       return j;
//     });
//   }
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "apps/driver/options.hpp"
#include "apps/driver/report.hpp"
#include "apps/driver/training.hpp"
#include "graph/init.hpp"
#include "graph/optimizer.hpp"

namespace cohort::apps {

enum class optimizer_kind { sgd, adamw, adagrad };

/// "sgd", "adamw", "adagrad".
const char* to_string(optimizer_kind k);
result<optimizer_kind> parse_optimizer(const std::string& text);

/// The standard train.* options; an app passes its own defaults.
struct train_settings {
  std::int64_t steps = 100, batch = 32, warmup = 10;
  optimizer_kind optimizer = optimizer_kind::sgd;  // --train.optimizer
  double lr = 0.05, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, weight_decay = 0.0;
  std::int64_t threads = 0;  // 0: the cores this process may use
  std::int64_t seed = 0;

  /// The optimizer as the runtime takes it.
  optimizer_config optimizer_rule() const;
};

/// What an app hands the driver: its model, its data, and what it adds to the summary.
struct job {
  std::function<var(graph&, std::int64_t batch)> model;                  // builds the loss for `batch` rows
  std::function<std::map<std::string, tensor>(std::int64_t step)> data;  // the global batch of a step
  std::int64_t items_per_sample = 1;    // tokens per sequence for the rate (1: samples)
  const char* rate_unit = "samples/s";  // or "tokens/s"
  std::string note;                     // printed on stderr once the plan is known to run
  json summary = json::object();        // the app's own summary fields
  /// On the reporting process, after training: more summary fields from the trained model
  /// (e.g. {"test_accuracy": 0.87}). An error fails the run (exit 1).
  std::function<result<json>(const parameter_store& trained)> evaluate;
  /// A model whose layout depends on the tensor-parallel degree (a recommender's tables): under
  /// --plan.mode=auto in one process the planner chooses the degree and the variant together
  /// (training_job::variants); elsewhere `model` runs.
  model_variants variants;
  /// Train nothing: evaluate the model of --init.from (as --train.steps=0 does), e.g. to
  /// sample from it. Without --init.from: exit 2.
  bool evaluate_only = false;
  /// Embedding tables read by one embedding_bag are updated from their touched rows on the
  /// serial trainer (--plan.mode=serial) when the optimizer allows it (plain SGD).
  bool sparse_tables = false;
};

class app {
 public:
  app(std::string name, std::string summary, train_settings defaults = {});

  /// Where the app registers its own options before run().
  option_set& options() { return options_; }
  const train_settings& train() const { return train_; }
  const plan_options& plan() const { return plan_; }
  const std::string& name() const { return name_; }

  /// Parses, launches or trains, prints the summary; returns the process's exit code
  /// (0, 1 for a failed run, 2 for bad input). `make_job` runs after the options are known.
  int run(int argc, char** argv, const std::function<result<job>(const app&)>& make_job);

 private:
  int train_job(const job& j);
  int evaluate_job(const job& j);
  status hetero_plan();  // --exec.mode=hetero's plan constraints, or why they cannot hold

  std::string name_;
  option_set options_;
  train_settings train_;
  std::string optimizer_text_, metrics_;  // --train.optimizer (parsed into train_), --metrics.file
  bool eval_only_ = false;                // --eval.only
  std::int64_t eval_every_ = 0;           // --eval.every
  std::string exec_mode_ = "sync";        // --exec.mode
  std::int64_t geo_steps_ = 10;           // --exec.geo-steps
  std::int64_t staleness_ = 4;            // --exec.staleness
  std::int64_t geo_exit_step_ = -1;       // --fault.geo-exit-step (test hook)
  std::int64_t geo_exit_rank_ = -1;       // --fault.geo-exit-rank (test hook)
  std::string geo_deltas_ = "f32";        // --exec.geo-deltas
  actors::table_exchange exchange_;       // parsed from both
  plan_options plan_;
};

}  // namespace cohort::apps
