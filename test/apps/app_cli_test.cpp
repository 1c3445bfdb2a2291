// The apps end to end, as a user runs them: convergence on real data, the JSON summary as
// the last stdout line, metrics JSONL, and exit code 2 with a one-line error for bad input.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "run_app.hpp"

using json = nlohmann::json;
using cohort::test::run;

namespace {

std::string data_hint() { return "data files come from scripts/fetch-data.sh"; }

}  // namespace

TEST_CASE("mlp on digits reaches at least 95% accuracy on the held-out split") {
  auto r = run(MLP_BINARY, "--data.name=digits --train.steps=500 --train.threads=2");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err << " (" << data_hint() << ")");
  REQUIRE(r.summary.is_object());
  CHECK(r.summary["app"] == "mlp");
  CHECK(r.summary["steps"] == 500);
  CHECK(r.summary["threads"] == 2);
  CHECK(r.summary["samples_per_s"].get<double>() > 0);
  MESSAGE("digits test accuracy " << r.summary["test_accuracy"].get<double>());
  CHECK(r.summary["test_accuracy"].get<double>() >= 0.95);
}

TEST_CASE("gpt on GPL-3 ends below loss 2.7 after 33 steps, as the PyTorch reference does") {
  auto metrics =
      std::filesystem::temp_directory_path() / ("cohort-gpt-metrics-" + std::to_string(::getpid()) + ".jsonl");
  auto r = run(GPT_BINARY, "--config-file=" + std::string(COHORT_SOURCE_DIR) +
                               "/configs/gpt_gpl3.ini --train.threads=2 --metrics.file=" + metrics.string());
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(r.summary["steps"] == 33);
  MESSAGE("gpt loss " << r.summary["first_loss"].get<double>() << " -> " << r.summary["final_loss"].get<double>());
  CHECK(r.summary["first_loss"].get<double>() > 5.0);  // ~ln(256) = 5.55 at the start
  CHECK(r.summary["final_loss"].get<double>() < 2.7);
  CHECK(r.summary["tokens_per_s"].get<double>() > 0);
  std::ifstream m(metrics);
  int lines = 0;
  for (std::string line; std::getline(m, line); ++lines) {
    auto rec = json::parse(line);
    CHECK(rec["step"] == lines + 1);
    CHECK(rec.contains("loss"));
  }
  CHECK(lines == 33);
  std::filesystem::remove(metrics);
}

