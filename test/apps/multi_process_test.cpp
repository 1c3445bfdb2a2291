// Training across OS processes, as a user runs it: `--launch.nproc=N` starts N (2, 3, 4) processes of
// the app on loopback; every plan's losses (batches split evenly or not) equal the serial run's within the in-process
// equivalence suite's tolerance (1e-5 relative over 30 steps, test/actors/equivalence_test.cpp
// says why), and the trained model (gathered to process 0) scores as the serial one does. A
// process killed with SIGKILL or stopped with SIGSTOP mid-run ends the job with a non-zero
// exit code and a report naming the node, the step and the reason; no process is left
// behind. Bad process options fail with one line and exit code 2.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "run_app.hpp"

using cohort::test::run;

namespace {

std::vector<double> losses(const std::string& metrics_path) {
  std::vector<double> out;
  std::ifstream in(metrics_path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("cohort-mp-" + std::to_string(::getpid()) + "-" + name)).string();
}

// Processes whose command line contains `marker` (a leftover of a job).
int processes_with(const std::string& marker) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (cmd.find(marker) != std::string::npos && e.path().filename() != std::to_string(::getpid())) ++n;
  }
  return n;
}

struct case_ {
  const char* binary;
  const char* name;
  int processes;
  const char* plan;
};

}  // namespace

TEST_CASE("across 2 and 4 OS processes every plan's losses equal the serial run's") {
  const std::string mlp_model = "--data.name=digits --train.steps=30 --train.threads=1";
  const std::string gpt_model =
      "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 "
      "--train.steps=30 --train.threads=1";
  const case_ cases[] = {
      {MLP_BINARY, "dp2", 2, "--plan.dp=2"},
      {MLP_BINARY, "tp2", 2, "--plan.tp=2"},
      {MLP_BINARY, "pp2 gpipe", 2, "--plan.pp=2 --plan.micro-batches=4 --plan.schedule=gpipe"},
      {MLP_BINARY, "pp2 1f1b", 2, "--plan.pp=2 --plan.micro-batches=4 --plan.schedule=1f1b"},
      {MLP_BINARY, "dp2 sharded", 2, "--plan.dp=2 --plan.shard-params=true"},
      {MLP_BINARY, "dp2xtp2 (2 ranks per process)", 2, "--plan.dp=2 --plan.tp=2"},
      {MLP_BINARY, "dp2xpp2", 4, "--plan.dp=2 --plan.pp=2 --plan.micro-batches=2"},
      {MLP_BINARY, "tp2xpp2", 4, "--plan.tp=2 --plan.pp=2 --plan.micro-batches=2"},
      {MLP_BINARY, "dp4", 4, "--plan.dp=4"},
      {MLP_BINARY, "pp4", 4, "--plan.pp=4 --plan.micro-batches=4"},
      {MLP_BINARY, "tp3 (3 processes)", 3, "--plan.tp=3"},
      // batches that split unevenly: near-equal shares weighted by their rows
      {MLP_BINARY, "dp3 (128 rows: 43 43 42)", 3, "--plan.dp=3"},
      {MLP_BINARY, "pp3 m6 (128 rows: 22 22 21 21 21 21)", 3, "--plan.pp=3 --plan.micro-batches=6"},
      {GPT_BINARY, "gpt dp3 (8 rows: 3 3 2)", 3, "--plan.dp=3"},
      {MLP_BINARY, "dp2xtp2xpp2 (8 ranks, 4 processes)", 4,
       "--plan.dp=2 --plan.tp=2 --plan.pp=2 --plan.micro-batches=2"},
      {GPT_BINARY, "gpt dp2", 2, "--plan.dp=2"},
      {GPT_BINARY, "gpt tp2", 2, "--plan.tp=2"},
      {GPT_BINARY, "gpt pp2", 2, "--plan.pp=2 --plan.micro-batches=2"},
      {GPT_BINARY, "gpt dp2xtp2", 4, "--plan.dp=2 --plan.tp=2"},
      // the UCX data plane (shared memory between processes on this host)
      {MLP_BINARY, "ucx dp2", 2, "--plan.dp=2 --dist.transport=ucx"},
      {MLP_BINARY, "ucx dp2xpp2", 4, "--plan.dp=2 --plan.pp=2 --plan.micro-batches=2 --dist.transport=ucx"},
      {GPT_BINARY, "gpt ucx tp2", 2, "--plan.tp=2 --dist.transport=ucx"},
  };
  std::map<std::string, std::pair<std::vector<double>, nlohmann::json>> serial;
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string model = std::string(c.binary) == MLP_BINARY ? mlp_model : gpt_model;
    if (!serial.count(c.binary)) {
      const auto path = temp_file("serial.jsonl");
      auto r = run(c.binary, model + " --plan.mode=serial --metrics.file=" + path);
      REQUIRE(r.exit_code == 0);
      serial[c.binary] = {losses(path), r.summary};
      std::filesystem::remove(path);
    }
    const auto path = temp_file("job.jsonl");
    auto r = run(c.binary,
                 model + " " + c.plan + " --launch.nproc=" + std::to_string(c.processes) + " --metrics.file=" + path);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.summary["plan"]["processes"] == c.processes);
    // the coordinator refits the cost model from every process's task times and reports it
    const auto& prediction = r.summary["prediction"];
    CHECK(prediction["measured_step_s"].get<double>() > 0);
    CHECK(prediction["refit"]["compute_factor"].get<double>() > 0);
    CHECK(prediction["note"].get<std::string>().find("not saved") != std::string::npos);
    const auto& [want, serial_summary] = serial[c.binary];
    auto got = losses(path);
    std::filesystem::remove(path);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
    CAPTURE(worst);
    CHECK(worst <= 1e-5);
    if (serial_summary.contains("test_accuracy"))  // the model gathered from every process
      CHECK(std::abs(r.summary["test_accuracy"].get<double>() - serial_summary["test_accuracy"].get<double>()) < 0.01);
  }
}

