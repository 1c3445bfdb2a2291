// The coordinator's decisions without a scheduler: events in, actions out, in order.
#include <doctest/doctest.h>

#include "actors/step_protocol.hpp"

using namespace cohort;
using namespace cohort::actors;

namespace {

const clock_type::time_point t0{};

step_protocol::config config(std::int64_t steps, int ranks, std::vector<bool> local = {}, bool multi_process = false,
                             std::vector<std::int64_t> change_at = {}, int max_restarts = 3) {
  step_protocol::config c;
  c.steps = steps;
  c.ranks = ranks;
  c.local = std::move(local);
  c.multi_process = multi_process;
  c.change_at = std::move(change_at);
  c.max_restarts = max_restarts;
  return c;
}

step_outcome ok(int rank, double loss_share = 0, bool reports = false) {
  step_outcome o;
  o.rank = rank;
  o.report.loss_share = loss_share;
  o.report.reports_loss = reports;
  o.report.seconds = {0.1 * (rank + 1), 0.2, 0.01};
  return o;
}

step_outcome failed(int rank, const std::string& why) {
  step_outcome o;
  o.rank = rank;
  o.failure = why;
  return o;
}

template <class A>
const A& only(const actions& a) {
  REQUIRE(a.size() == 1);
  REQUIRE(std::holds_alternative<A>(a[0]));
  return std::get<A>(a[0]);
}

}  // namespace

TEST_CASE("a step commits when every local worker finished it, then the next starts") {
  step_protocol p(config(2, 2));
  auto s = only<start_step_action>(p.start(t0));
  CHECK(s.generation == 0);
  CHECK(s.step == 0);
  CHECK(s.committed == -1);
  CHECK(p.on_outcome(0, 0, 0, ok(0, 0.25, true), "", t0).empty());
  auto a = p.on_outcome(0, 0, 1, ok(1, 0.5, true), "", t0 + std::chrono::milliseconds(30));
  REQUIRE(a.size() == 2);
  const auto& report = std::get<report_step_action>(a[0]).metrics;
  CHECK(report.step == 0);
  CHECK(report.loss == doctest::Approx(0.75));
  CHECK(report.seconds == doctest::Approx(0.03));
  REQUIRE(report.task_seconds.size() == 2);
  CHECK(report.task_seconds[1].forward_s == doctest::Approx(0.2));
  CHECK(std::get<start_step_action>(a[1]).committed == 0);
  // the second and last step: the parameters are collected from what step 1 committed
  p.on_outcome(0, 1, 0, ok(0), "", t0);
  a = p.on_outcome(0, 1, 1, ok(1), "", t0);
  REQUIRE(a.size() == 2);
  CHECK(std::get<collect_action>(a[1]).committed == 1);
  CHECK(only<finish_action>(p.on_collected()).outcome.ok());
  CHECK(p.finished());
  CHECK(p.losses().size() == 2);
}

TEST_CASE("answers of another generation or step, or twice from one rank, are ignored") {
  step_protocol p(config(3, 2));
  p.start(t0);
  CHECK(p.on_outcome(1, 0, 0, ok(0), "", t0).empty());  // a later generation that does not exist
  CHECK(p.on_outcome(0, 5, 0, ok(0), "", t0).empty());  // another step
  CHECK(p.on_outcome(0, 0, 0, ok(0), "", t0).empty());
  CHECK(p.on_outcome(0, 0, 0, failed(0, "late"), "", t0).empty());  // the same rank again
  CHECK(p.on_outcome(0, 0, 1, ok(1), "", t0).size() == 2);          // commits: the late failure did not count
}

