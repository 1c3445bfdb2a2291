// mlp: trains a multi-layer perceptron (build_mlp, apps/models/mlp.hpp) on a classification
// data set and reports held-out accuracy. Everything else is the driver's (apps/driver/app.hpp).
//
//   build/apps/mlp --data.name=digits --train.steps=500
//   build/apps/mlp --data.name=synth --model.dims=784,1024,1024,10 --train.momentum=0
//   build/apps/mlp --plan.dp=2 --plan.tp=2 --plan.pp=2 --plan.micro-batches=4
#include <memory>

#include "apps/data/datasets.hpp"
#include "apps/data/samplers.hpp"
#include "apps/driver/app.hpp"
#include "apps/driver/evaluate.hpp"
#include "apps/models/mlp.hpp"

using namespace cohort;
using namespace cohort::apps;

int main(int argc, char** argv) {
  app a("mlp",
        "Trains a multi-layer perceptron (Linear/ReLU stack, softmax cross-entropy) on a\n"
        "classification data set and reports held-out accuracy.",
        {.steps = 500, .batch = 128, .warmup = 10, .optimizer = optimizer_kind::sgd, .lr = 0.05, .momentum = 0.9});
  std::string data_name = "digits", data_dir = default_data_dir();
  std::vector<std::int64_t> dims;  // empty: chosen by data set
  a.options()
      .add("data.name", data_name, "digits, fashion, mnist or synth")
      .add("data.dir", data_dir, "where scripts/fetch-data.sh put the files ($COHORT_DATA_DIR)")
      .add("model.dims", dims, "layer widths, input first: digits 64,128,128,10; others 784,256,256,10");

  std::unique_ptr<classification_data> data;
  std::unique_ptr<epoch_sampler> sampler;
  return a.run(argc, argv, [&](const app& a) -> result<job> {
    const auto seed = static_cast<std::uint64_t>(a.train().seed);
    if (dims.empty())
      dims = data_name == "digits" ? std::vector<std::int64_t>{64, 128, 128, 10}
                                   : std::vector<std::int64_t>{784, 256, 256, 10};
    auto loaded = load_classification(data_name, data_dir, seed, dims.front(), dims.back());
    if (!loaded) return loaded.error();
    data = std::make_unique<classification_data>(std::move(*loaded));
    if (data->features != dims.front() || data->classes > dims.back())
      return make_error(errc::invalid_argument, "--model.dims must start with " + std::to_string(data->features) +
                                                    " and end with at least " + std::to_string(data->classes) +
                                                    " for " + data_name);
    if (a.train().batch > data->train.size())
      return make_error(errc::invalid_argument, "--train.batch " + std::to_string(a.train().batch) + " exceeds the " +
                                                    std::to_string(data->train.size()) + " training samples");
    sampler = std::make_unique<epoch_sampler>(data->train, a.train().batch, seed + 1);

    job j;
    j.model = [&](graph& g, std::int64_t rows) { return build_mlp(g, dims, rows).loss; };
    j.data = [&](std::int64_t step) { return sampler->batch_at(step); };
    j.note = data->note;
    j.summary = {{"data", data_name}, {"dims", dims}};
    if (data->test.size() > 0)
      j.evaluate = [&](const parameter_store& trained) -> result<json> {
        auto logits = [&](graph& g, std::int64_t rows) { return build_mlp(g, dims, rows).logits; };
        auto acc =
            classification_accuracy(logits, data->test.x, data->test.y, trained, static_cast<int>(a.train().threads));
        if (!acc) return acc.error();
        return json{{"test_accuracy", *acc}};
      };
    return j;
  });
}
