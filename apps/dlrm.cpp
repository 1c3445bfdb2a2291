// dlrm: trains DLRM (build_dlrm, apps/models/dlrm.hpp) on click logs in Criteo's TSV format,
// or on MovieLens as a click task, and reports test AUC and log-loss. Everything else is the
// driver's (apps/driver/app.hpp).
//
//   python3 ../shared/bench/criteo_synth.py --write /tmp/c/train.tsv --write-test /tmp/c/test.tsv
//       --rows 200000 --test-rows 20000 --max-rows 100000     (one command)
//   build/apps/dlrm --data.file=/tmp/c/train.tsv --data.test-file=/tmp/c/test.tsv --train.steps=1500
//   build/apps/dlrm --data.file=train.tsv.gz --model.rows=100000 --plan.dp=2
//   build/apps/dlrm --data.name=movielens --train.steps=2000 --plan.mode=serial
#include <memory>

#include "apps/data/criteo.hpp"
#include "apps/data/datasets.hpp"
#include "apps/data/movielens.hpp"
#include "apps/driver/app.hpp"
#include "apps/driver/evaluate.hpp"
#include "apps/models/dlrm.hpp"
#include "planner/machine_profile.hpp"
#include "planner/table_placement.hpp"

using namespace cohort;
using namespace cohort::apps;

