// The timeline of a run (--trace.file, --trace.steps): a Chrome trace whose events are the
// workers' real tasks — per rank and traced step, a forward and a backward per micro-batch
// and one gradient reduction, in the schedule's order, every data dependency across stages
// respected in time — merged from every process of a job with the clock offsets stated, and
// the run's events (plan changes, checkpoints) marked. Tracing changes no arithmetic: the
// losses equal the untraced run's bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::test::run;
using json = nlohmann::json;

namespace {

std::string temp_file(const std::string& name) { return cohort::test::temp_path("trace", name); }

json read_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "no trace file " << path);
  json j = json::parse(f, nullptr, false);
  REQUIRE_MESSAGE(!j.is_discarded(), path << " is not JSON");
  return j;
}

// The complete events of the workers' tasks (their waits, sends and hand-overs, and the run
// track left out).
std::vector<json> task_events(const json& trace) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && (e["cat"] == "compute" || e["name"] == "reduce gradients")) out.push_back(e);
  return out;
}

// Every event well-formed for the viewers: a phase, a process, a time; complete events a duration.
void check_format(const json& trace) {
  REQUIRE(trace.contains("traceEvents"));
  REQUIRE(trace["traceEvents"].is_array());
  CHECK(trace["displayTimeUnit"] == "ms");
  for (const auto& e : trace["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    if (e["ph"] == "M") continue;
    REQUIRE(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    if (e["ph"] == "X") CHECK(e["dur"].get<double>() >= 0);
  }
}

}  // namespace

TEST_CASE("trace of tp2 pp2 m2 in one process: every task of the traced steps, in schedule order") {
  const std::string model =
      "--data.name=digits --train.steps=6 --train.threads=1 --plan.tp=2 --plan.pp=2 "
      "--plan.micro-batches=2 --plan.schedule=1f1b";
  const std::string plain_metrics = temp_file("plain.jsonl"), traced_metrics = temp_file("traced.jsonl");
  REQUIRE(run(MLP_BINARY, model + " --metrics.file=" + plain_metrics).exit_code == 0);
  const std::string file = temp_file("tp2pp2.json");
  auto r = run(MLP_BINARY, model + " --trace.file=" + file + " --trace.steps=2:3 --metrics.file=" + traced_metrics);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  CHECK(cohort::test::metrics_losses(plain_metrics) == cohort::test::metrics_losses(traced_metrics));
  const json trace = read_json(file);
  check_format(trace);
  CHECK(trace["otherData"]["plan"] == "dp1 tp2 pp2 m2 1f1b");
  // per (rank, step): its tasks by start time
  std::map<std::pair<int, int>, std::vector<json>> by_rank_step;
  for (const auto& e : task_events(trace)) {
    CHECK(e["pid"] == 0);
    by_rank_step[{e["tid"].get<int>(), e["args"]["step"].get<int>()}].push_back(e);
  }
  std::set<int> steps;
  for (const auto& [k, v] : by_rank_step) steps.insert(k.second);
  CHECK(steps == std::set<int>{2, 3});  // only the asked-for steps
  REQUIRE(by_rank_step.size() == 8);    // 4 ranks x 2 steps
  for (auto& [k, events] : by_rank_step) {
    CAPTURE(k.first);
    CAPTURE(k.second);
    std::sort(events.begin(), events.end(), [](const json& a, const json& b) { return a["ts"] < b["ts"]; });
    std::vector<std::string> order;
    for (const auto& e : events)
      order.push_back(e["name"].get<std::string>() +
                      (e["args"].contains("micro_batch") ? std::to_string(e["args"]["micro_batch"].get<int>()) : ""));
    const int stage = events[0]["args"]["stage"].get<int>();
    // 1F1B on 2 stages with 2 micro-batches: stage 0 runs both forwards first (2 in flight),
    // the last stage alternates
    const std::vector<std::string> want =
        stage == 0 ? std::vector<std::string>{"forward0", "forward1", "backward0", "backward1", "reduce gradients"}
                   : std::vector<std::string>{"forward0", "backward0", "forward1", "backward1", "reduce gradients"};
    CHECK(order == want);
  }
  // the data dependencies, on one clock: stage 1's forward of a micro-batch starts after
  // stage 0's (same tp rank) finished its work (the send follows it), and stage 0's backward
  // after stage 1's
  auto find = [&](int rank, int step, const std::string& name, int mb) {
    for (const auto& e : by_rank_step[{rank, step}])
      if (e["name"] == name && e["args"].value("micro_batch", -1) == mb) return e;
    FAIL("no " << name << " " << mb << " on rank " << rank);
    return json();
  };
  for (int step : {2, 3})
    for (int tp = 0; tp < 2; ++tp)
      for (int mb = 0; mb < 2; ++mb) {
        const json f0 = find(tp, step, "forward", mb), f1 = find(2 + tp, step, "forward", mb);
        const json b0 = find(tp, step, "backward", mb), b1 = find(2 + tp, step, "backward", mb);
        CHECK(f1["ts"].get<double>() >= f0["ts"].get<double>() + f0["dur"].get<double>() - 1e-3);
        CHECK(b0["ts"].get<double>() >= b1["ts"].get<double>() + b1["dur"].get<double>() - 1e-3);
      }
  // the tracks are named by rank and place; the run track holds a span per traced step
  std::set<std::string> names;
  int step_spans = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X" && e["cat"] == "step") ++step_spans;
  }
  CHECK(names.count("rank 3 (dp 0, stage 1, tp 1)") == 1);
  CHECK(names.count("run") == 1);
  CHECK(step_spans == 2);
}

