// Plan transitions as a user asks for them: --plan.change-at=STEPS --plan.change-to=PLANS on
// a running job, in one process and across 2 OS processes (TCP and UCX data planes). The
// losses of the whole run equal the serial run's within the equivalence suite's tolerance
// (1e-5 relative over 30 steps), and the summary lists every transition. Bad change options
// exit 2 naming the option or the file's field.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

std::string temp_file(const std::string& name) { return cohort::test::temp_path("tr", name); }

std::string plan_file(const std::string& name, const std::string& json) {
  const std::string path = temp_file(name);
  std::ofstream(path) << json << "\n";
  return path;
}

}  // namespace

TEST_CASE("mlp dp2 sharded then tp2 pp2 m4, in one process and across 2: the serial run's losses") {
  const std::string model = "--data.name=digits --train.steps=30 --train.threads=1";
  const std::string serial_metrics = temp_file("mlp-serial.jsonl");
  auto serial = run(MLP_BINARY, model + " --plan.mode=serial --metrics.file=" + serial_metrics);
  REQUIRE(serial.exit_code == 0);
  const std::string to = plan_file("tp2pp2.json", R"({"dp":1,"tp":2,"pp":2,"micro_batches":4,"schedule":"1f1b"})");
  for (const std::string where : {"", " --launch.nproc=2", " --launch.nproc=2 --dist.transport=ucx"}) {
    CAPTURE(where);
    const std::string metrics = temp_file("mlp-changed.jsonl");
    auto r =
        run(MLP_BINARY, model + " --plan.dp=2 --plan.shard-params=true --plan.change-at=10 --plan.change-to=" + to +
                            " --metrics.file=" + metrics + where);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const double worst = cohort::test::worst_relative(cohort::test::metrics_losses(metrics),
                                                      cohort::test::metrics_losses(serial_metrics));
    MESSAGE("dp2 sharded -> tp2 pp2 m4" << where << ": max relative loss difference " << worst);
    CHECK(worst <= 1e-5);
    const auto& t = r.summary["transitions"];
    REQUIRE(t.size() == 1);
    CHECK(t[0]["step"] == 10);
    CHECK(t[0]["from"] == "dp2 tp1 pp1 m1 sharded");
    CHECK(t[0]["to"] == "dp1 tp2 pp2 m4 1f1b");
    CHECK(t[0]["bytes_moved"].get<double>() > 0);
    CHECK(t[0]["seconds"].get<double>() > 0);
    // across processes stage 0's ranks live on process 0 and stage 1's on process 1
    if (where.empty())
      CHECK(t[0]["bytes_across_processes"] == 0);
    else
      CHECK(t[0]["bytes_across_processes"].get<double>() > 0);
    CHECK(r.summary["test_accuracy"] == serial.summary["test_accuracy"]);  // the model collected from the new plan
    CHECK(r.err.find("plan change after step 10: dp2 tp1 pp1 m1 sharded -> dp1 tp2 pp2 m4 1f1b") != std::string::npos);
  }
}

TEST_CASE("mlp dp2 then dp4 across 2 processes: each process keeps the parameter actor of its replica") {
  const std::string model = "--data.name=digits --train.steps=20 --train.threads=1";
  const std::string serial_metrics = temp_file("mlp-keep-serial.jsonl");
  REQUIRE(run(MLP_BINARY, model + " --plan.mode=serial --metrics.file=" + serial_metrics).exit_code == 0);
  const std::string to = plan_file("dp4.json", R"({"dp":4})");
  const std::string metrics = temp_file("mlp-keep.jsonl");
  auto r = run(MLP_BINARY, model + " --plan.dp=2 --launch.nproc=2 --plan.change-at=8 --plan.change-to=" + to +
                               " --metrics.file=" + metrics);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const double worst =
      cohort::test::worst_relative(cohort::test::metrics_losses(metrics), cohort::test::metrics_losses(serial_metrics));
  MESSAGE("mlp dp2 -> dp4 over 2 processes: max relative loss difference " << worst);
  CHECK(worst <= 1e-5);
  const auto& t = r.summary["transitions"];
  REQUIRE(t.size() == 1);
  // process 0 (whose summary this is) keeps old rank 0 as new rank 0 and fills new rank 1
  CHECK(t[0]["param_actors"]["kept"] == 1);
  CHECK(t[0]["param_actors"]["spawned"] == 1);
  CHECK(t[0]["param_actors"]["retired"] == 0);
  CHECK(t[0]["workers"]["spawned"] == 2);
  CHECK(t[0]["workers"]["retired"] == 1);
  CHECK(r.err.find("1 of 2 parameter actors kept") != std::string::npos);
}

