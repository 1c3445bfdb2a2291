// The planner actor's answer to processes waiting to join (decide_scale): the plan for the
// larger job, both predictions from the cost model, the bytes the transition would move, and
// the decision — grow only when the time saved over the steps left exceeds the transition's
// cost (auto), or as --elastic.scale-out says. Priced on a machine profile of 8 cores, where
// 4 single-threaded processes do beat 2.
#include <doctest/doctest.h>

#include "actors/planner_actor.hpp"
#include "apps/models/mlp.hpp"

using namespace cohort;
using namespace cohort::actors;

namespace {

const model_fn mlp = [](graph& g, std::int64_t b) { return apps::build_mlp(g, {256, 512, 512, 10}, b).loss; };
constexpr std::int64_t batch = 256;

// The planner's inputs as process 0 has them: an 8-core profile, AdamW's two slots, the
// planner's own choice re-planned (replan) unless `users_plan`.
planner_inputs inputs(bool users_plan, int cores = 8) {
  planner::plan_request r;
  planner::machine_profile profile;
  profile.cores = cores;
  auto s = planner::prepare_planning(mlp, 2, batch, 2, r, std::move(profile), "");
  REQUIRE_MESSAGE(s.ok(), s.error().message);
  planner_inputs in;
  in.model = mlp;
  in.batch = batch;
  in.optimizer_slots = 2;
  in.setup = std::make_shared<planner::planning_setup>(std::move(*s));
  if (!users_plan) in.replan = r;
  return in;
}

// dp2 over processes 0 and 1 of a job of 4 slots, two processes waiting.
scale_request two_waiting(std::int64_t remaining, scale_policy policy = scale_policy::automatic) {
  scale_request q;
  q.joiners = 2;
  q.live = {true, true, false, false};
  q.owner = {0, 1};
  q.threads_per_process = 1;
  q.step = 10;
  q.remaining_steps = remaining;
  q.policy = policy;
  return q;
}

}  // namespace

TEST_CASE("the job grows when the time saved over the steps left exceeds the transition's cost") {
  const auto in = inputs(false);
  auto current = compile(mlp, {.dp = 2}, batch);
  REQUIRE(current);
  auto many = decide_scale(in, two_waiting(100000), *current);
  REQUIRE_MESSAGE(many, (many ? "" : many.error().message));
  const scale_decision& d = many->record;
  MESSAGE(d.from << " -> " << d.to << ": " << d.why);
  CHECK(d.processes_before == 2);
  CHECK(d.processes_after == 4);
  CHECK(d.waiting == 2);
  CHECK(d.step == 10);
  CHECK(many->plan.choice.plan.ranks() == 4);  // the planner's choice for 4 devices
  CHECK(d.predicted_step_s_after < d.predicted_step_s_before);
  CHECK(d.bytes > 0);
  CHECK(d.cost_s > 0);
  CHECK(d.saved_s == doctest::Approx((d.predicted_step_s_before - d.predicted_step_s_after) * 100000));
  CHECK(d.adopted);
  CHECK(d.why.find("pays: saves") == 0);
  CHECK(many->plan.predicted_step_s == d.predicted_step_s_after);
  // one step left: the same plans, and the decision is the comparison (its cost is partly measured)
  auto one = decide_scale(in, two_waiting(1), *current);
  REQUIRE(one);
  CHECK(one->record.adopted == (one->record.saved_s > one->record.cost_s));
  CHECK(one->record.to == d.to);
  CHECK(one->record.saved_s < d.saved_s);
  // the policies decide whatever the figures say, and say so
  auto always = decide_scale(in, two_waiting(1, scale_policy::always), *current);
  REQUIRE(always);
  CHECK(always->record.adopted);
  CHECK(always->record.why.find("--elastic.scale-out=always") == 0);
  auto never = decide_scale(in, two_waiting(100000, scale_policy::never), *current);
  REQUIRE(never);
  CHECK_FALSE(never->record.adopted);
  CHECK(never->record.why.find("--elastic.scale-out=never") == 0);
}

TEST_CASE("the user's plan is placed over the larger job, and one with too few ranks cannot grow") {
  const auto in = inputs(true);
  auto dp4 = compile(mlp, {.dp = 4}, batch);
  REQUIRE(dp4);
  scale_request q = two_waiting(100000);
  q.owner = {0, 0, 1, 1};
  auto placed = decide_scale(in, q, *dp4);
  REQUIRE(placed);
  CHECK(placed->record.to == "dp4 tp1 pp1 m1");  // the same plan, one rank per process after
  CHECK(placed->record.from == placed->record.to);
  CHECK(placed->record.predicted_step_s_after < placed->record.predicted_step_s_before);  // 4 threads, not 2
  CHECK(placed->record.adopted);
  auto dp2 = compile(mlp, {.dp = 2}, batch);
  REQUIRE(dp2);
  auto refused = decide_scale(in, two_waiting(100000), *dp2);
  REQUIRE(refused);
  CHECK_FALSE(refused->record.adopted);
  CHECK(refused->record.why ==
        "dp2 tp1 pp1 m1 has 2 ranks: it cannot use 4 processes (--fault.replan=always lets the planner re-plan)");
  planner_inputs none = in;
  none.setup.reset();
  CHECK_FALSE(decide_scale(none, two_waiting(10), *dp2).ok());  // only process 0 decides
}

TEST_CASE("on one core more processes save nothing, so the job does not grow") {
  const auto in = inputs(true, /*cores=*/1);
  auto dp4 = compile(mlp, {.dp = 4}, batch);
  REQUIRE(dp4);
  scale_request q = two_waiting(100000);
  q.owner = {0, 0, 1, 1};
  auto d = decide_scale(in, q, *dp4);
  REQUIRE(d);
  CHECK(d->record.predicted_step_s_after == d->record.predicted_step_s_before);
  CHECK(d->record.saved_s == 0);
  CHECK_FALSE(d->record.adopted);
  CHECK(d->record.why.find("does not pay: saves 0 s over 100000 steps") == 0);
}
