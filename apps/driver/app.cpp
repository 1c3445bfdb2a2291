// The app object: standard options, the call order, the standard summary.
#include "apps/driver/app.hpp"

#include "kernels/optimizer.hpp"
#include "kernels/threads.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace cohort::apps {

const char* to_string(optimizer_kind k) {
  switch (k) {
    case optimizer_kind::sgd:
      return "sgd";
    case optimizer_kind::adamw:
      return "adamw";
    case optimizer_kind::adagrad:
      return "adagrad";
  }
  return "?";
}

result<optimizer_kind> parse_optimizer(const std::string& text) {
  for (optimizer_kind k : {optimizer_kind::sgd, optimizer_kind::adamw, optimizer_kind::adagrad})
    if (text == to_string(k)) return k;
  return make_error(errc::invalid_argument, "--train.optimizer must be sgd, adamw or adagrad, got '" + text + "'");
}

optimizer_config train_settings::optimizer_rule() const {
  if (optimizer == optimizer_kind::sgd)
    return sgd_config{.lr = static_cast<float>(lr),
                      .momentum = static_cast<float>(momentum),
                      .weight_decay = static_cast<float>(weight_decay)};
  if (optimizer == optimizer_kind::adagrad) return adagrad_config{.lr = static_cast<float>(lr)};
  return adamw_config{.lr = static_cast<float>(lr),
                      .beta1 = static_cast<float>(beta1),
                      .beta2 = static_cast<float>(beta2),
                      .weight_decay = static_cast<float>(weight_decay)};
}

app::app(std::string name, std::string summary, train_settings defaults)
    : name_(std::move(name)), options_(name_, std::move(summary)), train_(std::move(defaults)) {
  if (train_.threads <= 0) train_.threads = kernels::available_cores();
  optimizer_text_ = to_string(train_.optimizer);
}