TEST_CASE("gpt dp2 then pp2 1f1b m4 then dp2 across 2 processes: the serial run's losses") {
  const std::string model =
      "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 "
      "--train.steps=30 --train.threads=1";
  const std::string serial_metrics = temp_file("gpt-serial.jsonl");
  REQUIRE(run(GPT_BINARY, model + " --plan.mode=serial --metrics.file=" + serial_metrics).exit_code == 0);
  const std::string pp2 = plan_file("pp2.json", R"({"pp":2,"micro_batches":4,"schedule":"1f1b"})");
  const std::string dp2 = plan_file("dp2.json", R"({"dp":2,"tp":1})");
  const std::string metrics = temp_file("gpt-changed.jsonl");
  auto r = run(GPT_BINARY, model + " --plan.dp=2 --launch.nproc=2 --plan.change-at=10,20 --plan.change-to=" + pp2 +
                               "," + dp2 + " --metrics.file=" + metrics);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const double worst =
      cohort::test::worst_relative(cohort::test::metrics_losses(metrics), cohort::test::metrics_losses(serial_metrics));
  MESSAGE("gpt dp2 -> pp2 1f1b m4 -> dp2 over 2 processes: max relative loss difference " << worst);
  CHECK(worst <= 1e-5);
  const auto& t = r.summary["transitions"];
  REQUIRE(t.size() == 2);
  CHECK(t[0]["to"] == "dp1 tp1 pp2 m4 1f1b");
  CHECK(t[1]["step"] == 20);
  CHECK(t[1]["to"] == "dp2 tp1 pp1 m1");
  for (const auto& x : t)
    MESSAGE(x["from"] << " -> " << x["to"] << ": " << x["seconds"] << " s, re-plan " << x["replan_s"] << " s, "
                      << x["bytes_moved"] << " bytes");
}