TEST_CASE("a failed step closes the fabric once, then recovers in a new generation and is redone") {
  step_protocol p(config(3, 3, {}, false, {}, 1));
  p.start(t0);
  p.on_outcome(0, 0, 0, ok(0), "", t0);
  p.on_outcome(0, 0, 1, ok(1), "", t0);
  p.on_outcome(0, 0, 2, ok(2), "", t0);  // step 0 committed, step 1 started
  auto a = p.on_worker_lost(1, "killed", "", t0 + std::chrono::milliseconds(5));
  CHECK(only<close_fabric_action>(a).reason == "rank 1 failed");
  CHECK(p.on_outcome(0, 1, 0, failed(0, "peer closed"), "", t0).empty());  // no second close
  auto r = only<recover_action>(p.on_outcome(0, 1, 2, failed(2, "peer closed"), "", t0));
  CHECK(r.generation == 1);
  CHECK(r.committed == 0);
  CHECK(r.respawn == std::vector<int>{1});
  CHECK(r.reset == std::vector<int>{0, 2});
  auto redo = only<start_step_action>(p.on_recovered(t0 + std::chrono::milliseconds(20)));
  CHECK(redo.generation == 1);
  CHECK(redo.step == 1);  // the interrupted step, redone
  REQUIRE(p.failures().size() == 1);
  CHECK(p.failures()[0].rank == 1);
  CHECK(p.failures()[0].recover_seconds == doctest::Approx(0.015));
  // a second failure is more than max-restarts 1 allows
  p.on_outcome(1, 1, 0, failed(0, "boom"), "", t0);
  p.on_outcome(1, 1, 1, ok(1), "", t0);
  auto end = only<finish_action>(p.on_outcome(1, 1, 2, ok(2), "", t0));
  REQUIRE(!end.outcome);
  CHECK(end.outcome.error().code == errc::closed);
  CHECK(end.outcome.error().message == "step 1 failed 2 times (max-restarts 1); last: rank 0: boom");
}

TEST_CASE("across processes the next step starts while the loss is combined, and reports come in step order") {
  step_protocol p(config(3, 4, {true, true, false, false}, true));
  CHECK(only<start_step_action>(p.start(t0)).step == 0);
  p.on_outcome(0, 0, 0, ok(0, 0.1, true), "", t0);
  auto a = p.on_outcome(0, 0, 1, ok(1), "", t0);
  REQUIRE(a.size() == 2);
  CHECK(std::get<combine_loss_action>(a[0]).local_loss == doctest::Approx(0.1));
  CHECK(std::get<start_step_action>(a[1]).step == 1);   // not waiting for the sum
  CHECK(p.on_outcome(0, 1, 2, ok(2), "", t0).empty());  // not a local rank
  p.on_outcome(0, 1, 0, ok(0, 0.2, true), "", t0);
  a = p.on_outcome(0, 1, 1, ok(1), "", t0);  // step 1 committed before step 0's sum came
  REQUIRE(a.size() == 2);
  CHECK(std::get<combine_loss_action>(a[0]).step == 1);
  CHECK(std::get<start_step_action>(a[1]).step == 2);
  CHECK(p.on_loss(1, 0.5, t0).empty());  // out of order: step 0 first
  auto r0 = only<report_step_action>(p.on_loss(0, 0.3, t0));
  CHECK(r0.metrics.step == 0);
  CHECK(r0.metrics.loss == doctest::Approx(0.3));
  CHECK(r0.metrics.task_seconds[2].total() == 0);  // another process's rank
  CHECK(only<report_step_action>(p.on_loss(1, 0.5, t0)).metrics.step == 1);
  // the last step: the collection waits for its loss
  p.on_outcome(0, 2, 0, ok(0), "", t0);
  a = p.on_outcome(0, 2, 1, ok(1), "", t0);
  CHECK(only<combine_loss_action>(a).step == 2);
  a = p.on_loss(2, 0.7, t0);
  REQUIRE(a.size() == 2);
  CHECK(std::holds_alternative<report_step_action>(a[0]));
  CHECK(std::get<collect_action>(a[1]).committed == 2);
  CHECK(p.losses() == std::vector<double>{0.3, 0.5, 0.7});
}

TEST_CASE("across processes a failed step ends the run, naming the fabric's reason") {
  step_protocol p(config(3, 2, {}, true));
  p.start(t0);
  p.on_outcome(0, 0, 0, failed(0, "recv from rank 2: closed"), "lost node 1", t0);
  auto end = only<finish_action>(p.on_outcome(0, 0, 1, ok(1), "", t0));
  REQUIRE(!end.outcome);
  CHECK(end.outcome.error().message == "step 0 failed: rank 0: recv from rank 2: closed (lost node 1)");
}

