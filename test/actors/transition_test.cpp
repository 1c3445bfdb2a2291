// Plan transitions in a running job, on the real runtime: the planner actor decides the new
// plan (a given file's, fixed degrees, or its own choice from the cached analysis), every
// parameter and its optimizer state move to the new layout, and the whole run's losses equal
// the serial run's within the equivalence suite's tolerance (1e-5 relative over 30 steps).
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

#include "apps/models/dlrm.hpp"
#include "apps/models/gpt.hpp"
#include "apps/models/mlp.hpp"
#include "support/runtime_runner.hpp"
#include "support/toy_data.hpp"

using namespace cohort;
using namespace cohort::test;
using planner::parallel_plan;

namespace {

constexpr int steps = 30;

// The planner's inputs for this machine's defaults (no profile read).
std::shared_ptr<planner::planning_setup> setup_for(const actors::model_fn& model, std::int64_t batch, int slots) {
  planner::plan_request r;
  planner::machine_profile defaults;  // a named value: GCC 12 warns of a temporary's vectors here
  auto s = planner::prepare_planning(model, slots, batch, 2, r, std::move(defaults), "");
  REQUIRE_MESSAGE(s.ok(), s.error().message);
  return std::make_shared<planner::planning_setup>(std::move(*s));
}

// A change to fixed degrees (as --plan.change-to=FILE gives them, cuts from the planner).
actors::plan_change to_plan(std::int64_t at, const parallel_plan& p) {
  actors::plan_change c;
  c.at_step = at;
  c.label = planner::describe(p);
  c.request.mode = planner::plan_mode::manual;
  c.request.dp = p.dp, c.request.tp = p.tp, c.request.pp = p.pp, c.request.micro_batches = p.micro_batches;
  c.request.schedule = planner::to_string(p.schedule);
  c.request.shard_params = p.shard_params;
  c.request.virtual_stages = p.virtual_stages;
  return c;
}

const actors::model_fn mlp = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {24, 36, 30, 10}, b).loss; };
const actors::model_fn gpt = [](graph& g, std::int64_t b) {
  return apps::build_gpt(g, {.layers = 2, .d = 24, .heads = 3, .seq = 16, .vocab = 256}, b).loss;
};

}  // namespace

TEST_CASE("GPT: pp2 m4, then interleaved pp2 v2 m4 from step 10, then dp2 from 20: the serial run's losses") {
  const optimizer_config opt = adamw_config{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .weight_decay = 0.1f};
  auto serial = serial_losses(gpt, 8, steps, opt, 5, gpt_data(8, 16));
  runtime_run run;
  run.plan = {.pp = 2, .micro_batches = 4};
  run.changes = {to_plan(10, {.pp = 2, .micro_batches = 4, .virtual_stages = 2}), to_plan(20, {.dp = 2})};
  run.planning = setup_for(gpt, 8, 2);
  auto s = runtime_summary(gpt, run, 8, steps, opt, 5, gpt_data(8, 16));
  check_same_losses(serial, std::vector<float>(s.losses.begin(), s.losses.end()), "pp2 -> pp2 v2 -> dp2");
  REQUIRE(s.transitions.size() == 2);
  CHECK(s.transitions[0].from == "dp1 tp1 pp2 m4 1f1b");
  CHECK(s.transitions[0].to == "dp1 tp1 pp2 v2 m4 1f1b");
  CHECK(s.transitions[0].plan["virtual_stages"] == 2);
  CHECK(s.transitions[0].plan["cuts"].size() == 3);  // four stages, two per rank
  CHECK(s.transitions[1].from == "dp1 tp1 pp2 v2 m4 1f1b");
}

