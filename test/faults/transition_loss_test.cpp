// A process lost in the middle of a plan change (issue 17's "a coordinator lost during a
// transition"): the --fault.signal-at=transition hook kills it as the transition after a step
// begins on it, while the others share the decision, move the state or connect the new data
// plane. The transition is dropped before anyone installs it, the processes that remain recover
// the lost ranks from their replicas (nobody restarted, no step redone), and what asked for the
// change asks again: the leave or the operator's migration then happens on the smaller job. The
// plan's arithmetic never changes (dp, fixed), so every loss equals the fault-free run's bit
// for bit.
#include <doctest/doctest.h>

#include <string>

#include "apps/run_app.hpp"
#include "faults/fault_jobs.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("transition-loss", name); }

const std::string& mlp_job = cohort::test::recovering_mlp_job;

// The one recovery a lost plan change leaves: the change it interrupted dropped, no step redone.
void check_recovered_from_the_change(const cohort::test::run_result& r, const std::string& lost) {
  const auto& rec = r.summary["recoveries"];
  REQUIRE(rec.size() == 1);
  CHECK(rec[0]["lost"] == lost);
  CHECK(rec[0]["interrupted"] == "plan change");
  CHECK(rec[0]["steps_redone"] == 0);
  CHECK(rec[0]["source"] == "replica");
  CHECK(r.err.find("the plan change it interrupted dropped (asked for again), no step redone") != std::string::npos);
  CHECK(r.err.find("restarting all") == std::string::npos);  // nobody restarted
}

// dp6 over 3 and one process admitted after step 10; process `killed` is killed as the state
// starts to move over the new data plane. The newcomer holds nothing to recover from: it leaves
// the job ("did not join") and waits to join again; the two that remain drop the join, restore
// the lost ranks from their replicas (their new data plane gives up once a member is gone), go
// on, and take the newcomer in a step later as process `slot`. Bit for bit the fault-free run.
void check_newcomer_joins_again(int killed, int slot) {
  const std::string job = mlp_job + " --plan.dp=6 --launch.nproc=3";
  const std::string clean_metrics = temp_path("join-move-clean.jsonl"),
                    metrics = temp_path("join-move-" + std::to_string(killed) + ".jsonl");
  auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
  REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
  auto r = run(MLP_BINARY, job +
                               " --elastic.max-procs=4 --launch.joiners=1 --elastic.join-after=10 "
                               "--elastic.scale-out=always --fault.signal=KILL --fault.signal-rank=" +
                               std::to_string(killed) +
                               " --fault.signal-step=10 --fault.signal-at=exchange --metrics.file=" + metrics);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  INFO(r.err);
  const std::string lost = "process " + std::to_string(killed);
  CHECK(r.err.find("fault: " + lost + " raises SIGKILL after step 10, as the state moves") != std::string::npos);
  CHECK(r.err.find("job: this process did not join: the job changed as it joined") != std::string::npos);
  CHECK(r.err.find("it waits to join again") != std::string::npos);
  CHECK(r.err.find(") at step 1: ") == std::string::npos);  // the newcomer names the job's step, not its own
  CHECK(r.err.find("launch: joining process 0") == std::string::npos);  // it did not end
  const auto& rec = r.summary["recoveries"];
  REQUIRE(rec.size() == 1);
  CHECK(rec[0]["lost"] == lost);
  // the cause names the process that held ranks (and the newcomer that left meanwhile)
  CHECK(rec[0]["cause"].get<std::string>().find(killed == 0 ? "lost the coordinator (process 0, " : "lost node 2 (") !=
        std::string::npos);
  CHECK(rec[0]["interrupted"] == "plan change");
  CHECK(rec[0]["steps_redone"] == 0);
  if (killed == 0)
    CHECK(r.err.find("job: process 1 took over as the job's coordinator (lost the coordinator (process 0, ") !=
          std::string::npos);
  const auto& tr = r.summary["transitions"];
  REQUIRE(tr.size() == 1);
  CHECK(tr[0]["cause"] == "join");
  CHECK(tr[0]["step"] == 11);
  CHECK(r.err.find("job: process " + std::to_string(slot) + " joined the running job after step 11") !=
        std::string::npos);
  CHECK(r.summary["plan"]["processes"] == 3);
  CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
  CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
}

}  // namespace