TEST_CASE("a plan transition across processes waits until every committed step is reported") {
  step_protocol p(config(4, 1, {}, true, {1}));
  p.start(t0);
  CHECK(only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0), "", t0)).step == 0);
  auto a = p.on_loss(0, 1.0, t0);
  REQUIRE(a.size() == 2);
  CHECK(std::get<transition_action>(a[1]).step == 1);
}

TEST_CASE("a combined loss that fails ends the run with its code") {
  step_protocol p(config(2, 1, {}, true));
  p.start(t0);
  p.on_outcome(0, 0, 0, ok(0), "", t0);  // step 1 starts meanwhile
  auto end = only<finish_action>(p.on_loss(0, make_error(errc::timeout, "no answer from process 1"), t0));
  CHECK(end.outcome.error().code == errc::timeout);
  CHECK(end.outcome.error().message == "step 0: no answer from process 1");
}

TEST_CASE("plan transitions come at their step boundaries, then the new plan's ranks step") {
  step_protocol p(config(5, 2, {}, false, {2, 4}));
  p.start(t0);
  for (int k = 0; k < 2; ++k) {
    p.on_outcome(0, k, 0, ok(0), "", t0);
    auto a = p.on_outcome(0, k, 1, ok(1), "", t0);
    REQUIRE(a.size() == 2);
    if (k == 1) {
      const auto& t = std::get<transition_action>(a[1]);
      CHECK(t.step == 2);
      CHECK(t.change == 0);
    }
  }
  auto s = only<start_step_action>(p.on_transition_done(4, {true, true, true, true}, t0));
  CHECK(s.step == 2);
  CHECK(s.committed == 1);
  CHECK(p.layout() == 1);
  for (int r = 0; r < 3; ++r) CHECK(p.on_outcome(0, 2, r, ok(r), "", t0).empty());  // four ranks now
  auto a = p.on_outcome(0, 2, 3, ok(3), "", t0);
  CHECK(std::get<report_step_action>(a[0]).metrics.layout == 1);
  CHECK(std::get<report_step_action>(a[0]).metrics.task_seconds.size() == 4);
  for (int r = 0; r < 4; ++r) a = p.on_outcome(0, 3, r, ok(r), "", t0);
  CHECK(std::get<transition_action>(a[1]).change == 1);
  CHECK(p.on_transition_done(1, {true}, t0).size() == 1);
  a = p.on_outcome(0, 4, 0, ok(0), "", t0);
  CHECK(std::holds_alternative<collect_action>(a[1]));  // no transition after the last step
}

TEST_CASE("a failed transition or collection ends the run with its error") {
  step_protocol p(config(2, 1, {}, false, {1}));
  p.start(t0);
  p.on_outcome(0, 0, 0, ok(0), "", t0);
  auto end =
      only<finish_action>(p.on_error(make_error(errc::invalid_argument, "cuts[0]: expected a positive integer")));
  CHECK(end.outcome.error().code == errc::invalid_argument);
  CHECK(p.on_error(make_error(errc::closed, "again")).empty());  // finished once
  CHECK(p.on_transition_done(1, {true}, t0).empty());
}

TEST_CASE("a checkpoint's snapshot comes after its step's commit, before the next step and any transition") {
  auto c = config(4, 1, {}, false, {2});
  c.checkpoint_every = 2;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  auto a = p.on_outcome(0, 0, 0, ok(0, 1, true), "", t0);
  REQUIRE(a.size() == 2);  // after step 1 of 4: no snapshot
  CHECK(std::get<start_step_action>(a[1]).step == 1);
  a = p.on_outcome(0, 1, 0, ok(0, 1, true), "", t0);
  REQUIRE(a.size() == 2);
  CHECK(std::holds_alternative<report_step_action>(a[0]));
  const auto snap = std::get<snapshot_action>(a[1]);
  CHECK(snap.step == 2);
  CHECK(snap.committed == 1);
  CHECK(p.on_outcome(0, 2, 0, ok(0), "", t0).empty());  // no step runs while the state is copied
  CHECK(only<transition_action>(p.on_snapshot_taken(t0)).step == 2);
  CHECK(p.on_snapshot_taken(t0).empty());  // once
  CHECK(only<start_step_action>(p.on_transition_done(1, {}, t0)).step == 2);
  a = p.on_outcome(0, 2, 0, ok(0, 1, true), "", t0);
  CHECK(std::get<start_step_action>(a[1]).step == 3);
  a = p.on_outcome(0, 3, 0, ok(0, 1, true), "", t0);  // the last step: snapshot, then the collection
  CHECK(std::get<snapshot_action>(a[1]).step == 4);
  CHECK(only<collect_action>(p.on_snapshot_taken(t0)).committed == 3);
}