TEST_CASE("MLP: dp2 sharded, then tp2 pp2 m4 from step 10: the losses equal the serial run's") {
  const optimizer_config opt = sgd_config{.lr = 0.1f, .momentum = 0.9f};
  auto serial = serial_losses(mlp, 24, steps, opt, 3, mlp_data(24));
  runtime_run run;
  run.plan = {.dp = 2, .shard_params = true};
  run.changes = {to_plan(10, {.tp = 2, .pp = 2, .micro_batches = 4})};
  run.planning = setup_for(mlp, 24, 1);
  auto s = runtime_summary(mlp, run, 24, steps, opt, 3, mlp_data(24));
  check_same_losses(serial, std::vector<float>(s.losses.begin(), s.losses.end()), "dp2 sharded -> tp2 pp2 m4");
  REQUIRE(s.transitions.size() == 1);
  const auto& t = s.transitions[0];
  CHECK(t.step == 10);
  CHECK(t.from == "dp2 tp1 pp1 m1 sharded");
  CHECK(t.to == "dp1 tp2 pp2 m4 1f1b");
  // every parameter and its momentum, once, plus the copies tp replicates (fc2's bias, fc3)
  const double params = 24 * 36 + 36 + 36 * 30 + 30 + 30 * 10 + 10, replicated = 30 + 30 * 10 + 10;
  CHECK(t.bytes_moved == doctest::Approx((params + replicated) * 4 * 2));
  CHECK(t.bytes_across_processes == 0);
  CHECK(t.params_kept == 0);  // no piece is the same in both plans
  CHECK(t.params_retired == 2);
  CHECK(t.params_spawned == 4);
  CHECK(t.plan["cuts"].size() == 1);  // the planner's cut, executed as planned
  MESSAGE("transition " << t.seconds << " s, re-plan " << t.replan_seconds << " s, prepare " << t.prepare_seconds
                        << " s");
}

TEST_CASE("MLP: dp2, then dp4, then dp4 m2: parameter actors whose pieces stay are kept, the losses the serial run's") {
  const optimizer_config opt = sgd_config{.lr = 0.1f, .momentum = 0.9f};
  auto serial = serial_losses(mlp, 24, steps, opt, 3, mlp_data(24));
  runtime_run run;
  run.plan = {.dp = 2};
  run.changes = {to_plan(10, {.dp = 4}), to_plan(20, {.dp = 4, .micro_batches = 2})};
  run.planning = setup_for(mlp, 24, 1);
  auto s = runtime_summary(mlp, run, 24, steps, opt, 3, mlp_data(24));
  check_same_losses(serial, std::vector<float>(s.losses.begin(), s.losses.end()), "dp2 -> dp4 -> dp4 m2");
  REQUIRE(s.transitions.size() == 2);
  const double params = 24 * 36 + 36 + 36 * 30 + 30 + 30 * 10 + 10;
  const auto& grow = s.transitions[0];
  CHECK(grow.params_kept == 2);  // the replicas 0 and 1 stay, 2 and 3 are filled from replica 0
  CHECK(grow.params_spawned == 2);
  CHECK(grow.params_retired == 0);
  CHECK(grow.workers_retired == 2);
  CHECK(grow.workers_spawned == 4);
  CHECK(grow.bytes_moved == doctest::Approx(2 * params * 4 * 2));  // values and momentum, twice
  const auto& same_pieces = s.transitions[1];
  CHECK(same_pieces.params_kept == 4);
  CHECK(same_pieces.params_spawned == 0);
  CHECK(same_pieces.bytes_moved == 0);
}

TEST_CASE("GPT: dp2, then pp2 1f1b m4, then dp2 tp2: the losses equal the serial run's") {
  const optimizer_config opt = adamw_config{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .weight_decay = 0.1f};
  auto serial = serial_losses(gpt, 8, steps, opt, 5, gpt_data(8, 16));
  runtime_run run;
  run.plan = {.dp = 2};
  run.changes = {to_plan(10, {.pp = 2, .micro_batches = 4}), to_plan(20, {.dp = 2, .tp = 2})};
  run.planning = setup_for(gpt, 8, 2);
  auto s = runtime_summary(gpt, run, 8, steps, opt, 5, gpt_data(8, 16));
  check_same_losses(serial, std::vector<float>(s.losses.begin(), s.losses.end()), "dp2 -> pp2 m4 -> dp2 tp2");
  REQUIRE(s.transitions.size() == 2);
  CHECK(s.transitions[0].to == "dp1 tp1 pp2 m4 1f1b");
  CHECK(s.transitions[1].from == "dp1 tp1 pp2 m4 1f1b");
  CHECK(s.transitions[1].to == "dp2 tp2 pp1 m1");
  CHECK(s.transitions[1].step == 20);
}

