// mlp: trains a multi-layer perceptron on a classification data set and reports held-out
// accuracy. The model is build_mlp() in models.cpp; everything else here is the loop.
//
//   build/apps/mlp --data.name=digits --train.steps=500
//   build/apps/mlp --data.name=synth --model.dims=784,1024,1024,10 --train.momentum=0
//   build/apps/mlp --plan.dp=2 --plan.tp=2 --plan.pp=2 --plan.micro-batches=4
#include <cstring>

#include "apps/datasets.hpp"
#include "apps/models.hpp"
#include "apps/options.hpp"
#include "apps/report.hpp"
#include "apps/samplers.hpp"
#include "apps/training.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/executor.hpp"
#include "kernels/thread_pool.hpp"
#include "kernels/threads.hpp"

using namespace cohort;
using namespace cohort::apps;

namespace {

struct mlp_options {
  std::string data = "digits";
  std::string data_dir = default_data_dir();
  std::vector<std::int64_t> dims;  // empty: chosen by data set
  std::int64_t steps = 500, batch = 128, warmup = 10;
  std::string optimizer = "sgd";
  double lr = 0.05, momentum = 0.9, weight_decay = 0.0;
  std::int64_t threads = kernels::available_cores(), seed = 0;
  std::string metrics;
};

// Fraction of rows of `set` whose argmax logit is the label, in batches of the eval graph.
result<double> accuracy(const labeled_set& set, const std::vector<std::int64_t>& dims,
                        parameter_store& params, kernels::thread_pool& pool) {
  const std::int64_t chunk = std::min<std::int64_t>(set.size(), 1000);
  graph g;
  mlp_model m = build_mlp(g, dims, chunk);
  auto table = kernels::cpu_kernels();
  auto ex = kernels::executor::create(g, params, {m.logits.id}, {&table, &pool});
  if (!ex) return ex.error();
  std::int64_t correct = 0, seen = 0, classes = dims.back(), f = dims.front();
  for (std::int64_t begin = 0; begin + chunk <= set.size(); begin += chunk) {
    std::memcpy(ex->input(m.x.id).data<float>(), set.x.data<float>() + begin * f,
                static_cast<std::size_t>(chunk * f) * sizeof(float));
    if (auto st = ex->run(); !st) return st.error();
    const float* logits = ex->value(m.logits.id).data<float>();
    for (std::int64_t i = 0; i < chunk; ++i) {
      const float* row = logits + i * classes;
      auto pred = std::max_element(row, row + classes) - row;
      correct += pred == set.y.data<std::int32_t>()[begin + i] ? 1 : 0;
    }
    seen += chunk;
  }
  return seen == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(seen);
}

}  // namespace