TEST_CASE("bad input: one-line error on stderr and exit code 2") {
  struct bad_case {
    const char* binary;
    std::string args, expected;
  };
  std::string missing_dir = "--data.dir=/nonexistent-cohort-data";
  const std::string duplicate = (std::filesystem::temp_directory_path() / "cohort-duplicate-id.json").string();
  std::ofstream(duplicate)
      << R"({"machines": [{"hostname": "h", "addr": "10.0.0.1", "port": "60009", "devices": [)"
      << R"({"global_id": 0, "local_id": 0, "type": "GPU", "model": "A100", "sp_gflops": 19500, "dp_gflops": 9700, "memory": 40},)"
      << R"({"global_id": 0, "local_id": 1, "type": "GPU", "model": "A100", "sp_gflops": 19500, "dp_gflops": 9700, "memory": 40}],)"
      << R"("links": []}]})";
  const bad_case cases[] = {
      {MLP_BINARY, "--train.stepz=5", "mlp: error: unknown option --train.stepz (see --help)"},
      {MLP_BINARY, "--train.steps=five", "mlp: error: command line: train.steps must be an integer, got 'five'"},
      {MLP_BINARY, "--data.name=cifar", "mlp: error: --data.name must be digits, fashion, mnist or synth, got 'cifar'"},
      {MLP_BINARY, missing_dir,
       "mlp: error: missing data file /nonexistent-cohort-data/sklearn/digits.csv.gz (run scripts/fetch-data.sh; add "
       "--all for MNIST)"},
      {MLP_BINARY, "--config-file=/nonexistent.ini", "mlp: error: cannot open config file '/nonexistent.ini'"},
      {MLP_BINARY, "--train.steps=0",
       "mlp: error: --train.steps must be positive (0 only with --init.from: evaluate a saved model)"},
      {MLP_BINARY, "--model.dims=64,10,3",
       "mlp: error: --model.dims must start with 64 and end with at least 10 for digits"},
      {GPT_BINARY, "--data.file=/nonexistent.txt", "gpt: error: cannot open text file '/nonexistent.txt'"},
      {GPT_BINARY, "--model.heads=3",
       "gpt: error: --model.layers, --model.d, --model.heads and --model.seq must be positive, heads dividing d"},
      {MLP_BINARY, "--plan.schedule=zigzag", "mlp: error: --plan.schedule must be gpipe or 1f1b, got 'zigzag'"},
      {MLP_BINARY, "--plan.mode=magic", "mlp: error: --plan.mode must be auto, manual or serial, got 'magic'"},
      {MLP_BINARY, "--plan.dp=3 --plan.micro-batches=50",
       "mlp: error: plan: batch 128 is smaller than dp 3 x micro-batches 50 (every share needs a row)"},
      {MLP_BINARY, "--plan.tp=200",
       "mlp: error: plan tp=200: 'fc1.weight' [64,128]: dimension 1 has 128 units, fewer than the 200 ranks to shard "
       "it over"},
      {MLP_BINARY, "--plan.pp=100",
       "mlp: error: plan pp=100: cannot cut 9 forward operations into 100 pipeline stages"},
      {MLP_BINARY, "--plan.only=true --cluster.file=" + duplicate, "DUPLICATE"},
      {MLP_BINARY, "--train.optimizer=lamb", "mlp: error: --train.optimizer must be sgd, adamw or adagrad, got 'lamb'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    auto r = run(c.binary, c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    if (c.expected == "DUPLICATE")  // the cluster reader's message, at exit code 2 like every bad input
      CHECK(r.err.find("global_id: 0 is already used by") != std::string::npos);
    else
      CHECK(r.err == c.expected + "\n");
  }
}

TEST_CASE("a plan on the command line trains like the serial mode, and says so in the summary") {
  const std::string common = "--data.name=digits --train.steps=40 --train.batch=64 --train.threads=2 ";
  auto serial = run(MLP_BINARY, common + "--plan.mode=serial");
  REQUIRE_MESSAGE(serial.exit_code == 0, serial.err);
  CHECK(serial.summary["plan"]["mode"] == "serial");
  auto dist =
      run(MLP_BINARY, common + "--plan.dp=2 --plan.tp=2 --plan.pp=2 --plan.micro-batches=2 --plan.schedule=gpipe");
  REQUIRE_MESSAGE(dist.exit_code == 0, dist.err);
  CHECK(dist.summary["plan"]["ranks"] == 8);
  CHECK(dist.summary["plan"]["schedule"] == "gpipe");
  double a = serial.summary["final_loss"].get<double>(), b = dist.summary["final_loss"].get<double>();
  CHECK(std::fabs(a - b) <= 1e-5 * std::fabs(a));
  CHECK(std::fabs(serial.summary["test_accuracy"].get<double>() - dist.summary["test_accuracy"].get<double>()) < 0.01);
}

TEST_CASE("a worker failure injected from the command line is recovered without changing the losses" *
          doctest::test_suite("failure")) {
  const std::string common =
      "--data.name=digits --train.steps=20 --train.batch=64 --train.threads=2 --plan.dp=2 --plan.pp=2 "
      "--plan.micro-batches=2 ";
  auto clean = run(MLP_BINARY, common);
  auto faulty = run(MLP_BINARY, common + "--fault.inject-rank=2 --fault.inject-step=7 --fault.inject-task=2");
  REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
  REQUIRE_MESSAGE(faulty.exit_code == 0, faulty.err);
  CHECK(faulty.summary["restarts"] == 1);
  CHECK(faulty.summary["final_loss"] == clean.summary["final_loss"]);
}

TEST_CASE("--help explains the options and exits 0") {
  auto r = run(MLP_BINARY, "--help");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--data.name=STR") != std::string::npos);
  CHECK(r.out.find("--train.threads=INT") != std::string::npos);
  auto g = run(GPT_BINARY, "--help");
  CHECK(g.exit_code == 0);
  CHECK(g.out.find("--model.heads=INT") != std::string::npos);
}
