// The actor runtime (real CAF scheduler, request timeouts): plans equal the serial run, and
// a worker that fails mid-step is seen by the coordinator, respawned, refilled from its
// parameter actor, and the step redone — the losses equal those of the fault-free run.
#include <doctest/doctest.h>

#include <cmath>

#include "actors/runtime.hpp"
#include "apps/models/gpt.hpp"
#include "apps/models/mlp.hpp"
#include "graph/random.hpp"
#include "support/runtime_runner.hpp"
#include "support/tensor_checks.hpp"

using namespace cohort;
using namespace cohort::test;
using namespace std::chrono_literals;

namespace {

caf::actor_system_config& config() {
  static caf::actor_system_config cfg = [] {
    caf::actor_system_config c;
    c.set("scheduler.max-threads", 2);
    return c;
  }();
  return cfg;
}

std::map<std::string, tensor> mlp_batch(std::int64_t step, std::int64_t batch) {
  rng r(500 + static_cast<std::uint64_t>(step));
  tensor x = tensor::empty({batch, 16});
  tensor y = tensor::empty({batch}, dtype::i32);
  for (std::int64_t i = 0; i < batch * 16; ++i) x.data<float>()[i] = r.normal();
  for (std::int64_t i = 0; i < batch; ++i) y.data<std::int32_t>()[i] = static_cast<std::int32_t>(r.below(8));
  return {{"x", x}, {"y", y}};
}

const actors::model_fn mlp = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {16, 32, 24, 8}, b).loss; };

actors::run_options options(planner::parallel_plan plan) {
  actors::run_options o;
  o.plan = plan;
  o.batch = 16;
  o.steps = 12;
  o.optimizer = sgd_config{.lr = 0.1f, .momentum = 0.9f};
  o.seed = 9;
  o.threads = 2;
  o.timeout = 10s;
  return o;
}

actors::batch_fn data() {
  return [](std::int64_t step) -> result<std::map<std::string, tensor>> { return mlp_batch(step, 16); };
}

std::vector<float> serial() {
  return serial_losses(mlp, 16, 12, sgd_config{.lr = 0.1f, .momentum = 0.9f}, 9,
                       [](std::int64_t s) { return mlp_batch(s, 16); });
}

// The serial run's parameters after the same 12 steps.
parameter_store serial_parameters() {
  static graph g;
  static parameter_store out = [] {
    var loss = mlp(g, 16);
    auto tr =
        kernels::serial_trainer::create(g, loss, {.optimizer = sgd_config{.lr = 0.1f, .momentum = 0.9f}, .seed = 9});
    for (int s = 0; s < 12; ++s) {
      for (auto& [name, t] : mlp_batch(s, 16)) (*tr)->input(name).copy_from(t);
      (void)(*tr)->step();
    }
    return (*tr)->parameters();
  }();
  return out;
}

double worst_relative(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(b[i] - a[i]) / std::fabs(static_cast<double>(a[i])));
  return worst;
}

}  // namespace

TEST_CASE("the actor runtime trains every kind of plan like the serial program") {
  auto reference = serial();
  struct named {
    const char* name;
    planner::parallel_plan plan;
  };
  const named plans[] = {{"1 rank", {}},
                         {"dp2", {.dp = 2}},
                         {"tp2 pp2 m2", {.tp = 2, .pp = 2, .micro_batches = 2}},
                         {"dp2 sharded", {.dp = 2, .shard_params = true}},
                         {"dp2 tp2 pp2 m2 gpipe",
                          {.dp = 2, .tp = 2, .pp = 2, .micro_batches = 2, .schedule = planner::schedule_kind::gpipe}},
                         // uneven splits of the 16 rows: shares one row apart, weighted by their rows
                         {"dp3 (6 5 5 rows)", {.dp = 3}},
                         {"dp3 sharded", {.dp = 3, .shard_params = true}},
                         {"pp3 m5 (4 3 3 3 3 rows)", {.pp = 3, .micro_batches = 5}},
                         {"dp2 tp2 pp2 m3 (3 3 2 rows each)", {.dp = 2, .tp = 2, .pp = 2, .micro_batches = 3}}};
  for (const auto& p : plans) {
    const std::string plan_name = p.name;
    CAPTURE(plan_name);
    caf::actor_system sys{config()};
    std::vector<std::int64_t> seen;
    auto o = options(p.plan);
    o.on_step = [&](const actors::step_metrics& m) {
      seen.push_back(m.step);
      CHECK(m.task_seconds.size() == static_cast<std::size_t>(p.plan.ranks()));
    };
    auto r = actors::train(sys, mlp, data(), o);
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    REQUIRE(r->losses.size() == reference.size());
    CHECK(seen.size() == 12);
    CHECK(worst_relative(reference, r->losses) <= 1e-5);
    CHECK(r->restarts == 0);
    // the trained model, gathered from the parameter actors, is the serial run's model
    auto expected = serial_parameters();
    REQUIRE(r->parameters.size() == expected.size());
    for (auto& [name, t] : expected) {
      CAPTURE(name);
      REQUIRE(r->parameters.count(name) == 1);
      CHECK_MESSAGE(close(r->parameters.at(name), t, 1e-4f, 1e-6f),
                    describe_mismatch(r->parameters.at(name), t, 1e-4f, 1e-6f));
    }
  }
}