TEST_CASE("a resumed run starts after its checkpoint's step and does not save that state again") {
  auto c = config(6, 1, {}, false, {2, 5});
  c.first_step = 4;
  c.checkpoint_every = 2;
  step_protocol p(c);
  auto s = only<start_step_action>(p.start(t0));
  CHECK(s.step == 4);
  CHECK(s.committed == 3);
  auto a = p.on_outcome(0, 4, 0, ok(0, 1, true), "", t0);
  REQUIRE(a.size() == 2);
  CHECK(only<start_step_action>(p.on_transition_done(1, {}, t0)).step == 5);  // the change at 5; the one at 2 is past
  a = p.on_outcome(0, 5, 0, ok(0, 1, true), "", t0);
  CHECK(std::get<snapshot_action>(a[1]).step == 6);
  CHECK(p.losses().size() == 2);
  auto done = config(4, 1);
  done.first_step = 4;
  step_protocol finished(done);
  CHECK(only<finish_action>(finished.start(t0)).outcome.error().message.find("nothing left") != std::string::npos);
}

TEST_CASE("with rejoin a step commits once its job-wide loss is known, and a lost sum makes it the interrupted step") {
  auto c = config(4, 2, {true, false}, /*multi_process=*/true);
  c.rejoin = true;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  auto a = p.on_outcome(0, 0, 0, ok(0, 0.5, true), "", t0);
  CHECK(only<combine_loss_action>(a).step == 0);  // no next step before the sum
  CHECK(p.committed() == -1);
  a = p.on_loss(0, 1.25, t0);
  REQUIRE(a.size() == 2);
  CHECK(std::get<report_step_action>(a[0]).metrics.loss == 1.25);
  CHECK(std::get<start_step_action>(a[1]).step == 1);
  CHECK(p.committed() == 0);
  // step 1's work is done here, but its sum fails: a process was lost
  only<combine_loss_action>(p.on_outcome(0, 1, 0, ok(0, 0.5, true), "", t0));
  auto r = only<rejoin_action>(p.on_loss(1, make_error(errc::closed, "membership changed"), t0));
  CHECK(r.generation == 1);
  CHECK(r.committed == 0);
  CHECK(r.failure.find("membership changed") != std::string::npos);
  // another process saw step 1's loss: it is committed after all, then step 2 starts
  a = p.on_rejoined(2, {true, true}, /*committed=*/1, /*loss=*/0.75, t0);
  REQUIRE(a.size() == 2);
  CHECK(std::get<report_step_action>(a[0]).metrics.loss == 0.75);
  const auto s = std::get<start_step_action>(a[1]);
  CHECK(s.step == 2);
  CHECK(s.generation == 1);
  CHECK(p.losses() == std::vector<double>{1.25, 0.75});
}

TEST_CASE("with rejoin a failed step is redone after the rejoin and a disagreement ends the run") {
  auto c = config(4, 1, {}, /*multi_process=*/true);
  c.rejoin = true;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  auto a = p.on_outcome(0, 0, 0, failed(0, "recv: channel closed"), "lost node 1", t0);
  REQUIRE(a.size() == 2);
  CHECK(std::holds_alternative<close_fabric_action>(a[0]));
  CHECK(std::get<rejoin_action>(a[1]).committed == -1);
  CHECK(only<start_step_action>(p.on_rejoined(1, {}, -1, 0, t0)).step == 0);  // the same step again
  step_protocol q(c);
  q.start(t0);
  q.on_outcome(0, 0, 0, failed(0, "x"), "", t0);
  auto done = only<finish_action>(q.on_rejoined(1, {}, /*committed=*/5, 0, t0));
  CHECK(done.outcome.error().message.find("disagree") != std::string::npos);
}

