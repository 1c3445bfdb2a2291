// Processes join a running job (issue 18 item 1): a process started with --join=HOST:PORT (here
// the launcher's --launch.joiners) waits at the coordinator; at the step boundary after the
// step whose job-wide sum counted it (--elastic.join-after makes that step deterministic) process
// 0's planner decides whether the job grows, process 0 admits it, and every process — it too —
// changes to the plan for the larger job, the state moving over a data plane that includes it.
// Nothing is redone, nobody restarts. With the user's plan placed over more processes every
// loss equals the fixed-size run's bit for bit; with the planner's plan the job re-plans and
// stays within 1e-5. A process beyond --elastic.max-procs waits as a spare: it takes a lost
// process's slot at the next boundary, or is told the job ended without it.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "apps/run_app.hpp"
#include "faults/fault_jobs.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("join", name); }

const std::string& mlp_job = cohort::test::recovering_mlp_job;

// What every growth shows: a transition with cause "join" at `after` naming the newcomers, an
// adopted decision with both predictions, no recovery, every process exited 0.
void check_grew(const cohort::test::run_result& r, std::int64_t after, const std::string& newcomers, int processes) {
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto& tr = r.summary["transitions"];
  REQUIRE(!tr.empty());
  const auto& t = tr.back();
  CHECK(t["cause"] == "join");
  CHECK(t["joining"] == newcomers);
  CHECK(t["step"] == after);
  CHECK(t["bytes_across_processes"].get<double>() > 0);
  CHECK(r.summary["recoveries"].empty());  // nothing lost, nothing redone
  CHECK(r.summary["plan"]["processes"] == processes);
  const auto& d = r.summary["scale_out"].back();
  CHECK(d["adopted"] == true);
  CHECK(d["step"] == after);
  CHECK(d["predicted_step_s_before"].get<double>() > 0);
  CHECK(d["predicted_step_s_after"].get<double>() > 0);
  CHECK(d["cost_s"].get<double>() > 0);
  CHECK(d["why"].get<std::string>().find("the transition costs") != std::string::npos);
  CHECK(r.err.find("(" + newcomers + " joined the job)") != std::string::npos);
  CHECK(r.err.find("launch: process") == std::string::npos);  // every process exited 0, none restarted
}

}  // namespace

