// Checkpoints as a user runs them: --checkpoint.dir/--checkpoint.every write, a resumed run
// continues the uninterrupted run's losses — bit for bit under the same plan, within the
// equivalence tolerance (1e-5 relative) under another plan or process count (a checkpoint of
// dp2 sharded over 2 processes resumed as tp2 pp2 in one process and as dp4 over 4) — and an
// export is a plain safetensors file that a 30-line Python reader loads and that --init.from
// evaluates to the exporting run's test accuracy exactly.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "actors/safetensors.hpp"
#include "run_app.hpp"
#include "support/run_files.hpp"

using cohort::test::run;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) { return cohort::test::temp_path("ckcli", name); }
std::string fresh_dir(const std::string& name) { return cohort::test::fresh_dir("ckcli", name); }

std::vector<double> tail(const std::vector<double>& v, std::size_t from) { return {v.begin() + from, v.end()}; }

const std::string mlp_job =
    "--data.name=digits --train.steps=20 --train.threads=1 --train.optimizer=adamw --train.lr=0.01";

}  // namespace

TEST_CASE("a resumed mlp run continues the uninterrupted run bit for bit under the same plan") {
  for (const std::string where : {"", " --launch.nproc=2"}) {
    CAPTURE(where);
    const std::string dir = fresh_dir("same"), full = temp_path("same-full.jsonl"), resumed = temp_path("same-r.jsonl");
    const std::string plan = " --plan.dp=2 --plan.shard-params=true" + where;
    auto a =
        run(MLP_BINARY, mlp_job + plan + " --checkpoint.dir=" + dir + " --checkpoint.every=10 --metrics.file=" + full);
    REQUIRE_MESSAGE(a.exit_code == 0, a.err);
    const auto& written = a.summary["checkpoints"];
    REQUIRE(written.size() == 2);
    CHECK(written[0]["step"] == 10);
    CHECK(written[1]["path"] == dir + "/step-000020");
    CHECK(fs::exists(dir + "/step-000010/manifest.json"));
    CHECK(fs::exists(dir + "/step-000010/process-00000.safetensors"));
    CHECK(fs::exists(dir + "/step-000010/process-00001.safetensors") == !where.empty());  // one file per process
    auto b = run(MLP_BINARY, mlp_job + plan + " --checkpoint.resume=" + dir + "/step-000010 --metrics.file=" + resumed);
    REQUIRE_MESSAGE(b.exit_code == 0, b.err);
    CHECK(b.summary["resumed_from"]["step"] == 10);
    CHECK(b.err.find("resuming from " + dir + "/step-000010 after step 10") != std::string::npos);
    const auto rest = cohort::test::metrics_losses(resumed);
    REQUIRE(rest.size() == 10);
    CHECK(rest == tail(cohort::test::metrics_losses(full), 10));  // bit for bit
    CHECK(b.summary["final_loss"] == a.summary["final_loss"]);
    CHECK(b.summary["test_accuracy"] == a.summary["test_accuracy"]);
  }
}

TEST_CASE("a checkpoint of 2 processes resumes under other plans and process counts with the same losses") {
  const std::string dir = fresh_dir("layouts"), full = temp_path("layouts-full.jsonl");
  auto a = run(MLP_BINARY, mlp_job + " --plan.dp=2 --plan.shard-params=true --launch.nproc=2 --checkpoint.dir=" + dir +
                               " --checkpoint.every=10 --metrics.file=" + full);
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  const auto expected = tail(cohort::test::metrics_losses(full), 10);
  for (const std::string plan :
       {" --plan.tp=2 --plan.pp=2 --plan.micro-batches=4", " --plan.dp=4 --launch.nproc=4", " --plan.mode=auto"}) {
    CAPTURE(plan);
    const std::string resumed = temp_path("layouts-r.jsonl");
    auto b = run(MLP_BINARY, mlp_job + plan + " --checkpoint.dir=" + dir + " --checkpoint.resume=" + dir +
                                 "/step-000010 --metrics.file=" + resumed);
    REQUIRE_MESSAGE(b.exit_code == 0, b.err);
    const double worst = cohort::test::worst_relative(cohort::test::metrics_losses(resumed), expected);
    MESSAGE("resumed under" << plan << ": max relative loss difference " << worst);
    CHECK(worst <= 1e-5);
  }
}

TEST_CASE("gpt resumed from dp2 over 2 processes as pp2 1f1b m4 in one: the same losses") {
  const std::string job =
      "--model.layers=2 --model.d=32 --model.heads=2 --model.seq=16 --train.batch=8 --train.steps=16 "
      "--train.threads=1 --train.optimizer=adamw --train.lr=0.003";
  const std::string dir = fresh_dir("gpt"), full = temp_path("gpt-full.jsonl"), resumed = temp_path("gpt-r.jsonl");
  auto a = run(GPT_BINARY, job + " --plan.dp=2 --launch.nproc=2 --checkpoint.dir=" + dir +
                               " --checkpoint.every=8 --metrics.file=" + full);
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  auto b = run(GPT_BINARY, job + " --plan.pp=2 --plan.micro-batches=4 --plan.schedule=1f1b --checkpoint.dir=" + dir +
                               " --checkpoint.resume=" + dir + "/step-000008 --metrics.file=" + resumed);
  REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  const double worst =
      cohort::test::worst_relative(cohort::test::metrics_losses(resumed), tail(cohort::test::metrics_losses(full), 8));
  MESSAGE("gpt dp2 x2 processes -> pp2 1f1b m4: max relative loss difference " << worst);
  CHECK(worst <= 1e-5);
}