TEST_CASE("with rejoin from a checkpoint the steps after it are trained again and their losses replaced") {
  auto c = config(6, 1, {}, /*multi_process=*/true);
  c.rejoin = true;
  c.checkpoint_every = 2;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  for (std::int64_t k = 0; k < 3; ++k) {  // steps 0-2 done, a snapshot after step 2
    only<combine_loss_action>(p.on_outcome(0, k, 0, ok(0, 1, true), "", t0));
    auto a = p.on_loss(k, 1.0 + static_cast<double>(k), t0);
    if (k == 1) {
      CHECK(std::get<snapshot_action>(a.back()).step == 2);
      p.on_snapshot_taken(t0);
    }
  }
  CHECK(p.committed() == 2);
  auto a = p.on_outcome(0, 3, 0, failed(0, "lost node"), "", t0);
  CHECK(std::get<rejoin_action>(a.back()).committed == 2);
  // the newest checkpoint has 2 steps: step 2 is trained again, its loss replaced
  const auto s2 = only<start_step_action>(p.on_rejoined(1, {}, /*committed=*/1, 0, t0, /*from_checkpoint=*/true));
  CHECK(s2.step == 2);
  CHECK(s2.committed == 1);
  CHECK(s2.generation == 1);
  CHECK(p.losses() == std::vector<double>{1.0, 2.0});
}

TEST_CASE("with a re-plan after a rejoin the planner is asked before the redone step, and a kept plan steps on") {
  auto c = config(6, 2, {true, false}, /*multi_process=*/true);
  c.rejoin = true;
  c.replan_on_rejoin = true;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0, 0.5, true), "", t0));
  p.on_loss(0, 1.0, t0);
  // step 1 fails: process 1 lost; the rest restore its rank, then the re-plan comes first
  auto a = p.on_outcome(0, 1, 0, failed(0, "recv: channel closed"), "lost node 1", t0);
  CHECK(std::get<rejoin_action>(a.back()).committed == 0);
  const auto t = only<transition_action>(p.on_rejoined(2, {true, true}, /*committed=*/0, 0, t0));
  CHECK(t.replan);
  CHECK(t.step == 1);
  // the planner chose the same plan: the interrupted step is redone in the new generation
  const auto s = only<start_step_action>(p.on_plan_kept(t0));
  CHECK(s.step == 1);
  CHECK(s.generation == 1);
  CHECK(p.layout() == 0);
  // an event out of place changes nothing
  CHECK(p.on_plan_kept(t0).empty());
  // a second loss re-plans again, this time to a new plan of 1 rank
  p.on_outcome(1, 1, 0, failed(0, "recv: channel closed"), "lost node 2", t0);  // both ranks are here now
  a = p.on_outcome(1, 1, 1, failed(1, "recv: channel closed"), "lost node 2", t0);
  CHECK(std::get<rejoin_action>(a.back()).generation == 2);
  CHECK(only<transition_action>(p.on_rejoined(2, {true, true}, 0, 0, t0)).replan);
  const auto s2 = only<start_step_action>(p.on_transition_done(1, {true}, t0));
  CHECK(s2.step == 1);
  CHECK(p.layout() == 1);
}

TEST_CASE("a plan change due at the boundary of a re-plan after a rejoin follows the re-plan") {
  auto c = config(6, 2, {true, false}, /*multi_process=*/true, /*change_at=*/{1});
  c.rejoin = true;
  c.replan_on_rejoin = true;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0, 0.5, true), "", t0));
  // step 0's sum fails (a process was lost); another process saw it: committed after all
  only<rejoin_action>(p.on_loss(0, make_error(errc::closed, "membership changed"), t0));
  auto a = p.on_rejoined(2, {true, true}, /*committed=*/0, /*loss=*/0.75, t0);
  REQUIRE(a.size() == 2);
  CHECK(std::get<report_step_action>(a[0]).metrics.loss == 0.75);
  const auto replan = std::get<transition_action>(a[1]);
  CHECK(replan.replan);
  CHECK(replan.step == 1);
  const auto change = only<transition_action>(p.on_transition_done(1, {true}, t0));
  CHECK_FALSE(change.replan);
  CHECK(change.step == 1);
  CHECK(change.change == 0);
  CHECK(only<start_step_action>(p.on_transition_done(2, {true, true}, t0)).step == 1);
  CHECK(p.layout() == 2);
}