int main(int argc, char** argv) {
  mlp_options o;
  plan_options plan;
  option_set opts("mlp", "Trains a multi-layer perceptron (Linear/ReLU stack, softmax cross-entropy) on a\n"
                         "classification data set and reports held-out accuracy.");
  opts.add("data.name", o.data, "digits, fashion, mnist or synth")
      .add("data.dir", o.data_dir, "where scripts/fetch-data.sh put the files ($COHORT_DATA_DIR)")
      .add("model.dims", o.dims, "layer widths, input first: digits 64,128,128,10; others 784,256,256,10")
      .add("train.steps", o.steps, "optimizer steps")
      .add("train.batch", o.batch, "samples per step (the global batch, split over dp x micro-batches)")
      .add("train.optimizer", o.optimizer, "sgd or adamw")
      .add("train.lr", o.lr, "learning rate")
      .add("train.momentum", o.momentum, "SGD momentum (0 = plain SGD)")
      .add("train.weight-decay", o.weight_decay, "weight decay")
      .add("train.warmup", o.warmup, "first steps left out of the throughput figure")
      .add("train.threads", o.threads, "threads for OpenBLAS and cohort's kernels together")
      .add("train.seed", o.seed, "seed for initialization, data order and synth data")
      .add("metrics.file", o.metrics, "write one JSON object per step to this file");
  plan.add_to(opts);
  auto parsed = opts.parse(argc, argv);
  if (!parsed) return fail("mlp", parsed.error().message, 2);
  if (*parsed == parse_outcome::help_shown) return 0;
  if (auto st = plan.finish(opts); !st) return fail("mlp", st.error().message, 2);
  if (plan.dist.launches()) return launch_processes(argc, argv, plan.dist, opts);
  if (o.steps < 1 || o.batch < 1 || o.threads < 1 || o.warmup < 0 || o.lr <= 0)
    return fail("mlp", "--train.steps, --train.batch, --train.threads and --train.lr must be positive", 2);
  if (o.optimizer != "sgd" && o.optimizer != "adamw")
    return fail("mlp", "--train.optimizer must be sgd or adamw, got '" + o.optimizer + "'", 2);

  if (o.dims.empty()) o.dims = o.data == "digits" ? std::vector<std::int64_t>{64, 128, 128, 10}
                                                  : std::vector<std::int64_t>{784, 256, 256, 10};
  auto data = load_classification(o.data, o.data_dir, static_cast<std::uint64_t>(o.seed),
                                  o.dims.front(), o.dims.back());
  if (!data) return fail("mlp", data.error().message, 2);
  if (data->features != o.dims.front() || data->classes > o.dims.back())
    return fail("mlp", "--model.dims must start with " + std::to_string(data->features) + " and end with at least " +
                           std::to_string(data->classes) + " for " + o.data, 2);
  if (o.batch > data->train.size())
    return fail("mlp", "--train.batch " + std::to_string(o.batch) + " exceeds the " +
                           std::to_string(data->train.size()) + " training samples", 2);

  epoch_sampler sampler(data->train, o.batch, static_cast<std::uint64_t>(o.seed) + 1);
  training_job job;
  job.app = "mlp";
  job.model = [&](graph& g, std::int64_t batch) { return build_mlp(g, o.dims, batch).loss; };
  job.data = [&](std::int64_t step) { return sampler.batch_at(step); };
  job.batch = o.batch;
  job.steps = o.steps;
  job.warmup = o.warmup;
  job.optimizer = o.optimizer == "sgd"
      ? optimizer_config{sgd_config{.lr = static_cast<float>(o.lr), .momentum = static_cast<float>(o.momentum),
                                    .weight_decay = static_cast<float>(o.weight_decay)}}
      : optimizer_config{adamw_config{.lr = static_cast<float>(o.lr), .weight_decay = static_cast<float>(o.weight_decay)}};
  job.seed = static_cast<std::uint64_t>(o.seed);
  job.threads = static_cast<int>(o.threads);
  job.metrics_path = o.metrics;
  job.note = data->note;
  auto r = train(job, plan, opts.caf_arguments());
  if (!r) return fail("mlp", r.error().message, exit_code_for(r.error()));
  if (!r->report) return 0;  // process 0 of the job reports
  if (r->plan_only) {
    print_summary({{"app", "mlp"}, {"plan", r->plan}});
    return 0;
  }

  json summary = {{"app", "mlp"}, {"data", o.data}, {"dims", o.dims}, {"batch", o.batch},
                  {"steps", o.steps}, {"final_loss", r->final_loss}, {"samples_per_s", r->items_per_s},
                  {"threads", o.threads}, {"plan", r->plan}, {"restarts", r->restarts}};
  if (!r->prediction.empty()) summary["prediction"] = r->prediction;
  if (data->test.size() > 0) {
    kernels::thread_pool pool(static_cast<int>(o.threads));
    kernels::set_math_threads(static_cast<int>(o.threads));
    auto acc = accuracy(data->test, o.dims, r->parameters, pool);
    if (!acc) return fail("mlp", acc.error().message, 1);
    summary["test_accuracy"] = *acc;
  }
  print_summary(summary);
  return 0;
}
