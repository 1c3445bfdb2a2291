// The re-plan after a recovered loss (--fault.replan): once a lost node's ranks are restored
// onto the processes that remain, the planner plans for their devices and the job changes to
// that plan before the redone step — the summary says so (a transition with cause "loss", the
// recovery's plan_after and replan) and the losses stay the fault-free run's: bit for bit up
// to the loss (the same plan), within the equivalence tolerance after it (another plan adds in
// another order). A plan the user gave is kept unless --fault.replan=always (asserted with the
// bit-for-bit recoveries of recovery_test.cpp). A second loss during that re-plan leaves two
// recoveries, the first saying its re-plan never settled.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "apps/run_app.hpp"
#include "faults/fault_jobs.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("replan", name); }

const std::string& mlp_job = cohort::test::recovering_mlp_job;

}  // namespace

TEST_SUITE("failure") {
  TEST_CASE("the planner re-plans for the processes that remain and the losses stay the fault-free run's") {
    struct job_case {
      const char* name;
      std::string options;
      int killed;
      int devices_left;
    };
    // the planner's own plan depends on this machine's profile and may hold no replica of a
    // rank: then the state comes from the newest checkpoint (every 5 steps) and the losses are
    // the same up to it
    for (const job_case& c :
         {job_case{"the planner's plan over 4 processes, one lost",
                   " --launch.nproc=4 --checkpoint.every=5" + cohort::test::pinned_planner(), 3, 3},
          job_case{"dp2 over 2 processes with --fault.replan=always",
                   " --plan.dp=2 --launch.nproc=2 --fault.replan=always --checkpoint.every=5", 1, 1}}) {
      const std::string name = c.name;
      CAPTURE(name);
      const std::string clean_metrics = temp_path("clean.jsonl"), metrics = temp_path("replanned.jsonl");
      const std::string clean_ck = cohort::test::fresh_dir("replan", "clean-ck");
      const std::string ck = cohort::test::fresh_dir("replan", "ck");
      auto clean =
          run(MLP_BINARY, mlp_job + c.options + " --checkpoint.dir=" + clean_ck + " --metrics.file=" + clean_metrics);
      REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
      const std::string k = std::to_string(c.killed);
      auto r = run(MLP_BINARY, mlp_job + c.options + " --checkpoint.dir=" + ck +
                                   " --fault.signal=KILL --fault.signal-step=12 --fault.signal-rank=" + k +
                                   " --metrics.file=" + metrics);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
      const auto& rec = r.summary["recoveries"];
      REQUIRE(rec.size() == 1);
      const std::string source = rec[0]["source"];
      MESSAGE(name << ": " << rec[0]["plan_before"] << " restored from a " << source << ", then " << rec[0]["replan"]);
      // the steps the restored state holds: 12 from a replica; from a checkpoint its step (10, or
      // 5 where the write of 10 had not finished everywhere when the node was lost)
      const std::int64_t restored_at = 12 - rec[0]["steps_redone"].get<std::int64_t>();
      if (source == "replica")
        CHECK(restored_at == 12);
      else
        CHECK((source == "checkpoint" && restored_at > 0 && restored_at <= 10 && restored_at % 5 == 0));
      const auto& tr = r.summary["transitions"];
      REQUIRE(tr.size() == 1);
      CHECK(tr[0]["cause"] == "loss");
      CHECK(tr[0]["step"] == restored_at);
      CHECK(tr[0]["from"] == rec[0]["plan_before"]);
      CHECK(tr[0]["to"] == rec[0]["plan_after"]);
      CHECK(tr[0]["from"] != tr[0]["to"]);
      CHECK(tr[0]["plan"]["ranks"] == c.devices_left);  // one device per process that remains
      const std::string replan = rec[0]["replan"].get<std::string>();
      CHECK(replan.find("changed to " + tr[0]["to"].get<std::string>()) == 0);
      CHECK(replan.find("the planner's choice for " + std::to_string(c.devices_left) + " device") != std::string::npos);
      CHECK(r.err.find("plan change after step " + std::to_string(restored_at) + " (for the processes that remain)") !=
            std::string::npos);
      CHECK(r.err.find("re-plan for the processes that remain: changed to") != std::string::npos);
      const auto a = cohort::test::metrics_last_losses(metrics), b = cohort::test::metrics_last_losses(clean_metrics);
      REQUIRE(a.size() == 30);
      REQUIRE(b.size() == 30);
      CHECK(std::equal(a.begin(), a.begin() + restored_at, b.begin()));  // the same plan up to the restored state
      const double after = cohort::test::max_relative_difference(a, b, static_cast<std::size_t>(restored_at) + 1);
      MESSAGE(name << ": max relative loss difference after the re-plan " << after);
      // a failure says how the run recovered (its stderr): a rare divergence seen once under heavy
      // load has not been reproduced since
      CHECK_MESSAGE(after <= 1e-5, r.err << "\nthe fault-free run's plan: " << clean.summary["plan"].dump());
      CHECK_MESSAGE(
          std::abs(r.summary["test_accuracy"].get<double>() - clean.summary["test_accuracy"].get<double>()) <= 0.01,
          r.err);
    }
  }

  TEST_CASE("a second node lost during the re-plan after a loss: two recoveries reported and the job goes on") {
    // dp4 over 4 with --fault.replan=always: process 3 is killed after step 12; process 2 as the
    // re-plan for the three that remain begins. That re-plan is dropped (the first recovery says
    // so), process 2's ranks come back from their replicas, and the second recovery re-plans for
    // the two processes left
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4 --fault.replan=always";
    const std::string clean_metrics = temp_path("twice-clean.jsonl"), metrics = temp_path("twice.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --fault.signal=KILL --fault.signal-rank=3,2 --fault.signal-step=12,12 "
                                 "--fault.signal-at=step,transition --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    INFO(r.err);
    CHECK(r.err.find("fault: process 2 raises SIGKILL after step 12, in the transition") != std::string::npos);
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 2);
    CHECK(rec[0]["lost"] == "process 3");
    CHECK(rec[0]["interrupted"] == "step");
    CHECK(rec[0]["plan_after"] == rec[0]["plan_before"]);  // its re-plan never happened
    CHECK(rec[0]["replan"].get<std::string>().find("not settled: another process was lost during the re-plan") == 0);
    CHECK(rec[1]["lost"] == "process 2");
    CHECK(rec[1]["interrupted"] == "plan change");
    CHECK(rec[1]["steps_redone"] == 0);
    for (const auto& one : rec) CHECK(one["source"] == "replica");
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);  // the second recovery's re-plan, for two devices
    CHECK(tr[0]["cause"] == "loss");
    CHECK(tr[0]["step"] == 12);
    CHECK(tr[0]["plan"]["ranks"] == 2);
    CHECK(rec[1]["plan_after"] == tr[0]["to"]);
    CHECK(rec[1]["replan"].get<std::string>().find("changed to " + tr[0]["to"].get<std::string>()) == 0);
    CHECK(r.err.find("restarting all") == std::string::npos);  // nobody restarted
    const auto a = cohort::test::metrics_last_losses(metrics), b = cohort::test::metrics_last_losses(clean_metrics);
    REQUIRE(a.size() == 30);
    REQUIRE(b.size() == 30);
    CHECK(std::equal(a.begin(), a.begin() + 12, b.begin()));  // dp4 up to the losses: bit for bit
    CHECK(cohort::test::max_relative_difference(a, b, 13) <= 1e-5);
  }

  TEST_CASE("a bad --fault.replan exits 2 naming the option") {
    auto r = run(MLP_BINARY, mlp_job + " --launch.nproc=2 --fault.replan=sometimes");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--fault.replan must be auto, always or keep, got 'sometimes'") != std::string::npos);
  }
}