namespace {

std::string summary_of_rows(const std::vector<std::int64_t>& rows) {
  std::int64_t total = 0;
  for (auto r : rows) total += r;
  return std::to_string(rows.size()) + " tables, " + std::to_string(total) + " rows";
}

// --model.table-sharding=auto: the planner's choice per table for `tp` tensor-parallel ranks
// in `dp` replicas and `pp` stages (planner/table_placement.hpp), from the machine profile's
// lookup and update rates and in-process link, and this machine's memory shared by the job's
// ranks. Sets model.per_table (left empty for tp = 1: every table replicated) and returns the
// explanation (a line per kind, without the last newline).
result<std::string> place_tables_for(const app& a, dlrm_config& model, std::int64_t tp, std::int64_t dp,
                                     std::int64_t pp) {
  model.per_table.clear();
  model.sharding = table_sharding::replicated;
  if (tp <= 1) return std::string{};
  const auto& plan = a.plan();
  auto profile =
      planner::load_profile(plan.cluster_profile.empty() ? planner::default_profile_path() : plan.cluster_profile);
  if (!profile) return profile.error();
  planner::table_request r;
  const double replica_rows = static_cast<double>(a.train().batch) / static_cast<double>(dp);
  for (const auto& t : model.tables)
    r.tables.push_back({"emb." + t.input, t.rows, model.dim, replica_rows * static_cast<double>(t.bag)});
  r.tp = static_cast<int>(tp);
  r.pooled_rows = replica_rows;
  const double memory = planner::detect_memory_bytes();
  r.memory_per_rank_bytes = (memory > 0 ? memory : 8e9) * 0.9 / static_cast<double>(dp * tp * pp);
  r.optimizer_slots = a.train().optimizer == optimizer_kind::adamw     ? 2
                      : a.train().optimizer == optimizer_kind::adagrad ? 1
                      : a.train().momentum > 0                         ? 1
                                                                       : 0;
  r.link = profile->link;
  if (profile->lookup_bytes_per_s > 0 && profile->sparse_update_bytes_per_s > 0) {
    r.lookup_bytes_per_s = profile->lookup_bytes_per_s;
    r.update_bytes_per_s = profile->sparse_update_bytes_per_s;
    r.rates_by_size = profile->table_rates;
    r.rates_source = "measured, " + profile->source;
  } else {  // random rows: a quarter and an eighth of streaming bandwidth, until measured
    r.lookup_bytes_per_s = profile->memory_bandwidth_bytes_per_s / 4;
    r.update_bytes_per_s = profile->memory_bandwidth_bytes_per_s / 8;
    r.rates_source = "not measured: from the memory bandwidth; --cluster.calibrate measures them";
  }
  auto placed = planner::place_tables(r);
  if (!placed) return placed.error();
  if (!placed->fits)
    return make_error(errc::invalid_argument, "--model.table-sharding=auto: " + placed->what_would_fit);
  for (const auto& c : placed->tables) model.per_table.push_back({c.how, c.owner});
  std::string explained = planner::explain(r, *placed);
  if (!explained.empty() && explained.back() == '\n') explained.pop_back();
  return explained;
}

// The summary's "tables": each table's sharding ("table@R" for one whole on rank R); empty
// when the model's one --model.table-sharding holds for all.
json tables_summary(const dlrm_config& model) {
  json tables = json::object();
  for (std::size_t i = 0; i < model.per_table.size() && i < model.tables.size(); ++i)
    tables["emb." + model.tables[i].input] = model.per_table[i].how == table_sharding::table
                                                 ? std::string("table@") + std::to_string(model.per_table[i].owner)
                                                 : std::string(to_string(model.per_table[i].how));
  return tables;
}

// Whether --model.table-sharding=auto chooses with the plan (apps/driver/joint_plan.hpp): the
// planner chooses the degrees, in one process (processes elsewhere could see other profiles and
// build other models; across processes the tables stay replicated unless named).
bool tables_with_the_plan(const app& a) {
  const auto& plan = a.plan();
  return plan.mode == planner::plan_mode::automatic && plan.file.empty() && plan.cluster_file.empty() &&
         plan.dist.nproc <= 1 && plan.dist.join.empty() && plan.dist.world <= 1;
}

// The test AUCs of two baselines that look at the movie only: its number of training ratings
// (popularity) and its training click rate, pulled towards the overall rate by 5 ratings.
result<json> movielens_baselines(const movielens_data& d) {
  std::int64_t ratings = 0, clicks = 0;
  for (std::size_t m = 0; m < d.train_ratings.size(); ++m) {
    ratings += d.train_ratings[m];
    clicks += d.train_clicks[m];
  }
  const double prior = static_cast<double>(clicks) / static_cast<double>(std::max<std::int64_t>(ratings, 1));
  const tensor& movie = d.test.columns.at("movie");
  const tensor& label = d.test.columns.at("label");
  std::vector<float> popularity, rate, labels(label.data<float>(), label.data<float>() + d.test.size());
  for (std::int64_t i = 0; i < d.test.size(); ++i) {
    const auto m = static_cast<std::size_t>(movie.data<std::int32_t>()[i]);
    popularity.push_back(static_cast<float>(d.train_ratings[m]));
    rate.push_back(static_cast<float>((static_cast<double>(d.train_clicks[m]) + 5 * prior) /
                                      (static_cast<double>(d.train_ratings[m]) + 5)));
  }
  auto a = roc_auc(popularity, labels);
  if (!a) return a.error();
  auto b = roc_auc(rate, labels);
  if (!b) return b.error();
  return json{{"baseline_popularity_auc", *a}, {"baseline_movie_ctr_auc", *b}};
}

}  // namespace

