// A replacement takes a lost node's place (--fault.replace-wait-ms): the launcher starts a new
// process for the node it lost, the coordinator admits it into the running job in the lost
// process's place, the recovery restores the lost ranks' state onto it from a data-parallel
// replica, and the job goes on with the plan and the placement it had — every loss and the
// trained model equal to the fault-free run's, bit for bit; nobody else is restarted.
#include <doctest/doctest.h>

#include "apps/run_app.hpp"
#include "faults/fault_jobs.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("replace", name); }

const std::string& mlp_job = cohort::test::recovering_mlp_job;

}  // namespace

TEST_SUITE("failure") {
  TEST_CASE("a replacement takes a killed node's place and every loss equals the fault-free run's") {
    struct job_case {
      const char* name;
      std::string plan;
      int killed;
    };
    for (const job_case& c : {job_case{"dp2 over 2 processes", " --plan.dp=2 --launch.nproc=2", 1},
                              job_case{"dp4 over 4 processes", " --plan.dp=4 --launch.nproc=4", 2}}) {
      const std::string name = c.name;
      CAPTURE(name);
      const std::string clean_metrics = temp_path("clean.jsonl"), metrics = temp_path("replaced.jsonl");
      auto clean = run(MLP_BINARY, mlp_job + c.plan + " --metrics.file=" + clean_metrics);
      REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
      const std::string k = std::to_string(c.killed);
      auto r = run(MLP_BINARY, mlp_job + c.plan +
                                   " --fault.replace-wait-ms=20000 --launch.max-restarts=1 --fault.signal=KILL "
                                   "--fault.signal-step=12 --fault.signal-rank=" +
                                   k + " --metrics.file=" + metrics);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
      CHECK(r.err.find("launch: started pid ") != std::string::npos);
      CHECK(r.err.find("to take process " + k + "'s place") != std::string::npos);
      CHECK(r.err.find("process " + k + " (pid ") != std::string::npos);
      CHECK(r.err.find("joined the running job in a lost process's place") != std::string::npos);
      CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
      CHECK(r.summary["final_loss"] == clean.summary["final_loss"]);
      CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
      const auto& rec = r.summary["recoveries"];
      REQUIRE(rec.size() == 1);
      CHECK(rec[0]["source"] == "replica");
      CHECK(rec[0]["lost"] == "process " + k);
      CHECK(rec[0]["replacement"] == "process " + k);
      CHECK(rec[0]["steps_redone"] == 0);
      CHECK(rec[0]["plan_before"] == rec[0]["plan_after"]);
      CHECK(r.summary["transitions"].empty());  // the plan stays: nothing to re-plan for
    }
  }

  TEST_CASE("with no replacement in time the others take over and bad replacement options exit 2") {
    // a replacement is waited for but none comes (the launcher has no restart left)
    const std::string job = mlp_job + " --plan.dp=2 --launch.nproc=2";
    const std::string clean_metrics = temp_path("none-clean.jsonl"), metrics = temp_path("none.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --fault.replace-wait-ms=500 --fault.signal=KILL --fault.signal-step=12 "
                                 "--fault.signal-rank=1 --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("launch: started pid") == std::string::npos);
    REQUIRE(r.summary["recoveries"].size() == 1);
    CHECK_FALSE(r.summary["recoveries"][0].contains("replacement"));
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    auto no_recover =
        run(MLP_BINARY, "--data.name=digits --train.steps=2 --launch.nproc=2 --fault.replace-wait-ms=100");
    CHECK(no_recover.exit_code == 2);
    CHECK(no_recover.err.find("--fault.replace-wait-ms needs --fault.recover=true") != std::string::npos);
    auto negative = run(MLP_BINARY, mlp_job + " --launch.nproc=2 --fault.replace-wait-ms=-1");
    CHECK(negative.exit_code == 2);
    CHECK(negative.err.find("--fault.replace-wait-ms must be >= 0") != std::string::npos);
  }
}
