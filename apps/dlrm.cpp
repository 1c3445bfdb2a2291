// dlrm: trains DLRM (build_dlrm, apps/models/dlrm.hpp) on click logs in Criteo's TSV format
// and reports test AUC and log-loss. Everything else is the driver's (apps/driver/app.hpp).
//
//   python3 ../shared/bench/criteo_synth.py --write /tmp/c/train.tsv --write-test /tmp/c/test.tsv
//       --rows 200000 --test-rows 20000 --max-rows 100000     (one command)
//   build/apps/dlrm --data.file=/tmp/c/train.tsv --data.test-file=/tmp/c/test.tsv --train.steps=1500
//   build/apps/dlrm --data.file=train.tsv.gz --model.rows=100000 --plan.dp=2
#include <memory>

#include "apps/data/criteo.hpp"
#include "apps/driver/app.hpp"
#include "apps/driver/evaluate.hpp"
#include "apps/models/dlrm.hpp"

using namespace cohort;
using namespace cohort::apps;

namespace {

std::string summary_of_rows(const std::vector<std::int64_t>& rows) {
  std::int64_t total = 0;
  for (auto r : rows) total += r;
  return std::to_string(rows.size()) + " tables, " + std::to_string(total) + " rows";
}

}  // namespace

int main(int argc, char** argv) {
  app a("dlrm",
        "Trains DLRM (bottom MLP, sum-pooled embedding tables, dot interaction, top MLP, binary\n"
        "cross-entropy) on click logs in Criteo's TSV format (label, I1..I13, C1..C26; plain or\n"
        "gzip) and reports test AUC and log-loss. Table sizes: --model.rows, else the data file's\n"
        ".meta.json (../shared/bench/criteo_synth.py writes one), else Criteo Kaggle's (33.8 M rows).",
        {.steps = 1000, .batch = 128, .warmup = 20, .optimizer = optimizer_kind::sgd, .lr = 0.1, .momentum = 0});
  std::string train_file, test_file;
  std::vector<std::int64_t> rows;  // empty: from the file's .meta.json
  dlrm_config model;
  a.options()
      .add("data.file", train_file, "the training samples (Criteo TSV, plain or gzip); required")
      .add("data.test-file", test_file, "held-out samples for test_auc and test_logloss (optional)")
      .add("model.rows", rows,
           "rows of each of the 26 tables, or one cap on Criteo Kaggle's sizes (0: none); default: the data "
           "file's .meta.json")
      .add("model.dim", model.dim, "embedding dimension (the bottom MLP's output)")
      .add("model.bottom", model.bottom, "hidden widths of the bottom MLP (13 -> ... -> dim)")
      .add("model.top", model.top, "hidden widths of the top MLP (interaction -> ... -> 1)");

  std::unique_ptr<criteo_set> train, test;
  std::unique_ptr<in_order_sampler> sampler;
  return a.run(argc, argv, [&](const app& a) -> result<job> {
    if (train_file.empty())
      return make_error(errc::invalid_argument,
                        "--data.file is required: a Criteo TSV file (../shared/bench/criteo_synth.py --write F "
                        "writes seeded ones)");
    if (model.dim < 1) return make_error(errc::invalid_argument, "--model.dim must be positive");
    for (auto w : model.bottom)
      if (w < 1) return make_error(errc::invalid_argument, "--model.bottom: every width must be positive");
    for (auto w : model.top)
      if (w < 1) return make_error(errc::invalid_argument, "--model.top: every width must be positive");
    auto table_rows = criteo_table_rows(train_file, rows);
    if (!table_rows) return table_rows.error();
    auto loaded = read_criteo(train_file, *table_rows);
    if (!loaded) return loaded.error();
    train = std::make_unique<criteo_set>(std::move(*loaded));
    if (!test_file.empty()) {
      auto t = read_criteo(test_file, *table_rows);
      if (!t) return t.error();
      test = std::make_unique<criteo_set>(std::move(*t));
    }
    sampler = std::make_unique<in_order_sampler>(train->columns, a.train().batch);
    model.tables = criteo_dlrm(*table_rows).tables;

    job j;
    j.model = [&](graph& g, std::int64_t batch) { return build_dlrm(g, model, batch).loss; };
    j.data = [&](std::int64_t step) { return sampler->batch_at(step); };
    j.sparse_tables = true;  // on the serial trainer; the actor runtime's tables take dense gradients
    j.note =
        "data: " + train_file + " (" + std::to_string(train->size()) + " samples), " + summary_of_rows(*table_rows);
    j.summary = {{"data", train_file},
                 {"train_samples", train->size()},
                 {"table_rows", *table_rows},
                 {"embedding_dim", model.dim}};
    if (test) {
      j.summary["test_data"] = test_file;
      j.summary["test_samples"] = test->size();
      j.evaluate = [&](const parameter_store& trained) -> result<json> {
        auto logits = [&](graph& g, std::int64_t batch) { return build_dlrm(g, model, batch).logits; };
        column_set inputs = test->columns;
        inputs.erase("label");
        auto scores = predict_rows(logits, inputs, trained, static_cast<int>(a.train().threads));
        if (!scores) return scores.error();
        const std::vector<float> labels(test->labels().data<float>(), test->labels().data<float>() + test->size());
        auto auc = roc_auc(*scores, labels);
        if (!auc) return auc.error();
        return json{{"test_auc", *auc}, {"test_logloss", log_loss_of_logits(*scores, labels)}};
      };
    }
    return j;
  });
}
