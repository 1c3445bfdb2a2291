// A node leaves a running job in good order (issue 18 item 2): on SIGTERM (what a scheduler
// sends before preemption; here the --fault.signal=TERM hook raises it) or at
// --elastic.leave-after, it asks in the step's sum; at the next boundary the job moves its
// ranks' state to the others over the data plane it is still on, the control plane lets it go
// (a new membership without it, no loss), and it exits 0 — no step redone, no checkpoint read,
// nobody restarted. With the plan kept every loss equals the fixed-size run's bit for bit;
// with the planner's plan the job re-plans for the devices that remain (within 1e-5).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "apps/run_app.hpp"
#include "faults/fault_jobs.hpp"
#include "support/run_files.hpp"

using cohort::test::run;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("leave", name); }

const std::string& mlp_job = cohort::test::recovering_mlp_job;

// What every graceful leave shows: one transition with cause "leave" naming the leaver, no
// recovery, the leaver's exit 0 and its line, nobody restarted.
void check_left(const cohort::test::run_result& r, int leaver, std::int64_t after) {
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto& tr = r.summary["transitions"];
  REQUIRE(tr.size() == 1);
  CHECK(tr[0]["cause"] == "leave");
  CHECK(tr[0]["leaving"] == "process " + std::to_string(leaver));
  CHECK(tr[0]["step"] == after);
  CHECK(r.summary["recoveries"].empty());  // nothing lost, nothing redone
  CHECK(r.err.find("job: process " + std::to_string(leaver) + " left the job after step " + std::to_string(after)) !=
        std::string::npos);
  CHECK(r.err.find("(process " + std::to_string(leaver) + " leaves the job)") != std::string::npos);
  CHECK(r.err.find("launch: process") == std::string::npos);  // every process exited 0, none restarted
}

}  // namespace

