// Recovery inside a running job (--fault.recover), injected from outside as a cluster does it:
// a node process SIGKILLed or SIGSTOPped mid-run. The processes that remain take over its ranks,
// restored from a data-parallel replica, redo only the interrupted step and finish with every
// loss and the trained model equal to the fault-free run's, bit for bit (the plan and the
// arithmetic do not change); nobody is restarted. Where no copy of a rank survives the job falls
// back on its newest checkpoint (inside the job, nobody restarted), or ends naming the rank.
#include <doctest/doctest.h>

#include <filesystem>

#include "apps/run_app.hpp"
#include "faults/fault_jobs.hpp"
#include "support/run_files.hpp"

using cohort::test::run;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("rec", name); }

const std::string& mlp_job = cohort::test::recovering_mlp_job;

}  // namespace

TEST_SUITE("failure") {
  TEST_CASE("a killed node's ranks move to the others and every loss equals the fault-free run's") {
    struct job_case {
      const char* name;
      std::string plan;
      int killed;
    };
    for (const job_case& c :
         {job_case{"dp2 over 2 processes (TCP)", " --plan.dp=2 --launch.nproc=2", 1},
          job_case{"dp2 over 2 processes (UCX)", " --plan.dp=2 --launch.nproc=2 --dist.transport=ucx", 1},
          job_case{"dp4 over 4 processes", " --plan.dp=4 --launch.nproc=4", 2}}) {
      const std::string name = c.name;
      CAPTURE(name);
      const std::string clean_metrics = temp_path("clean.jsonl"), metrics = temp_path("recovered.jsonl");
      auto clean = run(MLP_BINARY, mlp_job + c.plan + " --metrics.file=" + clean_metrics);
      if (clean.err.find("UCX") != std::string::npos && clean.exit_code != 0) {
        MESSAGE("UCX unavailable: skipped (" << clean.err << ")");
        continue;
      }
      REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
      const std::string k = std::to_string(c.killed);
      auto r =
          run(MLP_BINARY, mlp_job + c.plan + " --fault.signal=KILL --fault.signal-step=12 --fault.signal-rank=" + k +
                              " --metrics.file=" + metrics);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
      CHECK(r.err.find("launch: process " + k + " (pid ") != std::string::npos);
      CHECK(r.err.find("the others go on without it (--fault.recover)") != std::string::npos);
      CHECK(r.err.find("recovered at step 12: process " + k + " lost") != std::string::npos);
      CHECK(cohort::test::metrics_losses(metrics) ==
            cohort::test::metrics_losses(clean_metrics));  // bit for bit, every step
      CHECK(r.summary["final_loss"] == clean.summary["final_loss"]);
      CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
      const auto& rec = r.summary["recoveries"];
      REQUIRE(rec.size() == 1);
      CHECK(rec[0]["source"] == "replica");
      CHECK(rec[0]["lost"] == "process " + k);
      CHECK(rec[0]["step"] == 12);
      CHECK(rec[0]["steps_redone"] == 0);
      CHECK(rec[0]["plan_before"] == rec[0]["plan_after"]);
      // a plan the user gave is kept (--fault.replan=auto, the default): nothing re-planned
      CHECK(r.summary["transitions"].empty());
      CHECK_FALSE(rec[0].contains("replan"));
      CHECK(rec[0]["cause"].get<std::string>().find("connection closed without a goodbye") != std::string::npos);
      CHECK(rec[0]["recover_s"].get<double>() > 0);
      CHECK(r.summary["restarts"] == 1);  // the interrupted step, redone once
      const auto ev = cohort::test::metrics_events(metrics);
      REQUIRE(ev.size() == 1);
      CHECK(ev[0]["event"] == "recovery");
      CHECK(ev[0]["lost"] == "process " + k);
    }
  }

  TEST_CASE("two nodes lost one after the other: the two that remain finish with the same losses") {
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4";
    const std::string clean_metrics = temp_path("two-clean.jsonl"), metrics = temp_path("two.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --fault.signal=KILL --fault.signal-rank=2,3 --fault.signal-step=10,20 "
                                 "--metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 2);
    CHECK(rec[0]["lost"] == "process 2");
    CHECK(rec[0]["step"] == 10);
    CHECK(rec[1]["lost"] == "process 3");
    CHECK(rec[1]["step"] == 20);
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("two nodes lost at once: a loss during the recovery starts it again and the job goes on") {
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4";
    const std::string clean_metrics = temp_path("once-clean.jsonl"), metrics = temp_path("once.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    for (int round = 0; round < 3; ++round) {  // the second loss lands before, during or after the first recovery
      CAPTURE(round);
      auto r = run(MLP_BINARY, job +
                                   " --fault.signal=KILL --fault.signal-rank=2,3 --fault.signal-step=10,10 "
                                   "--metrics.file=" +
                                   metrics);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
      CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
      std::string lost;
      for (const auto& rec : r.summary["recoveries"]) lost += rec["lost"].get<std::string>() + ";";
      CHECK((lost == "process 2, process 3;" || lost == "process 2;process 3;" || lost == "process 3;process 2;"));
    }
  }

  TEST_CASE("the coordinator lost among 4: process 1 takes over and the job goes on with the fault-free losses") {
    // no restart: the control plane's succession (3 of 4 reach process 1), rank 0 restored from
    // its data-parallel replicas, the metrics file continued by the new coordinator, its summary
    // the job's and its exit code the launcher's verdict; it evaluates between steps as process 0 did
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4 --eval.every=10";
    const std::string clean_metrics = temp_path("lead-clean.jsonl"), metrics = temp_path("lead.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const std::string dir = temp_path("lead-ck");
    fs::remove_all(dir);
    auto r = run(MLP_BINARY, job + " --checkpoint.dir=" + dir +
                                 " --checkpoint.every=5 --launch.max-restarts=1 --fault.signal=KILL "
                                 "--fault.signal-rank=0 --fault.signal-step=22 --fault.replace-wait-ms=60000 "
                                 "--metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("lost the coordinator (process 0") != std::string::npos);
    // no replacement can join a job whose coordinator's port is gone: none is waited for
    CHECK(r.err.find("job: no replacement awaited (--fault.replace-wait-ms)") != std::string::npos);
    CHECK(r.err.find("process 1 took over as the coordinator (2 of 2 processes followed)") != std::string::npos);
    CHECK(r.err.find("restarting all") == std::string::npos);  // nobody restarted
    CHECK(r.summary["final_loss"] == clean.summary["final_loss"]);
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
    CHECK(cohort::test::metrics_last_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 1);
    CHECK(rec[0]["source"] == "replica");
    CHECK(rec[0]["lost"] == "process 0");
    CHECK(rec[0]["steps_redone"].get<int>() <= 1);
    // the new coordinator assembles the checkpoints after the loss
    CHECK(fs::exists(dir + "/step-000030/manifest.json"));
    // evaluations after steps 10 and 20 by process 0, after step 30 by process 1: the same figures
    auto evaluations = [](const std::string& path) {
      std::vector<std::pair<std::int64_t, double>> out;
      for (const auto& e : cohort::test::metrics_events(path))
        if (e["event"] == "evaluation")
          out.emplace_back(e["step"].get<std::int64_t>(), e["test_accuracy"].get<double>());
      return out;
    };
    const auto seen = evaluations(metrics), expected = evaluations(clean_metrics);
    REQUIRE(expected.size() == 3);
    CHECK(seen == expected);
  }

  TEST_CASE(
      "the coordinator and another node lost at once: process 1 takes over mid-recovery with the fault-free losses") {
    // dp5 over 5 (3 of 5 remain: a majority): process 4 and process 0 both killed after step 10;
    // process 0's loss lands before, during or after the recovery from process 4's, which
    // process 0 was leading: the successor finishes or starts it again, every loss bit for bit
    const std::string job = mlp_job + " --plan.dp=5 --launch.nproc=5";
    const std::string clean_metrics = temp_path("lead-mid-clean.jsonl"), metrics = temp_path("lead-mid.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      auto r = run(MLP_BINARY, job +
                                   " --fault.signal=KILL --fault.signal-rank=4,0 --fault.signal-step=10,10 "
                                   "--metrics.file=" +
                                   metrics);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
      CHECK(r.err.find("process 1 took over as the coordinator") != std::string::npos);
      CHECK(r.err.find("restarting all") == std::string::npos);  // nobody restarted
      CHECK(cohort::test::metrics_last_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
      CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
      std::string lost;
      for (const auto& rec : r.summary["recoveries"]) lost += rec["lost"].get<std::string>() + ";";
      MESSAGE("round " << round << ": " << lost);
      CHECK(lost.find("process 0") != std::string::npos);
      CHECK(lost.find("process 4") != std::string::npos);
    }
  }

  TEST_CASE("after the coordinator's loss a replacement takes a later lost process's place at the new coordinator") {
    // process 0 lost after step 8 (process 1 takes over; nobody takes process 0's place), process
    // 3 after step 16: the launcher starts its replacement pointed at process 1's standby port
    // (from process 1's note, $COHORT_LAUNCH_LEADER), which admits it into the running job
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4";
    const std::string clean_metrics = temp_path("lead-repl-clean.jsonl"), metrics = temp_path("lead-repl.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --fault.replace-wait-ms=60000 --launch.max-restarts=1 --fault.signal=KILL "
                                 "--fault.signal-rank=0,3 --fault.signal-step=8,16 --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("process 1 took over as the coordinator (2 of 2 processes followed)") != std::string::npos);
    CHECK(r.err.find("to take process 3's place") != std::string::npos);
    CHECK(r.err.find("cohort: process 3 (pid ") != std::string::npos);
    CHECK(r.err.find("joined the running job in a lost process's place") != std::string::npos);
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 2);
    CHECK(rec[0]["lost"] == "process 0");
    CHECK_FALSE(rec[0].contains("replacement"));
    CHECK(rec[1]["lost"] == "process 3");
    CHECK(rec[1]["replacement"] == "process 3");
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
    CHECK(cohort::test::metrics_last_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("the coordinator lost among 2: no majority so the launcher restarts the job from its checkpoint") {
    const std::string job = mlp_job + " --plan.dp=2 --launch.nproc=2";
    const std::string clean_metrics = temp_path("lead2-clean.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const std::string dir = temp_path("lead2-ck");
    fs::remove_all(dir);
    auto r = run(MLP_BINARY, job + " --checkpoint.dir=" + dir +
                                 " --checkpoint.every=5 --launch.max-restarts=1 --fault.signal=KILL "
                                 "--fault.signal-rank=0 --fault.signal-step=22");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("lost the coordinator (process 0") != std::string::npos);
    CHECK(r.err.find("with 2 processes no successor can have a majority") != std::string::npos);
    CHECK(r.err.find("restarting all 2 processes (restart 1 of 1)") != std::string::npos);
    CHECK(r.summary["final_loss"] == clean.summary["final_loss"]);
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 1);
    CHECK(rec[0]["source"] == "restart");
    CHECK(rec[0]["lost"].get<std::string>().rfind("process 0", 0) == 0);
  }

  TEST_CASE("a stopped node is fenced out at the heartbeat timeout and the job goes on") {
    const std::string clean_metrics = temp_path("stop-clean.jsonl"), metrics = temp_path("stop.jsonl");
    const std::string job =
        mlp_job + " --plan.dp=2 --launch.nproc=2 --dist.heartbeat-ms=200 --dist.heartbeat-timeout-ms=1000";
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY,
                 job + " --fault.signal=STOP --fault.signal-rank=1 --fault.signal-step=12 --metrics.file=" + metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 1);
    CHECK(rec[0]["cause"].get<std::string>().find("no heartbeat for 1000 ms") != std::string::npos);
    CHECK(r.err.find("launch: stopping process 1") != std::string::npos);  // the fenced one, at the end
  }

  TEST_CASE("gpt dp2 tp2 over 2 processes loses one and goes on with the same losses") {
    const std::string job =
        "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 --train.steps=16 "
        "--train.threads=1 --plan.dp=2 --plan.tp=2 --launch.nproc=2 --fault.recover=true";
    const std::string clean_metrics = temp_path("gpt-clean.jsonl"), metrics = temp_path("gpt.jsonl");
    auto clean = run(GPT_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(GPT_BINARY,
                 job + " --fault.signal=KILL --fault.signal-rank=1 --fault.signal-step=6 --metrics.file=" + metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    CHECK(r.summary["recoveries"].size() == 1);
  }

  TEST_CASE("with no copy of a rank left the job falls back on its newest checkpoint without restarting anyone") {
    const std::string job =
        "--data.name=digits --train.steps=30 --train.threads=1 --plan.tp=2 --launch.nproc=2 "
        "--fault.recover=true --fault.replicas=0";  // no buddy copy (replica_test.cpp has them)
    const std::string faults = " --fault.signal=KILL --fault.signal-rank=1 --fault.signal-step=22";
    auto bare = run(MLP_BINARY, job + faults);
    CHECK(bare.exit_code == 1);
    CHECK(bare.err.find("process 1 held the only copy of rank 1's state (stage 0, tp rank 1, no data-parallel "
                        "replica or buddy copy left); with --checkpoint.dir the job falls back on its newest "
                        "checkpoint") != std::string::npos);
    const std::string clean_metrics = temp_path("tp-clean.jsonl"), metrics = temp_path("tp.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const std::string dir = temp_path("ck");
    fs::remove_all(dir);
    auto r =
        run(MLP_BINARY, job + faults + " --checkpoint.dir=" + dir + " --checkpoint.every=5 --metrics.file=" + metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 1);
    CHECK(rec[0]["source"] == "checkpoint");
    // the newest checkpoint complete on both processes: step 20, or an earlier one (15, 10, ...)
    // when process 1 died before that step's file was written (a write runs behind the steps,
    // and further behind on a loaded machine): the steps since a checkpoint boundary, no more
    const int redone = rec[0]["steps_redone"].get<int>();
    CHECK(redone >= 2);
    CHECK(redone <= 22);
    CHECK((redone - 2) % 5 == 0);
    CHECK(r.err.find("launch: process 0") == std::string::npos);  // nobody else ended or restarted
    // the steps trained again are reported again: each step's last loss is the fault-free one
    CHECK(cohort::test::metrics_last_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }
}