TEST_CASE("a worker that fails mid-step is respawned and refilled and the step redone with equal losses" *
          doctest::test_suite("failure")) {
  auto reference = serial();
  for (auto plan : {planner::parallel_plan{.dp = 2, .pp = 2, .micro_batches = 2},
                    planner::parallel_plan{.dp = 2, .tp = 2, .shard_params = true}}) {
    CAPTURE(plan.ranks());
    caf::actor_system sys{config()};
    auto clean = actors::train(sys, mlp, data(), options(plan));
    REQUIRE_MESSAGE(clean.ok(), clean.error().message);
    auto o = options(plan);
    o.inject = {.rank = 3, .step = 5, .task_index = 1};  // rank 3: replica 1's last stage / tp rank
    auto faulty = actors::train(sys, mlp, data(), o);
    REQUIRE_MESSAGE(faulty.ok(), faulty.error().message);
    REQUIRE(faulty->failures.size() == 1);
    CHECK(faulty->failures[0].rank == 3);
    CHECK(faulty->failures[0].step == 5);
    CHECK(faulty->failures[0].reason.find("injected failure in rank 3 at step 5") != std::string::npos);
    CHECK(faulty->restarts == 1);
    MESSAGE("detected after " << faulty->failures[0].detect_seconds << " s, recovered in "
                              << faulty->failures[0].recover_seconds << " s");
    REQUIRE(faulty->losses.size() == clean->losses.size());
    for (std::size_t i = 0; i < clean->losses.size(); ++i) CHECK(faulty->losses[i] == clean->losses[i]);  // bit for bit
    CHECK(worst_relative(reference, faulty->losses) <= 1e-5);
  }
}

TEST_CASE("a failure that keeps happening ends the run with an error naming it" * doctest::test_suite("failure")) {
  caf::actor_system sys{config()};
  auto o = options({.dp = 2});
  o.inject = {.rank = 0, .step = 2, .task_index = 0};
  o.max_restarts = 0;
  auto r = actors::train(sys, mlp, data(), o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("step 2 failed 1 times (max-restarts 0)") != std::string::npos);
}

TEST_CASE("a plan the model cannot take is an error before anything runs") {
  caf::actor_system sys{config()};
  auto r = actors::train(sys, mlp, data(), options({.tp = 64}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("plan tp=64") != std::string::npos);
  auto b = actors::train(sys, mlp, data(), options({.dp = 3, .micro_batches = 6}));
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().message == "plan: batch 16 is smaller than dp 3 x micro-batches 6 (every share needs a row)");
  // 16 rows over dp3 are shares of 6 and 5: a model whose graph changes with the rows cannot run both
  const actors::model_fn by_rows = [](graph& g, std::int64_t rows) {
    return apps::build_mlp(
               g, rows % 2 == 0 ? std::vector<std::int64_t>{16, 32, 24, 8} : std::vector<std::int64_t>{16, 32, 8}, rows)
        .loss;
  };
  auto c = actors::train(sys, by_rows, data(), options({.dp = 3}));
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message ==
        "the model's graph depends on the micro-batch size (the nodes of stage 0 differ between its two shares): give "
        "a batch that splits evenly");
  CHECK(actors::train(sys, by_rows, data(), options({.dp = 2})).ok());  // 8 and 8: one size
}