TEST_CASE("trace of dp2 pp2 over 2 processes: merged on process 0 with the clock offsets stated") {
  const std::string file = temp_file("two.json");
  auto r = run(MLP_BINARY,
               "--data.name=digits --train.steps=5 --train.threads=1 --plan.dp=2 --plan.pp=2 "
               "--plan.micro-batches=2 --launch.nproc=2 --trace.file=" +
                   file);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const json trace = read_json(file);
  check_format(trace);
  std::map<int, std::set<int>> ranks_of;  // process -> ranks
  std::set<int> steps;
  for (const auto& e : task_events(trace)) {
    ranks_of[e["pid"].get<int>()].insert(e["tid"].get<int>());
    steps.insert(e["args"]["step"].get<int>());
  }
  CHECK(ranks_of[0] == std::set<int>{0, 1});  // the job's blocks of ranks
  CHECK(ranks_of[1] == std::set<int>{2, 3});
  CHECK(steps == std::set<int>{1, 2, 3, 4, 5});  // no --trace.steps: every step
  const auto& other = trace["otherData"];
  CHECK(other["processes"] == 2);
  REQUIRE(other["clock_offsets_us"].size() == 2);
  REQUIRE(other["clock_residual_us"].size() == 2);
  const double offset = other["clock_offsets_us"][1].get<double>(),
               residual = other["clock_residual_us"][1].get<double>();
  MESSAGE("process 1's clock offset " << offset << " us, residual " << residual << " us");
  CHECK(residual >= 0);
  // both processes read one host's monotonic clock: the true offset is 0, inside the bracket
  CHECK(std::abs(offset) <= residual + 1e-3);
}

TEST_CASE("a traced run marks its plan changes and checkpoints") {
  const std::string file = temp_file("marks.json");
  const std::string dir = cohort::test::temp_path("trace", "ck");
  std::filesystem::remove_all(dir);
  const std::string to = temp_file("dp4.json");
  std::ofstream(to) << R"({"dp":4})"
                    << "\n";
  auto r = run(MLP_BINARY,
               "--data.name=digits --train.steps=6 --train.threads=1 --plan.dp=2 --plan.change-at=3 "
               "--plan.change-to=" +
                   to + " --checkpoint.dir=" + dir + " --checkpoint.every=2 --trace.file=" + file);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const json trace = read_json(file);
  check_format(trace);
  std::vector<json> marks;
  std::set<int> ranks;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "i") marks.push_back(e);
    if (e["ph"] == "X" && e["cat"] == "compute") ranks.insert(e["tid"].get<int>());
  }
  int changes = 0, checkpoints = 0;
  for (const auto& m : marks) {
    if (m["name"] == "plan change") {
      ++changes;
      CHECK(m["args"]["step"] == 3);
      CHECK(m["args"]["to"] == "dp4 tp1 pp1 m1");
    }
    if (m["name"] == "checkpoint") ++checkpoints;
  }
  CHECK(changes == 1);
  CHECK(checkpoints == 3);                    // after steps 2, 4 and 6
  CHECK(ranks == std::set<int>{0, 1, 2, 3});  // the new plan's ranks are traced too
  std::filesystem::remove_all(dir);
}

TEST_CASE("a resumed run traces its own first steps by default") {
  const std::string dir = cohort::test::temp_path("trace", "resume-ck");
  std::filesystem::remove_all(dir);
  const std::string job = "--data.name=digits --train.threads=1 --checkpoint.dir=" + dir;
  REQUIRE(run(MLP_BINARY, job + " --train.steps=100 --checkpoint.every=100").exit_code == 0);
  const std::string file = temp_file("resumed.json");
  auto r = run(MLP_BINARY, job + " --train.steps=102 --trace.file=" + file);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  std::set<int> steps;
  for (const auto& e : task_events(read_json(file))) steps.insert(e["args"]["step"].get<int>());
  CHECK(steps == std::set<int>{101, 102});  // the run's steps, past the default's first 100 of the job
  std::filesystem::remove_all(dir);
}

TEST_CASE("bad trace options: exit 2 naming the option") {
  for (const std::string bad :
       {"--trace.file=/tmp/x.json --trace.steps=3", "--trace.file=/tmp/x.json --trace.steps=0:2",
        "--trace.file=/tmp/x.json --trace.steps=4:2", "--trace.file=/tmp/x.json --trace.steps=a:b",
        "--trace.steps=1:2"}) {
    CAPTURE(bad);
    auto r = run(MLP_BINARY, "--data.name=digits --train.steps=2 " + bad);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--trace.steps") != std::string::npos);
  }
  auto r = run(MLP_BINARY, "--data.name=digits --train.steps=2 --plan.dp=2 --trace.file=/nonexistent/dir/t.json");
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--trace.file") != std::string::npos);
}