TEST_CASE("without replan_on_rejoin the redone step follows the rejoin at once") {
  auto c = config(4, 2, {true, false}, /*multi_process=*/true);
  c.rejoin = true;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  p.on_outcome(0, 0, 0, failed(0, "recv: channel closed"), "lost node 1", t0);
  CHECK(only<start_step_action>(p.on_rejoined(2, {true, true}, -1, 0, t0)).step == 0);
}

TEST_CASE("the restart limit is per step: failures at different steps never add up to it") {
  step_protocol p(config(6, 1, {}, false, {}, /*max_restarts=*/1));
  only<start_step_action>(p.start(t0));
  for (std::int64_t step = 0; step < 5; ++step) {  // every step fails once, then is redone
    CHECK(std::holds_alternative<recover_action>(p.on_outcome(step, step, 0, failed(0, "boom"), "", t0).back()));
    CHECK(only<start_step_action>(p.on_recovered(t0)).step == step);
    const auto next = p.on_outcome(step + 1, step, 0, ok(0), "", t0);
    CHECK(std::get<start_step_action>(next.back()).step == step + 1);
  }
  CHECK(p.restarts() == 5);  // the run's count
  // step 5 fails twice: more than max-restarts 1 allows for one step
  CHECK(std::holds_alternative<recover_action>(p.on_outcome(5, 5, 0, failed(0, "boom"), "", t0).back()));
  p.on_recovered(t0);
  const auto last = p.on_outcome(6, 5, 0, failed(0, "boom again"), "", t0);
  REQUIRE(std::holds_alternative<finish_action>(last.back()));
  const auto& end = std::get<finish_action>(last.back());
  REQUIRE(!end.outcome);
  CHECK(end.outcome.error().message.find("step 5 failed 2 times (max-restarts 1); last: rank 0: boom") == 0);
}

namespace {

// Steps 0 and 1 across processes with rejoin, process 1 asking to leave in step 1's sum: the
// actions that follow step 1's loss.
actions leave_after_step_one(step_protocol& p) {
  only<start_step_action>(p.start(t0));
  only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0, 0.5, true), "", t0));
  p.on_loss(0, 1.0, t0);
  only<combine_loss_action>(p.on_outcome(0, 1, 0, ok(0, 0.5, true), "", t0));
  p.leave_after_commit({false, true});
  return p.on_loss(1, 1.0, t0);
}

step_protocol::config leaving_config(std::int64_t steps, std::vector<std::int64_t> change_at = {}) {
  auto c = config(steps, 2, {true, false}, /*multi_process=*/true, std::move(change_at));
  c.rejoin = true;
  return c;
}

}  // namespace

TEST_CASE("a node's leave comes at the boundary after the step whose sum named it, before a checkpoint") {
  auto c = leaving_config(6, /*change_at=*/{2});
  c.checkpoint_every = 2;  // a checkpoint and a change due at the same boundary
  step_protocol p(c);
  auto a = leave_after_step_one(p);
  REQUIRE(a.size() == 2);
  CHECK(std::holds_alternative<report_step_action>(a[0]));
  const auto leave = std::get<transition_action>(a[1]);
  CHECK(leave.leave == std::vector<bool>({false, true}));
  CHECK(leave.step == 2);
  CHECK_FALSE(leave.replan);
  CHECK(p.on_left().size() == 1);  // this process would end here; the others go on:
  step_protocol q(c);
  CHECK_FALSE(std::get<transition_action>(leave_after_step_one(q)[1]).leave.empty());
  // then the checkpoint of the job without the leaver, then the change due at the same boundary
  CHECK(only<snapshot_action>(q.on_transition_done(2, {true, true}, t0)).step == 2);
  const auto change = only<transition_action>(q.on_snapshot_taken(t0));
  CHECK(change.leave.empty());
  CHECK(change.change == 0);
  CHECK(only<start_step_action>(q.on_transition_done(2, {true, true}, t0)).step == 2);
  CHECK(q.layout() == 2);
}