int app::run(int argc, char** argv, const std::function<result<job>(const app&)>& make_job) {
  options_.add("train.steps", train_.steps, "optimizer steps")
      .add("train.batch", train_.batch, "samples per step (the global batch, split over dp x micro-batches)")
      .add("train.optimizer", optimizer_text_, "sgd, adamw or adagrad (torch.optim's rules)")
      .add("train.lr", train_.lr, "learning rate")
      .add("train.momentum", train_.momentum, "SGD momentum (0 = plain SGD)")
      .add("train.beta1", train_.beta1, "AdamW beta1")
      .add("train.beta2", train_.beta2, "AdamW beta2")
      .add("train.weight-decay", train_.weight_decay, "weight decay (AdamW: decoupled)")
      .add("train.warmup", train_.warmup, "first steps left out of the throughput figure")
      .add("train.threads", train_.threads, "threads for OpenBLAS and cohort's kernels together (per process)")
      .add("train.seed", train_.seed, "seed for initialization, data order and synthetic data")
      .add("metrics.file", metrics_, "write one JSON object per step to this file")
      .add("eval.only", eval_only_, "train nothing: evaluate the model of --init.from (as --train.steps=0)")
      .add("eval.every", eval_every_,
           "evaluate every N steps (as at the end; into the metrics file and stderr; not timed; on the "
           "actor runtime the committed parameters are gathered on the coordinator between steps: process 0, "
           "or the process that took over from it)");
  if (options_.has("model.sparse"))  // apps with embedding tables
    options_
        .add("exec.mode", exec_mode_,
             "how data-parallel replicas share the tables' sparse updates: sync (gathered every step, the serial "
             "program's losses), async (a step's table updates apply --exec.staleness steps late, on every replica "
             "alike) or geo (each replica trains its own copy; the touched rows' deltas are exchanged every "
             "--exec.geo-steps steps); or hetero, the heterogeneous pipeline: two stages, every table lookup in the "
             "first, the dense layers balanced around them, each stage on its own half of the cores, micro-batches "
             "flowing through (manual plans: 32 rows each, at most 8), tables exact as sync")
        .add("exec.staleness", staleness_, "async: steps a lookup's tables may lag behind the updates (S; 0 = sync)")
        .add("exec.geo-steps", geo_steps_, "geo: steps between the replicas' exchanges (K)")
        .add("exec.geo-deltas", geo_deltas_,
             "geo: how the rows' deltas travel: f32, or bf16 (half the bytes, each delta rounded; the replicas "
             "still agree)")
        .add("fault.geo-exit-step", geo_exit_step_,
             "test hook: in geo's exchange before this step the worker of --fault.geo-exit-rank hands its block to "
             "the next replica alone and kills its process (an exchange stopped halfway; -1: off)")
        .add("fault.geo-exit-rank", geo_exit_rank_, "test hook: ... that worker rank (-1: off)");
  plan_.add_to(options_);
  auto parsed = options_.parse(argc, argv);
  if (!parsed) return fail(name_, parsed.error().message, 2);
  if (*parsed == parse_outcome::help_shown) return 0;
  if (auto st = plan_.finish(options_); !st) return fail(name_, st.error().message, 2);
  if (plan_.dist.launches()) return launch_processes(argc, argv, plan_.dist, options_, plan_.checkpoint.dir);
  if (eval_only_ && plan_.checkpoint.init_from.empty())
    return fail(name_, "--eval.only needs the trained model: --init.from=FILE_OR_CHECKPOINT", 2);
  const bool evaluate_only = eval_only_ || (train_.steps == 0 && !plan_.checkpoint.init_from.empty());
  if (train_.steps < 1 && !evaluate_only)
    return fail(name_, "--train.steps must be positive (0 only with --init.from: evaluate a saved model)", 2);
  if (train_.batch < 1) return fail(name_, "--train.batch must be positive", 2);
  if (train_.threads < 1) return fail(name_, "--train.threads must be positive", 2);
  if (train_.warmup < 0) return fail(name_, "--train.warmup must not be negative", 2);
  if (!(train_.lr > 0)) return fail(name_, "--train.lr must be positive", 2);
  auto kind = parse_optimizer(optimizer_text_);
  if (!kind) return fail(name_, kind.error().message, 2);
  train_.optimizer = *kind;
  auto mode = actors::parse_exchange_mode(exec_mode_);
  if (!mode) return fail(name_, mode.error().message, 2);
  if (geo_steps_ < 1) return fail(name_, "--exec.geo-steps must be positive", 2);
  if (staleness_ < 0) return fail(name_, "--exec.staleness must not be negative", 2);
  auto encoding = actors::parse_delta_encoding(geo_deltas_);
  if (!encoding) return fail(name_, encoding.error().message, 2);
  auto j = make_job(*this);
  if (!j) return fail(name_, j.error().message, 2);
  if (*mode != actors::exchange_mode::sync) {
    const std::string why = kernels::sparse_update_problem(train_.optimizer_rule());
    if (!j->sparse_tables || !why.empty())
      return fail(
          name_,
          "--exec.mode=" + exec_mode_ +
              (*mode == actors::exchange_mode::hetero ? " puts the tables' lookups and sparse updates on a stage "
                                                        "of their own"
                                                      : " exchanges the tables' touched rows") +
              ": it needs sparse tables (--model.sparse) and an optimizer that updates touched rows alone (" +
              (why.empty() ? std::string("--model.sparse=false") : why) + ")",
          2);
  }
  if (*mode == actors::exchange_mode::hetero)
    if (auto st = hetero_plan(); !st) return fail(name_, st.error().message, 2);
  if (*mode == actors::exchange_mode::geo) {
    if (plan_.shard_params)
      return fail(name_, "--exec.mode=geo trains full table replicas: not with --plan.shard-params", 2);
  }
  exchange_.mode = *mode;
  exchange_.geo_steps = geo_steps_;
  exchange_.staleness = staleness_;
  exchange_.geo_deltas = *encoding;
  exchange_.exit_step = geo_exit_step_;
  exchange_.exit_rank = static_cast<int>(geo_exit_rank_);
  if (j->evaluate_only && plan_.checkpoint.init_from.empty())
    return fail(name_, "nothing to evaluate: give the trained model with --init.from=FILE_OR_CHECKPOINT", 2);
  if (evaluate_only || j->evaluate_only) return evaluate_job(*j);
  return train_job(*j);
}

// --exec.mode=hetero: two pipeline stages (pp 2, tp 1), the planner's cut after every table
// lookup; a manual plan's micro-batches, unless given, as many as keep 32 rows each, at most 8
// (its default of 1 would leave one stage idle while the other works; smaller micro-batches
// make GEMMs too skinny to pay: docs/recommender.md has the figures).
status app::hetero_plan() {
  const auto refuse = [](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "--exec.mode=hetero runs two pipeline stages, the table lookups then the dense layers: " + why);
  };
  if (plan_.mode == planner::plan_mode::serial) return refuse("not with --plan.mode=serial");
  if (!plan_.file.empty()) return refuse("not with --plan.file (give the degrees)");
  if (plan_.pp != 0 && plan_.pp != 2) return refuse("--plan.pp must be 2, not " + std::to_string(plan_.pp));
  if (plan_.tp > 1)
    return refuse("--plan.tp must be 1, not " + std::to_string(plan_.tp) +
                  " (the first stage looks its tables up whole)");
  if (plan_.virtual_stages > 1) return refuse("--plan.virtual-stages must be 1");
  plan_.pp = 2;
  plan_.tp = 1;
  if (plan_.mode == planner::plan_mode::manual && plan_.micro_batches == 0)
    plan_.micro_batches = std::clamp<std::int64_t>(train_.batch / std::max<std::int64_t>(1, plan_.dp) / 32, 1, 8);
  plan_.lookups_first = true;
  return {};
}