TEST_SUITE("elastic") {
  TEST_CASE("two processes join a job of two and every loss equals the fixed-size run's") {
    // dp4 (the user's plan) over 2 processes, then placed over 4 after step 10
    const std::string job = mlp_job + " --plan.dp=4";
    const std::string clean_metrics = temp_path("dp-clean.jsonl"), metrics = temp_path("dp.jsonl");
    auto clean = run(MLP_BINARY, job + " --launch.nproc=4 --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --launch.nproc=2 --elastic.max-procs=4 --launch.joiners=2 "
                                 "--elastic.join-after=10 --elastic.scale-out=always --metrics.file=" +
                                 metrics);
    check_grew(r, 10, "process 2, process 3", 4);
    CHECK(r.summary["transitions"][0]["from"] == r.summary["transitions"][0]["to"]);  // the user's plan, kept
    CHECK(r.summary["scale_out"][0]["processes_before"] == 2);
    CHECK(r.summary["scale_out"][0]["processes_after"] == 4);
    CHECK(r.summary["scale_out"][0]["waiting"] == 2);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));  // bit for bit
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
    bool event = false;
    for (const auto& e : cohort::test::metrics_events(metrics)) event = event || e["event"] == "scale_out";
    CHECK(event);
  }

  TEST_CASE("with the planner's plan the job re-plans for the larger job") {
    const std::string clean_metrics = temp_path("auto-clean.jsonl"), metrics = temp_path("auto.jsonl");
    const std::string job = mlp_job + cohort::test::pinned_planner();
    auto clean = run(MLP_BINARY, job + " --launch.nproc=2 --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --launch.nproc=2 --elastic.max-procs=4 --launch.joiners=2 "
                                 "--elastic.join-after=10 --elastic.scale-out=always --metrics.file=" +
                                 metrics);
    check_grew(r, 10, "process 2, process 3", 4);
    const auto& t = r.summary["transitions"][0];
    MESSAGE("planner's plan " << t["from"] << " -> " << t["to"]);
    CHECK(t["plan"]["ranks"].get<int>() % 4 == 0);  // for the 4 processes of the larger job
    CHECK(t["predicted_step_s_after"].get<double>() > 0);
    const auto a = cohort::test::metrics_losses(metrics), b = cohort::test::metrics_losses(clean_metrics);
    REQUIRE(a.size() == b.size());
    CHECK(std::equal(a.begin(), a.begin() + 10, b.begin()));  // bit for bit up to the join
    const double drift = cohort::test::max_relative_difference(a, b, 11);
    MESSAGE("after the join: max relative loss difference " << drift);
    CHECK(drift <= 1e-5);
  }

  TEST_CASE("under --elastic.batch=scale joiners take the batch and the samples where the job is") {
    // The planner's plan with tp and pp fixed at 1: dp2 over 2 processes (128 samples a step,
    // lr 0.05); after step 3 the operator's change to dp4 (256 at 0.1); after step 6 two
    // processes join and the planner's dp8 over 4 processes trains 512 at 0.2 from sample
    // 3 x 128 + 3 x 256 = 1152 on — which the joiners learn from the data cursor in the joining
    // text (a cursor they did not get would start them elsewhere). The reference: the same
    // plans run by hand, checkpointed and resumed at each change. Synth's 8192 samples keep
    // every stream in one epoch.
    const std::string job =
        "--data.name=synth --model.dims=256,64,10 --train.threads=1 --train.lr=0.05 --fault.recover=true";
    const std::string metrics = temp_path("scale.jsonl"), dir = temp_path("scale-ck"),
                      dp4 = temp_path("scale-dp4.json"), to_plan = temp_path("scale-to.json");
    std::filesystem::remove_all(dir);
    {
      std::ofstream out(dp4);
      out << R"({"dp":4,"tp":1,"pp":1,"micro_batches":1})";
    }
    auto r =
        run(MLP_BINARY, job + " --plan.mode=auto --plan.tp=1 --plan.pp=1 --plan.change-at=3 --plan.change-to=" + dp4 +
                            " --train.steps=12 --launch.nproc=2 --elastic.max-procs=4 --launch.joiners=2 "
                            "--elastic.join-after=6 --elastic.scale-out=always --elastic.batch=scale "
                            "--metrics.file=" +
                            metrics);
    check_grew(r, 6, "process 2, process 3", 4);
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 2);
    const std::string from = tr[0]["from"];
    MESSAGE("plans: " << from << " -> " << tr[0]["to"] << " -> " << tr[1]["to"]);
    REQUIRE(from.rfind("dp2 tp1 pp1 m1", 0) == 0);
    CHECK(tr[0]["batch"] == 256);
    CHECK(tr[0]["lr"].get<double>() == doctest::Approx(0.1));
    REQUIRE(tr[1]["plan"]["dp"] == 8);
    CHECK(tr[1]["batch"] == 512);
    CHECK(tr[1]["lr"].get<double>() == doctest::Approx(0.2));
    {
      std::ofstream out(to_plan);
      out << tr[1]["plan"].dump();
    }
    // by hand: dp2 for steps 1-3, dp4 at 256 for 4-6, the planner's dp8 at 512 over 4 for 7-12
    const std::string first_plan =
        std::string(" --plan.dp=2") + (from.find("sharded") != std::string::npos ? " --plan.shard-params=true" : "");
    const std::vector<std::string> legs = {
        first_plan + " --train.steps=3 --launch.nproc=2",
        " --plan.file=" + dp4 + " --train.steps=6 --launch.nproc=2 --train.batch=256 --train.lr=0.1",
        " --plan.file=" + to_plan + " --train.steps=12 --launch.nproc=4 --train.batch=512 --train.lr=0.2"};
    std::vector<double> by_hand;
    for (std::size_t leg = 0; leg < legs.size(); ++leg) {
      const std::string leg_metrics = temp_path("scale-leg" + std::to_string(leg) + ".jsonl");
      auto part =
          run(MLP_BINARY, job + legs[leg] + " --checkpoint.every=3 --checkpoint.resume=auto --checkpoint.dir=" + dir +
                              " --metrics.file=" + leg_metrics);
      REQUIRE_MESSAGE(part.exit_code == 0, part.err);
      for (double l : cohort::test::metrics_losses(leg_metrics)) by_hand.push_back(l);
    }
    REQUIRE(by_hand.size() == 12);
    CHECK(cohort::test::metrics_losses(metrics) == by_hand);  // bit for bit: the same samples, rates and plans
  }

  TEST_CASE("four processes: one leaves on SIGTERM and another joins: every loss equals the fixed-size run's") {
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=4";
    const std::string clean_metrics = temp_path("433-clean.jsonl"), metrics = temp_path("433.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    // the joiner waits as a spare while the job is full; process 2 leaves after step 9, the
    // spare comes in at step 18 (into the slot the leaver freed)
    auto r = run(MLP_BINARY, job +
                                 " --elastic.max-procs=4 --launch.joiners=1 --elastic.join-after=18 "
                                 "--elastic.scale-out=always --fault.signal=TERM --fault.signal-rank=2 "
                                 "--fault.signal-step=8 --metrics.file=" +
                                 metrics);
    check_grew(r, 18, "process 2", 4);
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 2);
    CHECK(tr[0]["cause"] == "leave");
    CHECK(tr[0]["step"] == 9);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
  }

  TEST_CASE("gpt dp2 pp2 grows from 2 to 4 processes with the fixed-size run's losses") {
    const std::string job =
        "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 --train.steps=16 "
        "--train.threads=1 --plan.dp=2 --plan.pp=2 --plan.micro-batches=2 --fault.recover=true";
    const std::string clean_metrics = temp_path("gpt-clean.jsonl"), metrics = temp_path("gpt.jsonl");
    auto clean = run(GPT_BINARY, job + " --launch.nproc=4 --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(GPT_BINARY, job +
                                 " --launch.nproc=2 --elastic.max-procs=4 --launch.joiners=2 "
                                 "--elastic.join-after=6 --elastic.scale-out=always --metrics.file=" +
                                 metrics);
    check_grew(r, 6, "process 2, process 3", 4);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("gpt dp2 pp2: 4 -> 3 (SIGTERM) -> 4 (a spare joins) with the fixed-size run's losses") {
    const std::string job =
        "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 --train.steps=16 "
        "--train.threads=1 --plan.dp=2 --plan.pp=2 --plan.micro-batches=2 --fault.recover=true --launch.nproc=4";
    const std::string clean_metrics = temp_path("gpt433-clean.jsonl"), metrics = temp_path("gpt433.jsonl");
    auto clean = run(GPT_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(GPT_BINARY, job +
                                 " --elastic.max-procs=4 --launch.joiners=1 --elastic.join-after=10 "
                                 "--elastic.scale-out=always --fault.signal=TERM --fault.signal-rank=3 "
                                 "--fault.signal-step=4 --metrics.file=" +
                                 metrics);
    check_grew(r, 10, "process 3", 4);
    REQUIRE(r.summary["transitions"].size() == 2);
    CHECK(r.summary["transitions"][0]["cause"] == "leave");
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("gpt with the planner's plan over 3 processes: one SIGKILLed and the job re-plans for 2 and goes on") {
    const std::string job =
        "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=12 --train.steps=16 "
        "--train.threads=1 --fault.recover=true --launch.nproc=3" +
        cohort::test::pinned_planner();
    const std::string clean_metrics = temp_path("gpt32-clean.jsonl"), metrics = temp_path("gpt32.jsonl");
    auto clean = run(GPT_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(GPT_BINARY,
                 job + " --fault.signal=KILL --fault.signal-rank=2 --fault.signal-step=6 --metrics.file=" + metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    REQUIRE(r.summary["recoveries"].size() == 1);
    CHECK(r.summary["recoveries"][0]["steps_redone"] == 0);
    const auto a = cohort::test::metrics_last_losses(metrics), b = cohort::test::metrics_losses(clean_metrics);
    REQUIRE(a.size() == b.size());
    CHECK(std::equal(a.begin(), a.begin() + 6, b.begin()));
    const double drift = cohort::test::max_relative_difference(a, b, 7);
    MESSAGE("gpt " << r.summary["recoveries"][0]["plan_before"] << " -> " << r.summary["recoveries"][0]["plan_after"]
                   << ": max relative loss difference " << drift);
    CHECK(drift <= 1e-5);
  }

  TEST_CASE(
      "gpt with the planner's plan over 3 processes: the coordinator SIGKILLed and process 1 takes over and re-plans") {
    // process 0 holds pipeline stage 0 and is the coordinator: its rank comes back from its
    // buddy copy, process 1 leads (2 of 3 reach it) and its planner re-plans for 2 processes
    const std::string job =
        "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=12 --train.steps=16 "
        "--train.threads=1 --fault.recover=true --launch.nproc=3" +
        cohort::test::pinned_planner();
    const std::string clean_metrics = temp_path("gpt30-clean.jsonl"), metrics = temp_path("gpt30.jsonl");
    auto clean = run(GPT_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(GPT_BINARY,
                 job + " --fault.signal=KILL --fault.signal-rank=0 --fault.signal-step=6 --metrics.file=" + metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("process 1 took over as the coordinator (1 of 1 processes followed)") != std::string::npos);
    REQUIRE(r.summary["recoveries"].size() == 1);
    CHECK(r.summary["recoveries"][0]["lost"] == "process 0");
    CHECK(r.summary["recoveries"][0]["steps_redone"] == 0);
    CHECK(r.summary["recoveries"][0]["replan"].get<std::string>().rfind("changed to ", 0) == 0);
    const auto a = cohort::test::metrics_last_losses(metrics), b = cohort::test::metrics_losses(clean_metrics);
    REQUIRE(a.size() == b.size());
    CHECK(std::equal(a.begin(), a.begin() + 6, b.begin()));
    const double drift = cohort::test::max_relative_difference(a, b, 7);
    MESSAGE("gpt " << r.summary["recoveries"][0]["plan_before"] << " -> " << r.summary["recoveries"][0]["plan_after"]
                   << " under process 1: max relative loss difference " << drift);
    CHECK(drift <= 1e-5);
  }

  TEST_CASE("with --elastic.scale-out=never the joiners wait as spares and are told the job ended without them") {
    const std::string job = mlp_job + " --plan.dp=4 --launch.nproc=2";
    const std::string clean_metrics = temp_path("never-clean.jsonl"), metrics = temp_path("never.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.max-procs=3 --launch.joiners=2 --elastic.join-after=10 "
                                 "--elastic.scale-out=never --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.summary["transitions"].empty());
    REQUIRE(r.summary["scale_out"].size() == 1);  // asked once: the same spares are not weighed again
    const auto& d = r.summary["scale_out"][0];
    CHECK(d["adopted"] == false);
    CHECK(d["waiting"] == 1);  // one slot free: the other is a spare either way
    CHECK(d["predicted_step_s_before"].get<double>() > 0);
    CHECK(d["why"].get<std::string>().find("--elastic.scale-out=never") == 0);
    CHECK(r.summary["plan"]["processes"] == 2);
    std::size_t dismissed = 0;
    for (std::size_t at = 0; (at = r.err.find("which ended without needing it", at)) != std::string::npos; ++at)
      ++dismissed;
    CHECK(dismissed == 2);
    CHECK(r.err.find("launch: joining process") == std::string::npos);  // both exited 0
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("a spare takes a lost process's slot at the next boundary and the job grows back") {
    // dp3 over 3 processes, a full job with one spare waiting; process 2 is killed after step 6:
    // the others take over its rank (one step redone), then the spare joins after step 12
    const std::string job = mlp_job + " --plan.dp=3 --launch.nproc=3";
    const std::string clean_metrics = temp_path("spare-clean.jsonl"), metrics = temp_path("spare.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.max-procs=3 --launch.joiners=1 --elastic.join-after=12 "
                                 "--elastic.scale-out=always --fault.signal=KILL --fault.signal-rank=2 "
                                 "--fault.signal-step=6 --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    REQUIRE(r.summary["recoveries"].size() == 1);
    CHECK(r.summary["recoveries"][0]["steps_redone"] == 0);  // the interrupted step only
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);
    CHECK(tr[0]["cause"] == "join");
    CHECK(tr[0]["joining"] == "process 2");
    CHECK(tr[0]["step"] == 12);
    CHECK(r.summary["plan"]["processes"] == 3);
    CHECK(cohort::test::metrics_last_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("a spare waiting at a lost coordinator asks its successor and joins the job there") {
    // dp6 over 3 processes and one process waiting to join (at process 0); process 0 is killed
    // after step 4: process 1 takes over, the waiting process asks again at the standby ports it
    // was told (process 1's first) and process 1 admits it after step 10
    const std::string job = mlp_job + " --plan.dp=6 --launch.nproc=3";
    const std::string clean_metrics = temp_path("successor-clean.jsonl"), metrics = temp_path("successor.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    auto r = run(MLP_BINARY, job +
                                 " --elastic.max-procs=4 --launch.joiners=1 --elastic.join-after=10 "
                                 "--elastic.scale-out=always --fault.signal=KILL --fault.signal-rank=0 "
                                 "--fault.signal-step=4 --metrics.file=" +
                                 metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("process 1 took over as the coordinator") != std::string::npos);
    CHECK(r.err.find("the coordinator this process waited at to join is gone") != std::string::npos);
    CHECK(r.err.find("cohort: asked to join again at") != std::string::npos);
    CHECK(r.err.find("launch: joining process") == std::string::npos);  // it exited 0
    const auto& rec = r.summary["recoveries"];
    REQUIRE(rec.size() == 1);
    CHECK(rec[0]["lost"] == "process 0");
    const auto& tr = r.summary["transitions"];
    REQUIRE(tr.size() == 1);
    CHECK(tr[0]["cause"] == "join");
    CHECK(tr[0]["joining"] == "process 3");
    CHECK(tr[0]["step"] == 10);
    CHECK(r.summary["plan"]["processes"] == 3);  // processes 1, 2 and 3
    CHECK(r.summary["scale_out"][0]["adopted"] == true);
    CHECK(r.summary["test_accuracy"] == clean.summary["test_accuracy"]);
    CHECK(cohort::test::metrics_last_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("a leave below --elastic.min-procs ends the job naming the bound") {
    auto r = run(MLP_BINARY, mlp_job +
                                 " --plan.dp=3 --launch.nproc=3 --elastic.min-procs=3 "
                                 "--elastic.leave-after=5 --elastic.leave-rank=2");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("would leave 2 processes, fewer than --elastic.min-procs=3") != std::string::npos);
  }

  TEST_CASE("a process with the wrong job secret is refused and the running job goes on undisturbed") {
    // the job (secret "right") on a fixed port; while it runs, a process asks to join with another
    const std::string port = "29763";
    const std::string job = mlp_job + " --train.steps=60 --plan.dp=2 --launch.nproc=2";
    const std::string clean_metrics = temp_path("secret-clean.jsonl"), metrics = temp_path("secret.jsonl");
    auto clean = run(MLP_BINARY, job + " --metrics.file=" + clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    std::filesystem::remove(metrics);
    cohort::test::run_result intruder;
    std::thread other([&] {
      for (int i = 0; i < 400 && cohort::test::count_lines(metrics) < 3; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      intruder = run("env COHORT_JOB_SECRET=wrong " MLP_BINARY,
                     mlp_job + " --plan.dp=2 --join=127.0.0.1:" + port + " --dist.join-timeout-ms=5000");
    });
    auto r = run("env COHORT_JOB_SECRET=right " MLP_BINARY,
                 job + " --elastic.max-procs=3 --dist.master-port=" + port + " --metrics.file=" + metrics);
    other.join();
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(intruder.exit_code != 0);
    CHECK(intruder.err.find("authentication failed") != std::string::npos);
    CHECK(r.err.find("cohort: refused a connection: authentication failed") != std::string::npos);
    CHECK(r.summary["transitions"].empty());
    CHECK(!r.summary.contains("scale_out"));  // nobody waited
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
  }

  TEST_CASE("bad elastic options exit 2 naming the option") {
    const std::string base = "--data.name=digits --train.steps=2 --train.threads=1";
    const std::pair<std::string, std::string> cases[] = {
        {" --launch.nproc=2 --elastic.max-procs=4", "--elastic.max-procs needs --fault.recover=true"},
        {" --launch.nproc=3 --fault.recover=true --elastic.max-procs=2", "--elastic.max-procs must be 0 or between"},
        {" --launch.nproc=2 --fault.recover=true --elastic.min-procs=3", "--elastic.min-procs must be between 1"},
        {" --launch.nproc=2 --fault.recover=true --elastic.max-procs=3 --elastic.scale-out=sometimes",
         "--elastic.scale-out must be auto, always or never"},
        {" --launch.nproc=2 --fault.recover=true --launch.joiners=1", "--launch.joiners needs --launch.nproc and"},
        {" --join=127.0.0.1:1", "--join without --dist.world joins a running job: it needs --fault.recover=true"},
        {" --launch.nproc=2 --fault.recover=true --elastic.join-after=-1", "--elastic.join-after must be >= 0"},
    };
    for (const auto& [opts, why] : cases) {
      CAPTURE(opts);
      auto r = run(MLP_BINARY, base + opts);
      CHECK(r.exit_code == 2);
      CHECK(r.err.find(why) != std::string::npos);
    }
  }
}