TEST_CASE("resume=auto continues from the newest checkpoint, and a run that finished has nothing left") {
  const std::string dir = fresh_dir("auto"), full = temp_path("auto-full.jsonl"), resumed = temp_path("auto-r.jsonl");
  auto a = run(MLP_BINARY, "--data.name=digits --train.steps=15 --train.threads=1 --plan.dp=2 --checkpoint.dir=" + dir +
                               " --checkpoint.every=5 --checkpoint.keep=2 --metrics.file=" + full);
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  CHECK(!fs::exists(dir + "/step-000005"));  // keep 2
  CHECK(fs::exists(dir + "/step-000010"));
  auto again =
      run(MLP_BINARY, "--data.name=digits --train.steps=15 --train.threads=1 --plan.dp=2 --checkpoint.dir=" + dir +
                          " --checkpoint.every=5");
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("step-000015 has done 15 steps, --train.steps is 15: nothing left to train") !=
        std::string::npos);
  auto longer =
      run(MLP_BINARY, "--data.name=digits --train.steps=20 --train.threads=1 --plan.dp=2 --checkpoint.dir=" + dir +
                          " --checkpoint.every=5 --metrics.file=" + resumed);
  REQUIRE_MESSAGE(longer.exit_code == 0, longer.err);
  CHECK(longer.summary["resumed_from"]["step"] == 15);
  CHECK(cohort::test::metrics_losses(resumed).size() == 5);
  CHECK(longer.summary["checkpoints"].size() == 1);  // step 20 (15 is where it started)
}

TEST_CASE("an export is plain safetensors that Python reads and that init.from evaluates exactly") {
  const std::string exported = temp_path("export.safetensors");
  auto a = run(MLP_BINARY, mlp_job + " --plan.tp=2 --checkpoint.export=" + exported);
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  CHECK(a.summary["exported"] == exported);
  auto file = cohort::actors::safetensors::read_file(exported);
  REQUIRE_MESSAGE(file.ok(), file.error().message);
  CHECK(file->size() == 6);  // fc1..fc3 weight and bias, whole
  CHECK(file->at("fc1.weight").shape() == cohort::shape({64, 128}));
  // a reader that knows only the format: json + struct (what a 30-line numpy reader does)
  const std::string script = temp_path("read.py");
  std::ofstream(script) << R"(import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
out = {}
for name, t in header.items():
    if name == "__metadata__":
        continue
    begin, end = t["data_offsets"]
    count = (end - begin) // 4
    values = struct.unpack("<%df" % count, data[8 + n + begin:8 + n + end])
    out[name] = {"shape": t["shape"], "dtype": t["dtype"], "sum": sum(values)}
print(json.dumps(out))
)";
  auto py = run("/usr/bin/python3", script + " " + exported);
  REQUIRE_MESSAGE(py.exit_code == 0, py.err);
  for (const auto& [name, t] : *file) {
    CAPTURE(name);
    const auto& p = py.summary[name];
    CHECK(p["dtype"] == "F32");
    CHECK(p["shape"] == nlohmann::json(t.shape().dims()));
    double sum = 0;
    for (float v : t.to_vector()) sum += v;
    CHECK(p["sum"].get<double>() == doctest::Approx(sum).epsilon(1e-5));
  }
  auto b = run(MLP_BINARY, "--data.name=digits --train.steps=0 --init.from=" + exported);
  REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  CHECK(b.summary["evaluated"] == exported);
  CHECK(b.summary["test_accuracy"] == a.summary["test_accuracy"]);
  auto only = run(MLP_BINARY, "--data.name=digits --eval.only=true --init.from=" + exported);
  REQUIRE_MESSAGE(only.exit_code == 0, only.err);
  CHECK(only.summary["test_accuracy"] == a.summary["test_accuracy"]);
  // fine-tuning: a run that starts from the export under another plan begins at its loss
  auto c = run(MLP_BINARY, "--data.name=digits --train.steps=3 --train.threads=1 --plan.dp=2 --init.from=" + exported);
  REQUIRE_MESSAGE(c.exit_code == 0, c.err);
  MESSAGE("exporting run: loss " << a.summary["first_loss"] << " -> " << a.summary["final_loss"]
                                 << ", the run started from its export: " << c.summary["first_loss"]);
  CHECK(c.summary["first_loss"].get<double>() < a.summary["first_loss"].get<double>() / 2);
}