// --train.steps=0 --init.from=FILE: the saved model's evaluation, nothing trained.
int app::evaluate_job(const job& j) {
  auto saved = load_parameters(plan_.checkpoint.init_from);
  if (!saved) return fail(name_, "--init.from: " + saved.error().message, 2);
  graph g;
  j.model(g, train_.batch);
  for (const auto& [name, t] : init_parameters(g, 0)) {
    auto it = saved->find(name);
    if (it == saved->end())
      return fail(name_, "--init.from: " + plan_.checkpoint.init_from + " has no '" + name + "'", 2);
    if (it->second.shape() != t.shape() || it->second.type() != t.type())
      return fail(name_,
                  "--init.from: '" + name + "' is " + it->second.shape().to_string() + " in " +
                      plan_.checkpoint.init_from + ", the model's is " + t.shape().to_string(),
                  2);
  }
  json summary = j.summary;
  summary["app"] = name_;
  summary["steps"] = 0;
  summary["evaluated"] = plan_.checkpoint.init_from;
  if (j.evaluate) {
    auto extra = j.evaluate(*saved);
    if (!extra) return fail(name_, extra.error().message, exit_code_for(extra.error()));
    for (auto& [k, v] : extra->items()) summary[k] = v;
  }
  print_summary(summary);
  return 0;
}

int app::train_job(const job& j) {
  training_job t;
  t.app = name_;
  t.model = j.model;
  t.variants = j.variants;
  t.data = j.data;
  t.batch = train_.batch;
  t.steps = train_.steps;
  t.warmup = train_.warmup;
  t.items_per_sample = j.items_per_sample;
  t.rate_unit = j.rate_unit;
  t.optimizer = train_.optimizer_rule();
  t.seed = static_cast<std::uint64_t>(train_.seed);
  t.threads = static_cast<int>(train_.threads);
  t.metrics_path = metrics_;
  t.note = j.note;
  t.sparse_tables = j.sparse_tables;
  t.evaluate_every = eval_every_;
  t.evaluate = j.evaluate;
  t.exchange = exchange_;
  auto r = apps::train(t, plan_, options_.caf_arguments());
  if (!r) return fail(name_, r.error().message, exit_code_for(r.error()));
  if (!r->report) return 0;  // process 0 of the job reports
  if (r->plan_only) {
    json planned = {{"app", name_}, {"plan", r->plan}};
    for (auto& [k, v] : r->model_summary.items()) planned[k] = v;
    print_summary(planned);
    return 0;
  }
  json summary = j.summary;
  summary["app"] = name_;
  summary["batch"] = train_.batch;
  summary["steps"] = train_.steps;
  summary["first_loss"] = r->first_loss;
  summary["final_loss"] = r->final_loss;
  summary[std::string(j.rate_unit) == "tokens/s" ? "tokens_per_s" : "samples_per_s"] = r->items_per_s;
  summary["threads"] = train_.threads;
  summary["plan"] = r->plan;
  summary["restarts"] = r->restarts;
  summary["transitions"] = r->transitions;
  summary["checkpoints"] = r->checkpoints;
  summary["recoveries"] = r->recoveries;
  if (!r->scale_out.empty()) summary["scale_out"] = r->scale_out;
  if (j.sparse_tables) {
    summary["sparse_bytes_sent"] = r->sparse_bytes;
    if (r->max_table_staleness >= 0) summary["max_table_staleness"] = r->max_table_staleness;
  }
  if (!r->resumed_from.is_null()) summary["resumed_from"] = r->resumed_from;
  if (!plan_.checkpoint.export_file.empty()) {
    if (auto st = export_parameters(plan_.checkpoint.export_file, r->parameters); !st)
      return fail(name_, st.error().message, 1);
    summary["exported"] = plan_.checkpoint.export_file;
  }
  if (!r->prediction.empty()) summary["prediction"] = r->prediction;
  for (auto& [k, v] : r->model_summary.items()) summary[k] = v;
  if (j.evaluate) {
    auto extra = j.evaluate(r->parameters);
    if (!extra) return fail(name_, extra.error().message, 1);
    for (auto& [k, v] : extra->items()) summary[k] = v;
  }
  if (r->report_page) {  // --report.file: the page's last version, with the summary's figures
    json figures;
    for (const char* k :
         {"final_loss", "first_loss", "test_accuracy", "test_loss", "samples_per_s", "tokens_per_s", "restarts"})
      if (summary.contains(k)) figures[k] = summary[k];
    r->report_page->finish(figures);
    if (auto st = write_report(plan_.report.file, *r->report_page); !st) return fail(name_, st.error().message, 1);
    summary["report"] = plan_.report.file;
  }
  print_summary(summary);
  if (r->metrics_endpoint && plan_.prometheus.linger_s > 0) {  // a last scrape of the final figures
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(plan_.prometheus.linger_s));
  }
  return 0;
}

}  // namespace cohort::apps