TEST_CASE("GPT: a change to the planner's own choice re-plans from the cached analysis") {
  const optimizer_config opt = adamw_config{.lr = 3e-3f};
  auto serial = serial_losses(gpt, 8, 12, opt, 5, gpt_data(8, 16));
  runtime_run run;
  run.plan = {.tp = 2, .pp = 2, .micro_batches = 2};
  actors::plan_change c;
  c.at_step = 6;
  c.label = "auto";
  c.request.mode = planner::plan_mode::automatic;
  run.changes = {c};
  run.planning = setup_for(gpt, 8, 2);
  auto s = runtime_summary(gpt, run, 8, 12, opt, 5, gpt_data(8, 16));
  check_same_losses(serial, std::vector<float>(s.losses.begin(), s.losses.end()), "tp2 pp2 m2 -> auto");
  REQUIRE(s.transitions.size() == 1);
  CHECK(s.transitions[0].plan["ranks"] == 4);  // the same devices
  CHECK(s.transitions[0].plan.contains("predicted"));
  MESSAGE("re-planned to " << s.transitions[0].to << " in " << s.transitions[0].replan_seconds
                           << " s (docs/benchmarks.md has the figures)");
  CHECK(s.transitions[0].replan_seconds > 0);  // measured and recorded
}

TEST_CASE("a plan change the model cannot take ends the run with the planner's error and its code") {
  runtime_run run;
  run.plan = {.dp = 2};
  run.changes = {to_plan(3, {.tp = 64})};
  run.planning = setup_for(mlp, 24, 1);
  actors::run_options o;
  o.plan = run.plan;
  o.batch = 24;
  o.steps = 6;
  o.changes = run.changes;
  o.planning = run.planning;
  o.timeout = std::chrono::milliseconds(30000);
  auto data = mlp_data(24);
  std::vector<std::int64_t> seen;
  o.on_step = [&](const actors::step_metrics& m) { seen.push_back(m.step); };
  caf::actor_system sys{test_config()};
  auto r = actors::train(
      sys, mlp, [&](std::int64_t k) -> result<std::map<std::string, tensor>> { return data(k); }, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == errc::invalid_argument);
  CHECK(r.error().message.find("tp=64") != std::string::npos);
  CHECK(seen == std::vector<std::int64_t>{0, 1, 2});  // the steps before it ran
}

TEST_CASE("DLRM with sparse table gradients: dp2, then dp2 sharded, then pp2 m4: the losses equal the serial run's") {
  // the tables' Adagrad sums move with their rows; the new plans keep the gradients sparse
  const actors::model_fn dlrm = [](graph& g, std::int64_t b) { return apps::build_dlrm(g, toy_dlrm(), b).loss; };
  const optimizer_config opt = adagrad_config{.lr = 0.05f};
  auto serial = serial_losses(dlrm, 16, steps, opt, 7, dlrm_data(16));
  runtime_run run;
  run.plan = {.dp = 2};
  run.sparse_tables = true;
  run.changes = {to_plan(10, {.dp = 2, .shard_params = true}), to_plan(20, {.pp = 2, .micro_batches = 4})};
  run.planning = setup_for(dlrm, 16, 1);
  auto s = runtime_summary(dlrm, run, 16, steps, opt, 7, dlrm_data(16));
  check_same_losses(serial, std::vector<float>(s.losses.begin(), s.losses.end()),
                    "dp2 -> dp2 sharded -> pp2 m4 sparse");
  CHECK(s.transitions.size() == 2);
}