TEST_CASE("a leave asked with the last step's sum is ignored: the node finishes with the others") {
  step_protocol p(leaving_config(2));
  auto a = leave_after_step_one(p);
  REQUIRE(a.size() == 2);
  CHECK(std::holds_alternative<collect_action>(a[1]));
  CHECK(p.on_left().empty());  // not transitioning: out of place
}

TEST_CASE("with evaluate_every an evaluation follows every that many steps, the last one too, then what was due") {
  auto c = config(4, 1);
  c.evaluate_every = 2;
  c.checkpoint_every = 2;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  CHECK(std::holds_alternative<start_step_action>(p.on_outcome(0, 0, 0, ok(0), "", t0).back()));
  // after step 2: the checkpoint's snapshot, then the evaluation, then step 3
  CHECK(only<snapshot_action>(std::vector{p.on_outcome(0, 1, 0, ok(0), "", t0).back()}).step == 2);
  const auto e = only<evaluate_action>(p.on_snapshot_taken(t0));
  CHECK(e.steps_done == 2);
  CHECK(e.committed == 1);
  CHECK(p.on_evaluated(t0 + std::chrono::milliseconds(1)).size() == 1);
  CHECK(p.on_evaluated(t0).empty());  // out of place: nothing
  p.on_outcome(0, 2, 0, ok(0), "", t0);
  only<snapshot_action>(std::vector{p.on_outcome(0, 3, 0, ok(0), "", t0).back()});
  CHECK(only<evaluate_action>(p.on_snapshot_taken(t0)).steps_done == 4);
  CHECK(std::holds_alternative<collect_action>(p.on_evaluated(t0).back()));
}

TEST_CASE("processes waiting to join come in at the boundary after the step whose sum counted them") {
  // a leave and a join named in the same sum: the leave first, then the join, then the
  // checkpoint due at that boundary
  auto c = leaving_config(6);
  c.checkpoint_every = 2;
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0, 0.5, true), "", t0));
  p.on_loss(0, 1.0, t0);
  only<combine_loss_action>(p.on_outcome(0, 1, 0, ok(0, 0.5, true), "", t0));
  p.leave_after_commit({false, true});
  p.join_after_commit(2);
  const auto a = p.on_loss(1, 1.0, t0);
  REQUIRE(a.size() == 2);
  CHECK_FALSE(std::get<transition_action>(a[1]).leave.empty());
  const auto grow = only<transition_action>(p.on_transition_done(2, {true, false}, t0));
  CHECK(grow.joiners == 2);
  CHECK(grow.step == 2);
  CHECK(grow.leave.empty());
  CHECK_FALSE(grow.replan);
  // the job stayed as it was: the checkpoint, then step 2
  CHECK(only<snapshot_action>(p.on_plan_kept(t0)).step == 2);
  CHECK(only<start_step_action>(p.on_snapshot_taken(t0)).step == 2);
}

TEST_CASE("a join counted with the last step's sum is ignored, and a joining process starts at the job's boundary") {
  step_protocol p(leaving_config(2));
  only<start_step_action>(p.start(t0));
  only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0, 0.5, true), "", t0));
  p.on_loss(0, 1.0, t0);
  only<combine_loss_action>(p.on_outcome(0, 1, 0, ok(0, 0.5, true), "", t0));
  p.join_after_commit(1);
  CHECK(std::holds_alternative<collect_action>(p.on_loss(1, 1.0, t0).back()));
  // a newcomer: no step of its own until the transition it was admitted for is done
  auto j = leaving_config(10, /*change_at=*/{7, 12});
  j.joining = true;
  j.checkpoint_every = 3;
  step_protocol n(j);
  CHECK(n.start(t0).empty());
  n.on_joined(5);  // six steps done
  CHECK(n.committed() == 5);
  CHECK(n.step() == 6);
  // after the transition: step 6 (not the checkpoint of the state it was given), the change at 7 stays due
  CHECK(only<start_step_action>(n.on_transition_done(2, {false, true}, t0)).step == 6);
  CHECK(n.losses().empty());
  n.on_joined(9);  // once only
  CHECK(n.step() == 6);
}