namespace {

// A dp2 job of 2 processes in which process `rank` raises `fault` after step `step` (plus
// `extra` options): its stderr and exit code, and the processes it left behind (none expected).
struct failed_job {
  cohort::test::run_result r;
  int leftovers = 0;
};

failed_job run_with_fault(const std::string& fault, int rank, int step, const std::string& extra = "") {
  const std::string marker = temp_file("fault-" + fault + std::to_string(rank) + ".jsonl");
  failed_job j;
  j.r = run(MLP_BINARY, "--data.name=digits --train.steps=500 --train.threads=1 --plan.dp=2 --launch.nproc=2 " + extra +
                            " --fault.signal=" + fault + " --fault.signal-rank=" + std::to_string(rank) +
                            " --fault.signal-step=" + std::to_string(step) + " --metrics.file=" + marker);
  j.leftovers = processes_with(marker);
  std::filesystem::remove(marker);
  return j;
}

bool says(const failed_job& j, const std::string& text) { return j.r.err.find(text) != std::string::npos; }

// A node killed right after step 5 committed: the coordinator names step 6 when it had started
// it before the closed connection was seen, else step 5 (both are the step in flight then).
bool names_step_5_or_6(const failed_job& j, const std::string& reason) {
  return says(j, ") at step 6: " + reason) || says(j, ") at step 5: " + reason);
}

}  // namespace

TEST_CASE("a node killed with SIGKILL mid-run ends the job with a report of the node and the step and the reason" *
          doctest::test_suite("failure")) {
  auto j = run_with_fault("KILL", 1, 5);
  INFO(j.r.err);
  CHECK(j.r.exit_code != 0);
  CHECK(says(j, "mlp: error: lost node 1 (pid "));
  CHECK(names_step_5_or_6(j, "connection closed without a goodbye"));
  CHECK(says(j, "launch: process 1 (pid "));
  CHECK(says(j, "was killed by SIGKILL"));
  CHECK(j.leftovers == 0);
}

TEST_CASE("over UCX too a node killed with SIGKILL ends the job with the report" * doctest::test_suite("failure")) {
  auto j = run_with_fault("KILL", 1, 5, "--dist.transport=ucx");
  INFO(j.r.err);
  CHECK(j.r.exit_code != 0);
  CHECK(names_step_5_or_6(j, "connection closed without a goodbye"));
  CHECK(j.leftovers == 0);
}

TEST_CASE("a node stopped with SIGSTOP is lost at the heartbeat timeout and the job ends with nothing left behind" *
          doctest::test_suite("failure")) {
  auto j = run_with_fault("STOP", 1, 5, "--dist.heartbeat-ms=200 --dist.heartbeat-timeout-ms=1500");
  INFO(j.r.err);
  CHECK(j.r.exit_code != 0);
  CHECK(says(j, "mlp: error: lost node 1 (pid "));
  CHECK(says(j, ") at step 6: no heartbeat for 1500 ms"));
  CHECK(j.leftovers == 0);
}

TEST_CASE("the coordinator killed mid-run: the node reports it and the job ends" * doctest::test_suite("failure")) {
  auto j = run_with_fault("KILL", 0, 3);
  INFO(j.r.err);
  CHECK(j.r.exit_code != 0);
  CHECK(says(j, "lost the coordinator (process 0, pid "));
  CHECK(j.leftovers == 0);
}

TEST_CASE("bad process options: one line and exit code 2") {
  auto join = run(MLP_BINARY, "--join=nohost --dist.world=2");
  CHECK(join.exit_code == 2);
  CHECK(join.err.find("--join must be HOST:PORT") != std::string::npos);
  auto rank = run(MLP_BINARY, "--dist.world=2");
  CHECK(rank.exit_code == 2);
  CHECK(rank.err.find("needs RANK") != std::string::npos);
  auto open = run(MLP_BINARY, "--dist.world=2 --dist.rank=0 --dist.bind=0.0.0.0 --train.steps=1");
  CHECK(open.exit_code == 2);
  CHECK(open.err.find("set a job secret first") != std::string::npos);
}