TEST_SUITE("failure") {
  TEST_CASE("the coordinator killed as a node's leave begins: process 1 takes over and the node leaves a step later") {
    // dp4 over 4: process 2 asks to leave after step 12; process 0 (the coordinator) is killed
    // as that transition begins. Process 1 takes over, the job recovers rank 0 from a replica,
    // and process 2, still in the job, asks again with step 13's sum and leaves after it
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4";
    const std::string clean_metrics = temp_path("leave-clean.jsonl"), metrics = temp_path("leave.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.leave-after=12 --elastic.leave-rank=2 --fault.signal=KILL "
                                 "--fault.signal-rank=0 --fault.signal-step=12 --fault.signal-at=transition "
                                 "--metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    INFO(r.err);
    CHECK(r.err.find("fault: process 0 raises SIGKILL after step 12, in the transition") != std::string::npos);
    CHECK(r.err.find("job: process 1 took over as the job's coordinator") != std::string::npos);
    check_recovered_from_the_change(r, "process 0");
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);
    CHECK(tr[0]["cause"] == "leave");
    CHECK(tr[0]["leaving"] == "process 2");
    CHECK(tr[0]["step"] == 13);
    CHECK(r.err.find("job: process 2 left the job after step 13") != std::string::npos);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("a node killed as the operator's migration begins: the job recovers and the migration follows") {
    // dp8 over 4 (two ranks each): the operator moves rank 2 from process 1 to process 3 after
    // step 12; process 2 is killed as that transition begins. Its ranks come back from their
    // replicas on the three that remain, then the migration, due again at the same boundary, runs
    const std::string job = mlp_job + " --plan.dp=8 --launch.nproc=4";
    const std::string clean_metrics = temp_path("migrate-clean.jsonl"), metrics = temp_path("migrate.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.migrate-at=12:2:3 --fault.signal=KILL --fault.signal-rank=2 "
                                 "--fault.signal-step=12 --fault.signal-at=transition --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    INFO(r.err);
    check_recovered_from_the_change(r, "process 2");
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);
    CHECK(tr[0]["cause"] == "request");
    CHECK(tr[0]["step"] == 12);
    CHECK(tr[0]["moved"] == "rank 2: process 1 -> process 3");
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE(
      "a node killed as a process joins: the join is dropped, the job recovers and the process joins a step later") {
    // dp6 over 3 of at most 4 slots, one process waiting to join after step 10; process 2 is
    // killed as that transition begins. The coordinator admits nobody for the membership it
    // knew (the loss is the one change), every process drops the join, ranks 4 and 5 come back
    // from their replicas, and the waiting process is admitted after step 11 into the free slot
    const std::string job = mlp_job + " --plan.dp=6 --launch.nproc=3";
    const std::string clean_metrics = temp_path("join-clean.jsonl"), metrics = temp_path("join.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.max-procs=4 --launch.joiners=1 --elastic.join-after=10 "
                                 "--elastic.scale-out=always --fault.signal=KILL --fault.signal-rank=2 "
                                 "--fault.signal-step=10 --fault.signal-at=transition --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    INFO(r.err);
    check_recovered_from_the_change(r, "process 2");
    CHECK(r.err.find("launch: joining process") == std::string::npos);  // it exited 0
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);
    CHECK(tr[0]["cause"] == "join");
    CHECK(tr[0]["step"] == 11);
    CHECK(tr[0]["joining"] == "process 2");  // the lost process's slot, free again
    CHECK(r.summary["plan"]["processes"] == 3);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("the coordinator killed as a process joins: process 1 takes over and admits it a step later") {
    // the same job, process 0 killed as the join begins: the waiting process asks again at
    // process 1's standby port, process 1 takes over, recovers ranks 0 and 1 and admits it after
    // step 11 (nobody takes the lost coordinator's slot: it becomes process 3)
    const std::string job = mlp_job + " --plan.dp=6 --launch.nproc=3";
    const std::string clean_metrics = temp_path("join-lead-clean.jsonl"), metrics = temp_path("join-lead.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.max-procs=4 --launch.joiners=1 --elastic.join-after=10 "
                                 "--elastic.scale-out=always --fault.signal=KILL --fault.signal-rank=0 "
                                 "--fault.signal-step=10 --fault.signal-at=transition --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    INFO(r.err);
    CHECK(r.err.find("job: process 1 took over as the job's coordinator") != std::string::npos);
    CHECK(r.err.find("cohort: asked to join again at") != std::string::npos);
    check_recovered_from_the_change(r, "process 0");
    CHECK(r.err.find("launch: joining process") == std::string::npos);
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);
    CHECK(tr[0]["cause"] == "join");
    CHECK(tr[0]["step"] == 11);
    CHECK(tr[0]["joining"] == "process 3");
    CHECK(r.summary["plan"]["processes"] == 3);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("a migration's source killed as the rank's state moves: the rank comes from its replica and moves after") {
    // dp8 over 4: the operator moves rank 2 from process 1 to process 3 after step 12; process 1
    // is killed once the decision is shared, as the state starts to move (--fault.signal-at=
    // exchange). The change is dropped, ranks 2 and 3 come back from their replicas (rank 2 on
    // process 0), and the migration, due again, moves rank 2 from there to process 3
    const std::string job = mlp_job + " --plan.dp=8 --launch.nproc=4";
    const std::string clean_metrics = temp_path("move-clean.jsonl"), metrics = temp_path("move.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.migrate-at=12:2:3 --fault.signal=KILL --fault.signal-rank=1 "
                                 "--fault.signal-step=12 --fault.signal-at=exchange --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    INFO(r.err);
    CHECK(r.err.find("fault: process 1 raises SIGKILL after step 12, as the state moves") != std::string::npos);
    check_recovered_from_the_change(r, "process 1");
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);
    CHECK(tr[0]["cause"] == "request");
    CHECK(tr[0]["step"] == 12);
    CHECK(tr[0]["moved"] == "rank 2: process 0 -> process 3");
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("a node killed as the state moves to a joining process: the others recover and the newcomer joins again") {
    // process 2 killed: the newcomer joins again at process 0, into the lost process's slot
    check_newcomer_joins_again(2, 2);
  }

  TEST_CASE(
      "the coordinator killed as the state moves to a joining process: the newcomer joins again at its successor") {
    // process 0 killed: process 1 takes over; the newcomer's first try at process 0's port is not
    // answered (the launcher still holds it), it asks the job's other processes, and process 1
    // takes it in (slot 0 never refills: it becomes process 3)
    check_newcomer_joins_again(0, 3);
  }

  TEST_CASE("--fault.signal-at takes step or transition for all or one per process") {
    auto r = run(MLP_BINARY, mlp_job + " --fault.signal-at=commit");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--fault.signal-at must be step, transition or exchange, got 'commit'") != std::string::npos);
    auto two = run(MLP_BINARY, mlp_job +
                                   " --launch.nproc=4 --fault.signal=KILL --fault.signal-rank=2,3 "
                                   "--fault.signal-step=5,6 --fault.signal-at=step,transition,step");
    CHECK(two.exit_code == 2);
    CHECK(two.err.find("--fault.signal-at needs one moment for every process of --fault.signal-rank or one per "
                       "process, got 3 for 2") != std::string::npos);
  }
}
