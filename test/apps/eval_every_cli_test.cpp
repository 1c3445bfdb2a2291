// --eval.every on the actor runtime: between steps the committed parameters are gathered where
// the model is (process 0) and evaluated there, as the serial trainer does between its steps.
// The figures are exact: the same after every N steps on the serial trainer, dp2 in one
// process and dp2 over 2 processes (the arithmetic is the same), equal to the final figures of a
// run that stops at that step, and the last equal to the summary's.
#include <doctest/doctest.h>

#include <filesystem>

#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

const std::string job = "--data.name=digits --train.steps=30 --train.threads=1 --eval.every=10";

std::vector<nlohmann::json> evaluations(const std::string& metrics) {
  std::vector<nlohmann::json> out;
  for (const auto& e : cohort::test::metrics_events(metrics))
    if (e["event"] == "evaluation") out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("--eval.every on the runtime evaluates the committed parameters between steps, in and across processes") {
  const std::string serial_metrics = cohort::test::temp_path("eval", "serial.jsonl");
  auto serial = run(MLP_BINARY, job + " --plan.mode=serial --metrics.file=" + serial_metrics);
  REQUIRE_MESSAGE(serial.exit_code == 0, serial.err);
  const auto reference = evaluations(serial_metrics);
  REQUIRE(reference.size() == 3);
  auto ten = run(MLP_BINARY, "--data.name=digits --train.steps=10 --train.threads=1 --plan.dp=2");
  REQUIRE_MESSAGE(ten.exit_code == 0, ten.err);
  for (const std::string plan : {" --plan.dp=2", " --plan.dp=2 --launch.nproc=2", " --plan.pp=2 --launch.nproc=2"}) {
    CAPTURE(plan);
    const std::string metrics = cohort::test::temp_path("eval", "runtime.jsonl");
    auto r = run(MLP_BINARY, job + plan + " --metrics.file=" + metrics);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto e = evaluations(metrics);
    REQUIRE(e.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(e[i]["step"] == 10 * (i + 1));
      CHECK(e[i]["samples"] == reference[i]["samples"]);
    }
    CHECK(e[2]["test_accuracy"] == r.summary["test_accuracy"]);  // the last is the final model
    CHECK(r.err.find("mlp: after step 20: test_accuracy") != std::string::npos);
    if (plan.find("dp=2") != std::string::npos) {  // dp2's arithmetic is the serial trainer's here
      for (std::size_t i = 0; i < 3; ++i) CHECK(e[i]["test_accuracy"] == reference[i]["test_accuracy"]);
      CHECK(e[0]["test_accuracy"] == ten.summary["test_accuracy"]);  // a run that stops at step 10
    }
    // the training is not changed by the evaluations: the same losses as without them
    const std::string plain_metrics = cohort::test::temp_path("eval", "plain.jsonl");
    auto plain = run(MLP_BINARY, "--data.name=digits --train.steps=30 --train.threads=1" + plan +
                                     " --metrics.file=" + plain_metrics);
    REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(plain_metrics));
  }
}

TEST_CASE("--eval.every is refused in async mode, where reading the tables would apply waiting entries early") {
  auto r = run(DLRM_BINARY, "--data.name=movielens --train.steps=4 --eval.every=2 --plan.dp=2 --exec.mode=async");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--eval.every reads the parameters between steps") != std::string::npos);
}