TEST_SUITE("elastic") {
  TEST_CASE("a node leaves at --elastic.leave-after and every loss equals the fixed-size run's") {
    // dp4 over 4 processes, process 2 leaves after step 12; a checkpoint is due at the same
    // boundary: written by the processes that remain, after the leave
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4";
    const std::string clean_metrics = temp_path("dp-clean.jsonl"), metrics = temp_path("dp.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const std::string ck = cohort::test::fresh_dir("leave", "ck");
    auto r = run(MLP_BINARY, job + " --elastic.leave-after=12 --elastic.leave-rank=2 --checkpoint.dir=" + ck +
                                 " --checkpoint.every=6 --metrics.file=" + metrics);
    check_left(r, 2, 12);
    CHECK(r.err.find("job: process 2 --elastic.leave-after: it leaves the job after step 12") != std::string::npos);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
    bool twelve = false;
    for (const auto& c : r.summary["checkpoints"])
      if (c["step"] == 12) twelve = !c.contains("error");
    CHECK(twelve);
  }

  TEST_CASE("a node that gets SIGTERM leaves at the next step boundary and its pipeline stage moves") {
    // pp3 over 3: stage 2's process gets SIGTERM after step 12 and leaves once step 13 is done;
    // its stage moves to another process (the plan kept, placed unevenly). The cuts are named:
    // one stage per Linear layer (forward nodes 0-2, 3-5, 6-8: matmul, bias, relu or loss), so
    // stage 2 holds the last layer whatever this machine's profile (the balanced cutter may leave
    // it only the loss, and nothing to move)
    const std::string job = mlp_job + " --plan.pp=3 --plan.cuts=3,6 --plan.micro-batches=2 --launch.nproc=3";
    const std::string clean_metrics = temp_path("pp-clean.jsonl"), metrics = temp_path("pp.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY,
                 job + " --fault.signal=TERM --fault.signal-rank=2 --fault.signal-step=12 --metrics.file=" + metrics);
    check_left(r, 2, 13);
    CHECK(r.err.find("job: process 2 got SIGTERM: it leaves the job after step 13") != std::string::npos);
    CHECK(r.summary["transitions"][0]["from"] == r.summary["transitions"][0]["to"]);  // the user's plan, kept
    CHECK(r.summary["transitions"][0]["predicted_step_s_after"].is_null());           // kept unevenly: not predicted
    CHECK(r.summary["transitions"][0]["measured_step_s_after"].get<double>() > 0);
    // the last layer's 128x10 weight and 10 biases, each value with AdamW's two moments, in f32
    CHECK(r.summary["transitions"][0]["bytes_moved"].get<double>() == (128.0 * 10 + 10) * 3 * 4);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("over UCX the middle stage's process leaves and the losses stay the fixed-size run's") {
    const std::string job = mlp_job + " --plan.pp=3 --plan.micro-batches=2 --launch.nproc=3 --dist.transport=ucx";
    const std::string clean_metrics = temp_path("ucx-clean.jsonl"), metrics = temp_path("ucx.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    if (clean.exit_code != 0 && clean.err.find("UCX") != std::string::npos) {
      MESSAGE("UCX unavailable: skipped (" << clean.err << ")");
      return;
    }
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job + " --elastic.leave-after=12 --elastic.leave-rank=1 --metrics.file=" + metrics);
    check_left(r, 1, 12);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("gpt pp2 over 2 processes: the node leaves and process 0 trains both stages on") {
    const std::string job =
        "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 --train.steps=16 "
        "--train.threads=1 --plan.pp=2 --plan.micro-batches=2 --launch.nproc=2 --fault.recover=true";
    const std::string clean_metrics = temp_path("gpt-clean.jsonl"), metrics = temp_path("gpt.jsonl");
    auto clean = run(GPT_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(GPT_BINARY, job + " --elastic.leave-after=6 --elastic.leave-rank=1 --metrics.file=" + metrics);
    check_left(r, 1, 6);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("with the planner's plan the job re-plans for the processes that remain") {
    const std::string job = mlp_job + " --launch.nproc=4" + cohort::test::pinned_planner();
    const std::string clean_metrics = temp_path("auto-clean.jsonl"), metrics = temp_path("auto.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job + " --elastic.leave-after=12 --elastic.leave-rank=3 --metrics.file=" + metrics);
    check_left(r, 3, 12);
    const auto& t = r.summary["transitions"][0];
    MESSAGE("planner's plan " << t["from"] << " -> " << t["to"]);
    CHECK(t["plan"]["ranks"].get<int>() % 3 == 0);  // for the 3 processes that remain
    // reported with the predicted and measured step time before and after (the planner predicted both)
    CHECK(t["predicted_step_s_before"].get<double>() > 0);
    CHECK(t["predicted_step_s_after"].get<double>() > 0);
    CHECK(t["measured_step_s_before"].get<double>() > 0);
    CHECK(t["measured_step_s_after"].get<double>() > 0);
    CHECK(t["measured_steps_after"] == 10);
    const auto events = cohort::test::metrics_events(metrics);
    REQUIRE(events.size() == 1);
    CHECK(events[0]["event"] == "transition");
    CHECK(events[0]["cause"] == "leave");
    CHECK(events[0]["step"] == 12);
    const auto a = cohort::test::metrics_losses(metrics), b = cohort::test::metrics_losses(clean_metrics);
    REQUIRE(a.size() == 30);
    REQUIRE(b.size() == 30);
    CHECK(std::equal(a.begin(), a.begin() + 12, b.begin()));  // the same plan up to the leave
    const double worst = cohort::test::max_relative_difference(a, b, /*from=*/13);
    MESSAGE("max relative loss difference after the re-plan " << worst);
    CHECK(worst <= 1e-5);
  }

  TEST_CASE("bad leave options exit 2 naming the option") {
    auto no_recover =
        run(MLP_BINARY, "--data.name=digits --launch.nproc=2 --elastic.leave-after=5 --elastic.leave-rank=1");
    CHECK(no_recover.exit_code == 2);
    CHECK(no_recover.err.find("--elastic.leave-after needs --fault.recover=true") != std::string::npos);
    auto coordinator = run(MLP_BINARY, mlp_job + " --launch.nproc=2 --elastic.leave-after=5 --elastic.leave-rank=0");
    CHECK(coordinator.exit_code == 2);
    CHECK(coordinator.err.find("--elastic.leave-rank must name a node of the job: 1..1, got 0") != std::string::npos);
    auto signal =
        run(MLP_BINARY, mlp_job + " --launch.nproc=2 --fault.signal=HUP --fault.signal-rank=1 --fault.signal-step=2");
    CHECK(signal.exit_code == 2);
    CHECK(signal.err.find("--fault.signal must be KILL, STOP or TERM, got 'HUP'") != std::string::npos);
  }
}
