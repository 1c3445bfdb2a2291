// Buddy copies (--fault.replicas, on by default with --fault.recover): a plan whose pieces have
// no data-parallel replica on another process (tensor or pipeline parallelism across
// processes) loses a node and goes on from the copy the next process kept — only the
// interrupted step redone, nobody restarted, no checkpoint read, every loss and the trained
// model equal to the fault-free run's bit for bit (the copies change no arithmetic: the
// fault-free run here keeps none). Both holders of a piece lost: the newest checkpoint.
#include <doctest/doctest.h>

#include <filesystem>

#include "apps/run_app.hpp"
#include "faults/fault_jobs.hpp"
#include "support/run_files.hpp"

using cohort::test::run;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("replica", name); }

const std::string& mlp_job = cohort::test::recovering_mlp_job;

}  // namespace

TEST_SUITE("failure") {
  TEST_CASE("a node holding the only copy of a piece is lost and the job goes on from its buddy copy") {
    struct job_case {
      const char* name;
      const char* binary;
      std::string job;
      int killed, after_step;
    };
    const std::string gpt_job =
        "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 --train.steps=16 "
        "--train.threads=1 --fault.recover=true";
    for (const job_case& c :
         {job_case{"mlp tp2 over 2 processes", MLP_BINARY, mlp_job + " --plan.tp=2 --launch.nproc=2", 1, 12},
          job_case{"mlp pp3 over 3 processes, the last lost", MLP_BINARY,
                   mlp_job + " --plan.pp=3 --plan.micro-batches=2 --launch.nproc=3", 2, 12},
          job_case{"gpt pp2 over 2 processes", GPT_BINARY,
                   gpt_job + " --plan.pp=2 --plan.micro-batches=2 --launch.nproc=2", 1, 6}}) {
      const std::string name = c.name;
      CAPTURE(name);
      const std::string clean_metrics = temp_path("clean.jsonl"), metrics = temp_path("recovered.jsonl");
      auto clean = run(c.binary, c.job + " --fault.replicas=0 --metrics.file=" + clean_metrics);
      REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
      const std::string k = std::to_string(c.killed);
      auto r = run(c.binary, c.job + " --fault.signal=KILL --fault.signal-step=" + std::to_string(c.after_step) +
                                 " --fault.signal-rank=" + k + " --metrics.file=" + metrics);
      REQUIRE_MESSAGE(r.exit_code == 0, r.err);
      CHECK(r.err.find("recovered at step " + std::to_string(c.after_step) + ": process " + k + " lost") !=
            std::string::npos);
      CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
      CHECK(r.summary["final_loss"] == clean.summary["final_loss"]);
      if (clean.summary.contains("test_accuracy")) CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
      const auto& rec = r.summary["recoveries"];
      REQUIRE(rec.size() == 1);
      CHECK(rec[0]["source"] == "replica");
      CHECK(rec[0]["lost"] == "process " + k);
      CHECK(rec[0]["steps_redone"] == 0);
      CHECK(rec[0]["plan_before"] == rec[0]["plan_after"]);  // the user's plan, kept
      CHECK(rec[0]["restored_from"].get<std::string>().find("from its buddy copy on process") != std::string::npos);
      CHECK(r.err.find("from its buddy copy on process") != std::string::npos);
      CHECK(r.err.find("launch: process 0") == std::string::npos);  // nobody else ended or restarted
    }
  }

  TEST_CASE("with both holders of a piece lost the job falls back on its newest checkpoint") {
    // pp3 over 3: stage 1's copy lives on process 2; processes 1 and 2 both lost after step 12
    const std::string job = mlp_job + " --plan.pp=3 --plan.micro-batches=2 --launch.nproc=3";
    const std::string faults = " --fault.signal=KILL --fault.signal-rank=1,2 --fault.signal-step=12,12";
    const std::string clean_metrics = temp_path("two-clean.jsonl"), metrics = temp_path("two.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const std::string dir = temp_path("ck");
    fs::remove_all(dir);
    auto r =
        run(MLP_BINARY, job + faults + " --checkpoint.dir=" + dir + " --checkpoint.every=5 --metrics.file=" + metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() >= 1);
    CHECK(rec.back()["source"] == "checkpoint");
    CHECK(cohort::test::metrics_last_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("a bad --fault.replicas exits 2 naming the option") {
    auto r = run(MLP_BINARY, mlp_job + " --launch.nproc=2 --fault.replicas=2");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--fault.replicas must be 0 or 1, got 2") != std::string::npos);
  }
}