int main(int argc, char** argv) {
  app a("dlrm",
        "Trains DLRM (bottom MLP, sum-pooled embedding tables, dot interaction, top MLP, binary\n"
        "cross-entropy) on click logs in Criteo's TSV format (label, I1..I13, C1..C26; plain or\n"
        "gzip), or on MovieLens as a click task (--data.name=movielens), and reports test AUC and\n"
        "log-loss. Criteo's table sizes: --model.rows, else the data file's .meta.json\n"
        "(../shared/bench/criteo_synth.py writes one), else Criteo Kaggle's (33.8 M rows).",
        {.steps = 1000, .batch = 128, .warmup = 20, .optimizer = optimizer_kind::sgd, .lr = 0.1, .momentum = 0});
  std::string data_name = "criteo", data_dir = default_data_dir(), train_file, test_file;
  std::vector<std::int64_t> rows;  // empty: from the file's .meta.json
  dlrm_config model;
  bool sparse_tables = true;
  std::string sharding = "auto";
  a.options()
      .add("data.name", data_name,
           "criteo (--data.file in Criteo's TSV format) or movielens (data/movielens/ratings.csv: user, movie "
           "and genre tables, a rating of 4 or more is a click)")
      .add("data.dir", data_dir, "where scripts/fetch-data.sh put the files ($COHORT_DATA_DIR)")
      .add("data.file", train_file, "criteo: the training samples (Criteo TSV, plain or gzip); required")
      .add("data.test-file", test_file, "criteo: held-out samples for test_auc and test_logloss (optional)")
      .add("model.rows", rows,
           "criteo: rows of each of the 26 tables, or one cap on Criteo Kaggle's sizes (0: none); default: the "
           "data file's .meta.json")
      .add("model.dim", model.dim, "embedding dimension (the bottom MLP's output)")
      .add("model.bottom", model.bottom, "hidden widths of the bottom MLP (dense features -> ... -> dim)")
      .add("model.top", model.top, "hidden widths of the top MLP (interaction -> ... -> 1)")
      .add("model.table-sharding", sharding,
           "how the tables live on the tensor-parallel ranks (--plan.tp): auto (the planner chooses per table from "
           "the ranks' memory, the calibrated lookup and update rates and the link; replicated unless tp > 1; under "
           "--plan.mode=auto in one process, for each degree it considers, the degree and the tables together), "
           "replicated (each holds all of every table), column (each a range of every row's columns), row (each a "
           "range of every table's rows) or table (each table whole on one rank, balanced by size)")
      .add("model.sparse", sparse_tables,
           "tables take sparse gradients (the touched rows, gathered over dp) where the optimizer allows: plain SGD "
           "or Adagrad; false: dense [rows, dim] gradients");

  std::unique_ptr<criteo_set> train, test;
  std::unique_ptr<movielens_data> movielens;
  std::unique_ptr<in_order_sampler> sampler;
  return a.run(argc, argv, [&](const app& a) -> result<job> {
    if (model.dim < 1) return make_error(errc::invalid_argument, "--model.dim must be positive");
    const bool auto_sharding = sharding == "auto";
    if (auto s = parse_table_sharding(sharding))
      model.sharding = *s;
    else if (!auto_sharding)
      return make_error(errc::invalid_argument,
                        "--model.table-sharding: '" + sharding + "' is not auto, replicated, column, row or table");
    for (auto w : model.bottom)
      if (w < 1) return make_error(errc::invalid_argument, "--model.bottom: every width must be positive");
    for (auto w : model.top)
      if (w < 1) return make_error(errc::invalid_argument, "--model.top: every width must be positive");
    job j;
    const column_set* test_columns = nullptr;
    json baselines = json::object();
    if (data_name == "movielens") {
      if (!train_file.empty() || !test_file.empty() || !rows.empty())
        return make_error(errc::invalid_argument,
                          "--data.file, --data.test-file and --model.rows are for criteo; movielens sizes itself");
      auto loaded = load_movielens(data_dir);
      if (!loaded) return loaded.error();
      movielens = std::make_unique<movielens_data>(std::move(*loaded));
      auto base = movielens_baselines(*movielens);
      if (!base) return base.error();
      baselines = *base;
      model.dense = 1;
      model.tables = {{"user", movielens->users, 1, false},
                      {"movie", movielens->movies, 1, false},
                      {"genres", movielens->genres, movielens->max_genres, true}};
      sampler = std::make_unique<in_order_sampler>(movielens->train.columns, a.train().batch);
      test_columns = &movielens->test.columns;
      j.note = "data: MovieLens Latest Small, " + std::to_string(movielens->train.size()) + " training and " +
               std::to_string(movielens->test.size()) + " test ratings (a rating >= 4 is a click), " +
               std::to_string(movielens->users) + " users, " + std::to_string(movielens->movies) + " movies, " +
               std::to_string(movielens->genres) + " genres (averaged bags of up to " +
               std::to_string(movielens->max_genres) + ")";
      j.summary = {
          {"data", "movielens"}, {"train_samples", movielens->train.size()}, {"test_samples", movielens->test.size()}};
      for (auto& [k, v] : baselines.items()) j.summary[k] = v;
    } else if (data_name == "criteo") {
      if (train_file.empty())
        return make_error(errc::invalid_argument,
                          "--data.file is required: a Criteo TSV file (../shared/bench/criteo_synth.py --write F "
                          "writes seeded ones)");
      auto table_rows = criteo_table_rows(train_file, rows);
      if (!table_rows) return table_rows.error();
      auto loaded = read_criteo(train_file, *table_rows);
      if (!loaded) return loaded.error();
      train = std::make_unique<criteo_set>(std::move(*loaded));
      if (!test_file.empty()) {
        auto t = read_criteo(test_file, *table_rows);
        if (!t) return t.error();
        test = std::make_unique<criteo_set>(std::move(*t));
        test_columns = &test->columns;
      }
      sampler = std::make_unique<in_order_sampler>(train->columns, a.train().batch);
      model.tables = criteo_dlrm(*table_rows).tables;
      j.note =
          "data: " + train_file + " (" + std::to_string(train->size()) + " samples), " + summary_of_rows(*table_rows);
      j.summary = {{"data", train_file}, {"train_samples", train->size()}, {"table_rows", *table_rows}};
      if (test) {
        j.summary["test_data"] = test_file;
        j.summary["test_samples"] = test->size();
      }
    } else {
      return make_error(errc::invalid_argument, "--data.name must be criteo or movielens, not '" + data_name + "'");
    }
    j.summary["embedding_dim"] = model.dim;
    const auto& plan = a.plan();
    if (auto_sharding && plan.mode == planner::plan_mode::manual) {  // for the degrees given
      if (plan.dist.nproc > 1 || !plan.dist.join.empty() || plan.dist.world > 1) {
        if (plan.tp > 1)
          return make_error(errc::invalid_argument,
                            "--model.table-sharding=auto chooses on one machine's profile; across processes name it: "
                            "--model.table-sharding=table, row, column or replicated");
      } else {
        auto explained = place_tables_for(a, model, std::max<std::int64_t>(plan.tp, 1),
                                          std::max<std::int64_t>(plan.dp, 1), std::max<std::int64_t>(plan.pp, 1));
        if (!explained) return explained.error();
        if (!explained->empty()) j.note += (j.note.empty() ? "" : "\n") + *explained;
      }
    } else if (auto_sharding) {
      model.sharding = table_sharding::replicated;  // unless the planner plans a variant per degree
      if (tables_with_the_plan(a))
        j.variants = [&](int tp, int dp) -> result<model_variant> {
          auto variant = std::make_shared<dlrm_config>(model);
          auto explained = place_tables_for(a, *variant, tp, dp, 1);
          if (!explained) return explained.error();
          model_variant v;
          v.model = [variant](graph& g, std::int64_t batch) { return build_dlrm(g, *variant, batch).loss; };
          v.note = tp > 1 ? *explained : "tables: every one replicated (one tensor-parallel rank)";
          if (tp > 1) v.summary["tables"] = tables_summary(*variant);
          return v;
        };
    }
    j.summary["table_sharding"] = sharding;
    if (!model.per_table.empty()) j.summary["tables"] = tables_summary(model);
    j.model = [&](graph& g, std::int64_t batch) { return build_dlrm(g, model, batch).loss; };
    j.data = [&](std::int64_t step) { return sampler->batch_at(step); };
    j.sparse_tables = sparse_tables;  // where the optimizer allows (plain SGD, Adagrad)
    if (test_columns != nullptr)
      j.evaluate = [&, test_columns](const parameter_store& trained) -> result<json> {
        auto logits = [&](graph& g, std::int64_t batch) { return build_dlrm(g, model, batch).logits; };
        column_set inputs = *test_columns;
        const tensor label = inputs.at("label");
        inputs.erase("label");
        auto scores = predict_rows(logits, inputs, trained, static_cast<int>(a.train().threads));
        if (!scores) return scores.error();
        const std::vector<float> labels(label.data<float>(), label.data<float>() + label.shape()[0]);
        auto auc = roc_auc(*scores, labels);
        if (!auc) return auc.error();
        return json{{"test_auc", *auc}, {"test_logloss", log_loss_of_logits(*scores, labels)}};
      };
    return j;
  });
}