TEST_CASE("a straggler's relief and the operator's migration come as transitions at their boundaries") {
  auto c = leaving_config(6);
  c.migrations = {{.at_step = 2, .rank = 1, .process = 0}, {.at_step = 4, .rank = 0, .process = 1}};
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0, 0.5, true), "", t0));
  p.on_loss(0, 1.0, t0);
  auto alone = ok(0, 0.5, true);
  alone.report.alone_s = 0.25;  // the pace is what the rank takes alone (not its wall seconds, 0.3)
  const auto sum = only<combine_loss_action>(p.on_outcome(0, 1, 0, std::move(alone), "", t0));
  CHECK(sum.busiest_s == 0.25);
  p.migrate_after_commit(1);  // step 1's sum named process 1
  const auto a = p.on_loss(1, 1.0, t0);
  const auto relief = std::get<transition_action>(a.back());
  CHECK(relief.straggler == 1);
  CHECK(relief.migration == -1);
  CHECK(relief.step == 2);
  // then the operator's request due at the same boundary
  const auto asked = only<transition_action>(p.on_plan_kept(t0));
  CHECK(asked.migration == 0);
  CHECK(asked.straggler == -1);
  CHECK(only<start_step_action>(p.on_transition_done(2, {true, false}, t0)).step == 2);
}

TEST_CASE("a plan change lost across processes: the job rejoins with no step redone and the change comes again") {
  auto c = leaving_config(6, /*change_at=*/{2});
  c.migrations = {{.at_step = 2, .rank = 1, .process = 0}};
  step_protocol p(c);
  only<start_step_action>(p.start(t0));
  for (std::int64_t k = 0; k < 2; ++k) {
    only<combine_loss_action>(p.on_outcome(0, k, 0, ok(0, 0.5, true), "", t0));
    auto a = p.on_loss(k, 1.0, t0);
    if (k == 1) CHECK(std::get<transition_action>(a.back()).migration == 0);  // the operator's request first
  }
  // a process lost while the migration moved its state: dropped, a rejoin in a new generation
  const auto lost = only<rejoin_action>(p.on_transition_lost(make_error(errc::closed, "recv: channel closed"), t0));
  CHECK(lost.in_transition);
  CHECK(lost.committed == 1);
  CHECK(lost.generation == 1);
  CHECK(lost.failure.find("the plan change after step 2: recv: channel closed") != std::string::npos);
  CHECK(p.on_transition_lost(make_error(errc::closed, "again"), t0).empty());  // rejoining: ignored
  CHECK(p.restarts() == 0);                                                    // no step failed
  REQUIRE(p.failures().size() == 1);
  CHECK(p.failures()[0].step == 2);
  // rejoined at the same steps done: the migration is due again at this boundary, then the change
  const auto again = only<transition_action>(p.on_rejoined(2, {true, false}, /*committed=*/1, 1.0, t0));
  CHECK(again.migration == 0);
  CHECK(again.step == 2);
  const auto change = only<transition_action>(p.on_plan_kept(t0));
  CHECK(change.change == 0);
  CHECK(change.migration == -1);
  // that one lost too: due again after the next rejoin
  only<rejoin_action>(p.on_transition_lost(make_error(errc::timeout, "nothing for 10000 ms"), t0));
  CHECK(only<transition_action>(p.on_rejoined(2, {true, false}, 1, 1.0, t0)).change == 0);
  CHECK(only<start_step_action>(p.on_transition_done(2, {true, false}, t0)).generation == 2);
}

TEST_CASE("without rejoin a plan change lost across processes ends the run with its error") {
  step_protocol p(config(3, 1, {}, /*multi_process=*/true, {1}));
  p.start(t0);
  only<combine_loss_action>(p.on_outcome(0, 0, 0, ok(0), "", t0));
  CHECK(std::holds_alternative<transition_action>(p.on_loss(0, 1.0, t0).back()));
  const auto end = only<finish_action>(p.on_transition_lost(make_error(errc::closed, "lost node 1"), t0));
  CHECK(end.outcome.error().code == errc::closed);
  CHECK(end.outcome.error().message == "lost node 1");
}
