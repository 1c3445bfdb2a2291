// What the refit is given: per stage, forward and backward averaged over the stage's ranks,
// the reduction from the replica that waited least in each step.
#include <doctest/doctest.h>

#include "apps/models/mlp.hpp"
#include "planner/run_refit.hpp"

using namespace cohort;

namespace {

planner::parallel_plan plan_of(int dp, int tp, int pp) {
  planner::parallel_plan p;
  p.dp = dp, p.tp = tp, p.pp = pp;
  return p;
}

}  // namespace

TEST_CASE("the reduction is the replica that waited least, step by step") {
  // dp2 pp2: ranks 0 and 2 are stage 0, ranks 1 and 3 stage 1. Which replica arrives last
  // alternates: the per-rank sums (2 + 30 = 32 for each) would call the reduction 16 ms.
  auto plan = plan_of(2, 1, 2);
  std::vector<planner::stage_prediction> predicted(2);
  predicted[0].update_comm_s = predicted[1].update_comm_s = 0.001;
  planner::task_totals t;
  t.steps = 2;
  t.per_rank = {{0.2, 0.4, 0.032}, {0.6, 1.0, 0.008}, {0.4, 0.8, 0.032}, {0.6, 1.0, 0.012}};
  t.update_per_step = {{0.002, 0.030}, {0.004, 0.004}, {0.030, 0.002}, {0.006, 0.006}};
  auto obs = planner::stage_observations(plan, predicted, t);
  REQUIRE(obs.size() == 2);
  CHECK(obs[0].measured.forward_s == doctest::Approx(0.15));  // (0.2 + 0.4) / 2 ranks / 2 steps
  CHECK(obs[0].measured.backward_s == doctest::Approx(0.3));
  CHECK(obs[0].measured.update_s == doctest::Approx(0.002));
  CHECK(obs[1].measured.forward_s == doctest::Approx(0.3));
  CHECK(obs[1].measured.update_s == doctest::Approx(0.004));
  CHECK(obs[1].predicted.update_comm_s == 0.001);
}

TEST_CASE("without a step-by-step record the reduction is the least-waiting replica over the run") {
  auto plan = plan_of(2, 1, 1);
  std::vector<planner::stage_prediction> predicted(1);
  planner::task_totals t;
  t.steps = 4;
  t.per_rank = {{0.4, 0.8, 0.040}, {0.4, 0.8, 0.012}};
  auto obs = planner::stage_observations(plan, predicted, t);
  REQUIRE(obs.size() == 1);
  CHECK(obs[0].measured.update_s == doctest::Approx(0.003));
}

TEST_CASE("tensor-parallel ranks of a stage are averaged with it, no timed step, no observation") {
  auto plan = plan_of(1, 2, 2);  // ranks 0, 1: stage 0; 2, 3: stage 1
  std::vector<planner::stage_prediction> predicted(2);
  planner::task_totals t;
  t.steps = 1;
  t.per_rank = {{0.1, 0.2, 0.0}, {0.3, 0.4, 0.0}, {0.5, 0.6, 0.0}, {0.7, 0.8, 0.0}};
  t.update_per_step = {{0.0}, {0.0}, {0.0}, {0.0}};
  auto obs = planner::stage_observations(plan, predicted, t);
  REQUIRE(obs.size() == 2);
  CHECK(obs[0].measured.forward_s == doctest::Approx(0.2));
  CHECK(obs[1].measured.backward_s == doctest::Approx(0.7));
  t.steps = 0;
  CHECK(planner::stage_observations(plan, predicted, t).empty());
}

TEST_CASE("a long run: the reduction from the steps recorded step by step") {
  // 10 timed steps, the first 2 recorded (runs keep the first task_totals::max_recorded_steps)
  auto plan = plan_of(2, 1, 1);
  std::vector<planner::stage_prediction> predicted(1);
  planner::task_totals t;
  t.steps = 10;
  t.per_rank = {{1.0, 2.0, 0.5}, {1.0, 2.0, 0.5}};
  t.update_per_step = {{0.010, 0.001}, {0.003, 0.020}};
  auto obs = planner::stage_observations(plan, predicted, t);
  REQUIRE(obs.size() == 1);
  CHECK(obs[0].measured.forward_s == doctest::Approx(0.1));
  CHECK(obs[0].measured.update_s == doctest::Approx(0.002));  // (0.003 + 0.001) / 2
}

TEST_CASE("the online refit counts the first plan's timed steps only and refits early once") {
  planner::plan_request request;
  request.mode = planner::plan_mode::manual;
  request.dp = 2;
  auto model = [](graph& g, std::int64_t rows) { return apps::build_mlp(g, {16, 32, 8}, rows).loss; };
  auto s = planner::prepare_planning(model, 0, 16, 2, request, planner::machine_profile{}, "");
  REQUIRE(s.ok());
  auto setup = std::make_shared<planner::planning_setup>(std::move(*s));
  auto choice = planner::choose_plan(*setup, request);
  REQUIRE(choice.ok());
  REQUIRE(choice->predicted.has_value());
  planner::online_refit r(*choice, setup, /*save=*/false, /*warmup=*/2, /*steps=*/30, /*early_steps=*/4);
  const std::vector<planner::task_seconds> ranks = {{0.002, 0.004, 0.001}, {0.002, 0.004, 0.0012}};
  int early = 0;
  for (std::int64_t step = 0; step < 12; ++step) early += r.observe(step, 0, ranks, 0.008).has_value() ? 1 : 0;
  for (std::int64_t step = 12; step < 20; ++step)
    CHECK_FALSE(r.observe(step, 1, ranks, 0.1).has_value());  // another plan
  CHECK(early == 1);                                          // after the 4th timed step (step 5), once
  CHECK(r.totals().steps == 10);                              // steps 2..11: warm-up and the second plan left out
  auto j = r.finish();
  CHECK(j["measured_step_s"].get<double>() == doctest::Approx(0.008));
  CHECK(j.contains("refit"));
  CHECK_FALSE(j.contains("profile"));  // save=false
}