TEST_CASE("bad plan changes: one line naming what is wrong and exit code 2") {
  const std::string base = "--data.name=digits --train.steps=12 --train.threads=1 --plan.dp=2";
  const std::string broken = plan_file("broken.json", R"({"dp":2,"cuts":"x"})");
  const std::string three = plan_file("tp3.json", R"({"tp":3})");
  struct bad {
    std::string args, expected;
  };
  const bad cases[] = {
      {" --plan.change-at=5",
       "mlp: error: --plan.change-at has 1 steps and --plan.change-to 0 plans: give one plan per step"},
      {" --plan.change-at=5,3 --plan.change-to=serial,serial",
       "mlp: error: --plan.change-at: steps must be positive and ascending"},
      {" --plan.change-at=5 --plan.change-to=" + broken,
       "mlp: error: --plan.change-to=" + broken + ": " + broken + ": cuts: expected an array of node indices"},
      // across processes the first process's error reaches the other one with its code
      {" --plan.change-at=5 --plan.change-to=" + broken + " --launch.nproc=2",
       "mlp: error: --plan.change-to=" + broken + ": " + broken + ": cuts: expected an array of node indices"},
      {" --plan.change-at=5 --plan.change-to=/nonexistent.json",
       "mlp: error: --plan.change-to=/nonexistent.json: cannot read the plan file /nonexistent.json"},
      {" --plan.change-at=5 --plan.change-to=" + three + " --launch.nproc=2",
       "mlp: error: plan change at step 5: dp1 tp3 pp1 m1 has 3 ranks, which 2 processes cannot split evenly"},
      {" --plan.mode=serial --plan.change-at=5 --plan.change-to=serial",
       "mlp: error: --plan.change-at needs the actor runtime: --plan.mode=serial runs the reference trainer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    auto r = run(MLP_BINARY, base + c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(c.expected + "\n") != std::string::npos);
    if (r.err.find(c.expected) == std::string::npos) MESSAGE(r.err);
  }
  // both processes end on process 0's error: the node received it over the control plane
  auto both = run(MLP_BINARY, base + " --plan.change-at=5 --plan.change-to=" + broken + " --launch.nproc=2");
  const std::string said = ": cuts: expected an array of node indices";
  INFO(both.err);  // a rare failure seen once under load: what each process said
  const auto first = both.err.find(said);
  REQUIRE(first != std::string::npos);
  CHECK(both.err.find(said, first + 1) != std::string::npos);
  CHECK(both.err.find("launch: process 1 (pid") != std::string::npos);  // it exited with the error too
  CHECK(both.err.find("exited with code 2") != std::string::npos);
}

TEST_CASE("with --elastic.batch=scale a plan of twice the replicas trains twice the batch at twice the rate") {
  // dp2 (batch 128, lr 0.05) -> dp4 after step 6: batch 256 at lr 0.1 from sample 768 on. The
  // reference: the fixed run of 6 steps, checkpointed, resumed as dp4 with --train.batch=256
  // --train.lr=0.1 (its data cursor from the manifest: sample 768). Synth's 8192 samples keep
  // both streams in one epoch, where batches of 128 and of 256 take the same samples.
  const std::string model = "--data.name=synth --model.dims=256,64,10 --train.threads=1 --train.lr=0.05";
  const std::string to = plan_file("dp4.json", R"({"dp":4,"tp":1,"pp":1,"micro_batches":1})");
  const std::string scaled = temp_file("scale.jsonl"), fixed = temp_file("scale-fixed.jsonl"),
                    resumed = temp_file("scale-resumed.jsonl"), dir = temp_file("scale-ck");
  std::filesystem::remove_all(dir);
  auto r = run(MLP_BINARY, model + " --train.steps=12 --plan.dp=2 --plan.change-at=6 --plan.change-to=" + to +
                               " --elastic.batch=scale --metrics.file=" + scaled);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto& t = r.summary["transitions"];
  REQUIRE(t.size() == 1);
  CHECK(t[0]["batch"] == 256);
  CHECK(t[0]["lr"].get<double>() == doctest::Approx(0.1));
  CHECK(t[0]["param_actors"]["kept"] == 0);  // a new rate: every piece respawned at it
  auto first = run(MLP_BINARY, model + " --train.steps=6 --plan.dp=2 --checkpoint.every=6 --checkpoint.dir=" + dir +
                                   " --metrics.file=" + fixed);
  REQUIRE_MESSAGE(first.exit_code == 0, first.err);
  auto rest = run(MLP_BINARY, model +
                                  " --train.steps=12 --plan.dp=4 --train.batch=256 --train.lr=0.1 "
                                  "--checkpoint.resume=auto --checkpoint.dir=" +
                                  dir + " --metrics.file=" + resumed);
  REQUIRE_MESSAGE(rest.exit_code == 0, rest.err);
  auto losses = cohort::test::metrics_losses(scaled);
  auto before = cohort::test::metrics_losses(fixed), after = cohort::test::metrics_losses(resumed);
  REQUIRE(losses.size() == 12);
  REQUIRE((before.size() == 6 && after.size() == 6));
  before.insert(before.end(), after.begin(), after.end());
  CHECK(losses == before);  // bit for bit: the same samples, rate and arithmetic
  // the metrics say the step's batch and rate
  std::ifstream in(scaled);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find("\"loss\"") != std::string::npos && line.find("\"event\"") == std::string::npos) last = line;
  auto j = nlohmann::json::parse(last);
  CHECK(j["batch"] == 256);
  CHECK(j["lr"].get<double>() == doctest::Approx(0.1));
  auto bad = run(MLP_BINARY, model + " --train.steps=2 --elastic.batch=double");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--elastic.batch must be fixed or scale, got 'double'") != std::string::npos);
}