TEST_CASE("DLRM with table-wise sharded tables: tp2, then tp3, then dp2: the tables move whole to their new owners") {
  // tp2 puts b on rank 0 and a, c on rank 1; tp3 one table per rank; dp2 replicates them:
  // each transition moves whole tables (with their Adagrad sums) from one owner to another
  const actors::model_fn dlrm = [](graph& g, std::int64_t b) {
    apps::dlrm_config c = toy_dlrm();
    c.sharding = table_sharding::table;
    return apps::build_dlrm(g, c, b).loss;
  };
  const optimizer_config opt = adagrad_config{.lr = 0.05f};
  auto serial = serial_losses(dlrm, 16, steps, opt, 7, dlrm_data(16));
  runtime_run run;
  run.plan = {.tp = 2};
  run.sparse_tables = true;
  run.changes = {to_plan(10, {.tp = 3}), to_plan(20, {.dp = 2})};
  run.planning = setup_for(dlrm, 16, 1);
  auto s = runtime_summary(dlrm, run, 16, steps, opt, 7, dlrm_data(16));
  check_same_losses(serial, std::vector<float>(s.losses.begin(), s.losses.end()), "tp2 -> tp3 -> dp2 table-wise");
  CHECK(s.transitions.size() == 2);
}

TEST_CASE("DLRM in async and geo mode through plan transitions: the staleness bound holds, geo's replicas agree") {
  // Plain SGD for the losses' comparison: on these toy tables (5 to 11 rows, every row read
  // every step) Adagrad's first, normalized steps make any stale read cost ~20% of the loss.
  const actors::model_fn dlrm = [](graph& g, std::int64_t b) { return apps::build_dlrm(g, toy_dlrm(), b).loss; };
  const optimizer_config opt = sgd_config{.lr = 0.1f};
  auto serial = serial_losses(dlrm, 16, steps, opt, 7, dlrm_data(16));
  auto close_to_serial = [&](const actors::run_summary& s, const std::string& what) {
    CAPTURE(what);
    REQUIRE(s.losses.size() == serial.size());
    double worst = 0;
    for (std::size_t i = 0; i < serial.size(); ++i)
      worst = std::max(worst, std::fabs(s.losses[i] - serial[i]) / std::fabs(static_cast<double>(serial[i])));
    MESSAGE(what << ": max relative loss difference from serial " << worst);
    CHECK(worst < 0.05);
    CHECK(s.transitions.size() == 2);
  };
  // async, staleness 2: a transition reads the state whole (the waiting entries applied), the
  // new plan's lookups start from it; no lookup ever reads tables more than 2 steps old
  runtime_run async;
  async.plan = {.dp = 2};
  async.sparse_tables = true;
  async.exchange.mode = actors::exchange_mode::async;
  async.exchange.staleness = 2;
  async.changes = {to_plan(10, {.dp = 2, .shard_params = true}), to_plan(20, {.pp = 2, .micro_batches = 4})};
  async.planning = setup_for(dlrm, 16, 1);
  std::int64_t worst_lag = -1;
  async.on_step = [&](const actors::step_metrics& m) {
    for (std::int64_t v : m.table_versions)
      if (v >= 0) worst_lag = std::max(worst_lag, m.step - v);
  };
  auto a = runtime_summary(dlrm, async, 16, steps, opt, 7, dlrm_data(16));
  close_to_serial(a, "async staleness 2: dp2 -> dp2 sharded -> pp2 m4");
  CHECK(worst_lag == 2);
  CHECK(a.max_table_staleness == 2);
  // geo, K=4: the step before each transition gathers, so the new plan starts from replicas
  // that agree; at the end the runtime checks they still do (collect_parameters)
  runtime_run geo;
  geo.plan = {.dp = 2};
  geo.sparse_tables = true;
  geo.exchange.mode = actors::exchange_mode::geo;
  geo.exchange.geo_steps = 4;
  geo.changes = {to_plan(10, {.dp = 2, .pp = 2, .micro_batches = 2}), to_plan(21, {.dp = 2})};
  geo.planning = setup_for(dlrm, 16, 1);
  geo.collect_parameters = true;
  auto g = runtime_summary(dlrm, geo, 16, steps, opt, 7, dlrm_data(16));
  close_to_serial(g, "geo K=4: dp2 -> dp2 pp2 m2 -> dp2");
  // with Adagrad the rows' sums travel with their deltas: the gathered steps before each
  // boundary update alike on both replicas, which still agree at the end
  auto adagrad = runtime_summary(dlrm, geo, 16, steps, adagrad_config{.lr = 0.05f}, 7, dlrm_data(16));
  CHECK(adagrad.transitions.size() == 2);
  CHECK(adagrad.losses.back() < adagrad.losses.front());
}
