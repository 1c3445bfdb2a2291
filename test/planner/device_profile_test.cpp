// Device profiles and the efficiency policy: the GEMM table against hand-computed values, the
// profile files' validation, efficiencies above 1 refused (loading, saving, refitting), and a
// cluster planned with its devices' profile, never with this machine's refit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "planner/device_profile.hpp"
#include "planner/machine_profile.hpp"
#include "planner/plan_choice.hpp"
#include "planner/refit.hpp"
#include "planner/run_refit.hpp"
#include "toy_models.hpp"

using namespace cohort;
using namespace cohort::planner;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("cohort-" + std::to_string(::getpid()) + "-" + name);
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

const char* a_profile = R"({"cohort_device_profile": 1, "model": "X1", "sources": ["made up for the test"],
  "efficiency": {"gemm_by_flops": [[1e9, 0.2], [1e11, 0.8]], "memory": 0.8, "link": 0.75,
                 "per_op_seconds": 3e-6}})";

}  // namespace

TEST_CASE("the GEMM efficiency table: log-linear in the FLOPs between points, the end values beyond") {
  efficiency e;
  e.gemm = 0.6;
  CHECK(e.gemm_at(1e10) == 0.6);  // no table: one efficiency for every size
  e.gemm_by_flops = {{1e9, 0.2}, {1e11, 0.8}, {1e12, 0.9}};
  CHECK(e.gemm_at(1e8) == 0.2);
  CHECK(e.gemm_at(1e9) == 0.2);
  CHECK(e.gemm_at(1e10) == doctest::Approx(0.5));  // halfway in log(FLOPs) between 1e9 and 1e11
  CHECK(e.gemm_at(1e11) == doctest::Approx(0.8));
  CHECK(e.gemm_at(std::sqrt(1e11 * 1e12)) == doctest::Approx(0.85));
  CHECK(e.gemm_at(1e15) == 0.9);
  CHECK(e.gemm_at(0) == 0.6);  // unknown size: the single value
}

TEST_CASE("a GEMM's time uses the table's efficiency at its own size") {
  efficiency e = efficiency{}.without_runtime_overhead();
  e.per_op_seconds = 0;
  e.gemm_by_flops = {{1e9, 0.25}, {1e11, 1.0}};
  device_speed gpu{.flops_per_s = 100e12, .memory_bytes_per_s = 2e12};
  // 1e10 FLOPs at efficiency 0.625 (log-halfway), bytes far below the arithmetic: 1e10 / (100e12 x 0.625)
  CHECK(compute_seconds({1e10, 1e6, true}, gpu, e) == doctest::Approx(1e10 / (100e12 * 0.625)));
  // the same FLOPs split over tp 4 is a smaller GEMM: lower efficiency, so more than a quarter of the time
  const double whole = compute_seconds({1e10, 1e6, true}, gpu, e),
               quarter = compute_seconds({2.5e9, 2.5e5, true}, gpu, e);
  CHECK(quarter > whole / 4 * 1.2);
  // not a GEMM: the bytes at the achieved bandwidth, the table plays no part
  CHECK(compute_seconds({1e10, 1e9, false}, gpu, e) == doctest::Approx(1e9 / (2e12 * e.memory)));
}

TEST_CASE("an efficiency above 1, not positive, or a table out of order is named as a problem") {
  efficiency e;
  CHECK(efficiency_problem(e).empty());
  e.gemm = 1.79;
  CHECK(efficiency_problem(e) ==
        "efficiency.gemm is 1.79, above 1: a fraction of the peak cannot exceed it (the peak was never measured)");
  e = {};
  e.link = 0;
  CHECK(efficiency_problem(e) == "efficiency.link is 0: an efficiency must be positive");
  e = {};
  e.gemm_by_flops = {{1e9, 0.5}, {1e9, 0.6}};
  CHECK(efficiency_problem(e) == "efficiency.gemm_by_flops[1]: the FLOPs must ascend");
  e.gemm_by_flops = {{1e9, 0.5}, {1e10, 1.2}};
  CHECK(efficiency_problem(e).rfind("efficiency.gemm_by_flops[1] is 1.2, above 1", 0) == 0);
}

TEST_CASE("a device profile file: read, and every kind of bad one refused naming the file and the field") {
  auto ok = parse_device_profile(a_profile, "x1.json");
  REQUIRE(ok.ok());
  CHECK(ok->model == "X1");
  CHECK(ok->eff.gemm_by_flops.size() == 2);
  CHECK(ok->eff.gemm == 0.8);  // a size-less GEMM: the table's largest
  CHECK(ok->eff.memory == 0.8);
  CHECK(ok->eff.link == 0.75);
  CHECK(ok->eff.per_op_seconds == 3e-6);
  CHECK(ok->eff.per_task_seconds == 0);  // this machine's runtime terms never apply to other devices
  CHECK(ok->sources == std::vector<std::string>{"made up for the test"});
  auto error = [](const std::string& text) {
    auto r = parse_device_profile(text, "x1.json");
    return r ? std::string("accepted") : r.error().message;
  };
  CHECK(error("[1]") == "x1.json: not a JSON object");
  CHECK(error(R"({"model": "X"})") == "x1.json: not a cohort device profile (no \"cohort_device_profile\": 1)");
  CHECK(error(R"({"cohort_device_profile": 1, "efficiency": {}})") ==
        "x1.json: model: expected the device model's name");
  CHECK(error(R"({"cohort_device_profile": 1, "model": "X", "speed": 2})") == "x1.json: unknown key 'speed'");
  CHECK(error(R"({"cohort_device_profile": 1, "model": "X", "efficiency": {"memory": 0.8, "link": 0.8}})") ==
        "x1.json: efficiency.per_op_seconds: missing");
  CHECK(error(R"({"cohort_device_profile": 1, "model": "X",
                  "efficiency": {"memory": 0.8, "link": 0.8, "per_op_seconds": 0}})") ==
        "x1.json: efficiency: needs gemm_by_flops (or one gemm efficiency for every size)");
  CHECK(error(R"({"cohort_device_profile": 1, "model": "X",
                  "efficiency": {"gemm": 1.79, "memory": 0.8, "link": 0.8, "per_op_seconds": 0}})")
            .rfind("x1.json: efficiency.gemm is 1.79, above 1", 0) == 0);
  CHECK(error(R"({"cohort_device_profile": 1, "model": "X",
                  "efficiency": {"gemm_by_flops": [[1e9]], "memory": 0.8, "link": 0.8, "per_op_seconds": 0}})") ==
        "x1.json: efficiency.gemm_by_flops[0]: expected [flops, efficiency]");
  CHECK(error(R"({"cohort_device_profile": 1, "model": "X",
                  "efficiency": {"gemm": 0.5, "memory": "fast", "link": 0.8, "per_op_seconds": 0}})") ==
        "x1.json: efficiency.memory: expected a non-negative number");
  CHECK(load_device_profile("/nonexistent/x.json").error().code == errc::not_found);
}

TEST_CASE("every device profile in configs/devices reads, every efficiency positive and at most 1") {
  int seen = 0;
  for (const auto& f : fs::directory_iterator(fs::path(COHORT_SOURCE_DIR) / "configs/devices")) {
    if (f.path().extension() != ".json") continue;
    auto p = load_device_profile(f.path().string());
    CHECK_MESSAGE(p.ok(), std::string(f.path().string() + ": " + (p ? std::string() : p.error().message)));
    if (p) CHECK(!p->sources.empty());  // every figure says where it comes from
    ++seen;
  }
  CHECK(seen >= 2);
}

TEST_CASE("a machine profile whose efficiency is above 1 is refused when read and never written") {
  const auto path = scratch("over-one-profile.json");
  machine_profile p;
  p.eff.gemm = 1.79;
  auto saved = save_profile(path.string(), p);
  REQUIRE(!saved);
  CHECK(saved.error().message.find("efficiency.gemm is 1.79, above 1") != std::string::npos);
  CHECK(!fs::exists(path));
  write(path, R"({"cohort_profile": 1, "cores": 2, "flops_f32_per_core": 5e10, "memory_bandwidth_bytes_per_s": 1e10,
    "refits": 3, "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
    "efficiency": {"gemm": 927.9, "memory": 0.5, "link": 0.8, "per_op_seconds": 2e-6}})");
  auto loaded = load_profile(path.string());
  REQUIRE(!loaded);
  CHECK(loaded.error().message == path.string() +
                                      ": profile.efficiency.gemm is 927.9, above 1: a fraction of the peak cannot "
                                      "exceed it (the peak was never measured); --cluster.calibrate measures this "
                                      "machine again and rewrites the file");
  fs::remove(path);
}

TEST_CASE("a refit whose efficiency would exceed 1 is refused and the profile keeps what it had") {
  const auto path = scratch("refit-refused-profile.json");
  fs::remove(path);
  plan_request request;
  request.mode = plan_mode::manual;
  machine_profile profile;
  profile.eff.gemm = 0.9;  // the runs below are 4x faster than predicted: 0.9 x 4 > 1
  auto prepared = prepare_planning(
      [](graph& g, std::int64_t rows) {
        return test::toy_mlp(g, {64, 64, 10}, rows);
      },
      0, 64, 1, request, profile, path.string());
  REQUIRE(prepared.ok());
  auto setup = std::make_shared<planning_setup>(std::move(*prepared));
  auto choice = choose_plan(*setup, request);
  REQUIRE(choice.ok());
  const auto& predicted = choice->predicted->stages[0];
  task_totals t;
  for (int i = 0; i < 4; ++i)
    t.add_step({{predicted.forward_s / 4, predicted.backward_s / 4, predicted.update_s}},
               choice->predicted->step_s / 4);
  auto out = compare_and_refit(*choice, *setup, /*save=*/true, t, /*first=*/true);
  REQUIRE(out.contains("refit"));
  CHECK(out["refit"]["compute_factor"].get<double>() == doctest::Approx(0.25));
  CHECK(out["refit"]["refused"].get<std::string>().rfind("efficiency.gemm is 3.6, above 1", 0) == 0);
  CHECK(!out.contains("profile"));
  CHECK(!fs::exists(path));  // nothing saved
  CHECK(setup->profile.eff.gemm == 0.9);
  CHECK(setup->profile.refits == 0);
  CHECK(setup->refit_refusal_reported);  // the warning was printed, and a second refusal prints none
  auto again = compare_and_refit(*choice, *setup, true, t, false);
  CHECK(again["refit"].contains("refused"));
}

TEST_CASE("a cluster is planned with its devices' profile: this machine's refit changes nothing there") {
  const auto dir = scratch("cluster-dir");
  fs::create_directories(dir / "devices");
  write(dir / "devices" / "x1.json", a_profile);
  write(dir / "cluster.json", R"({"cohort_cluster": 1, "machines": [{"hostname": "m", "count": 2, "devices": [
    {"kind": "gpu", "model": "X1", "count": 4, "tflops": {"f32": 20, "f16": 300}, "memory_gb": 80,
     "memory_bandwidth_gb_per_s": 2000, "profile": "devices/x1.json"}]}]})");
  auto model = [](graph& g, std::int64_t rows) { return test::toy_mlp(g, {1024, 4096, 1024, 10}, rows); };
  plan_request request;
  request.cluster_file = (dir / "cluster.json").string();
  auto plan_with = [&](const machine_profile& local) {
    auto s = prepare_planning(model, 2, 256, 1, request, local, "");
    REQUIRE(s.ok());
    CHECK(s->devices_profile.model == "X1");
    CHECK(s->devices_profile.source == (dir / "devices" / "x1.json").lexically_normal().string());
    CHECK(s->search.eff.gemm_by_flops.size() == 2);
    auto c = choose_plan(*s, request);
    REQUIRE(c.ok());
    return c->predicted->step_s;
  };
  machine_profile fresh, refit;
  refit.eff.gemm = 0.99, refit.eff.memory = 0.98, refit.eff.per_op_seconds = 1e-3, refit.eff.per_step_seconds = 1;
  CHECK(plan_with(fresh) == plan_with(refit));
  // an explicit --cluster.device-profile wins over the file's; none at all: the uncalibrated defaults, said so
  write(dir / "slow.json", R"({"cohort_device_profile": 1, "model": "X1-slow",
    "efficiency": {"gemm": 0.1, "memory": 0.1, "link": 0.1, "per_op_seconds": 1e-5}})");
  request.device_profile = (dir / "slow.json").string();
  auto slow = prepare_planning(model, 2, 256, 1, request, fresh, "");
  REQUIRE(slow.ok());
  CHECK(slow->devices_profile.model == "X1-slow");
  request.device_profile = (dir / "missing.json").string();
  auto missing = prepare_planning(model, 2, 256, 1, request, fresh, "");
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == errc::not_found);
  request.device_profile.clear();
  write(dir / "bare.json", R"({"cohort_cluster": 1, "machines": [{"hostname": "m", "devices": [
    {"kind": "gpu", "model": "X2", "count": 2, "tflops": {"f32": 20}, "memory_gb": 80,
     "memory_bandwidth_gb_per_s": 2000}]}]})");
  request.cluster_file = (dir / "bare.json").string();
  auto bare = prepare_planning(model, 2, 256, 1, request, refit, "");
  REQUIRE(bare.ok());
  CHECK(bare->devices_profile.source == "uncalibrated defaults: no device profile for X2");
  CHECK(bare->search.eff.gemm == efficiency{}.gemm);  // not the local refit's 0.99
  CHECK(bare->search.eff.per_step_seconds == 0);
  fs::remove_all(dir);
}

TEST_CASE("a re-plan on this machine prices its devices with the threads it is given") {
  // what the planner actor asks after a loss or before a join: the same plan, fewer or more threads
  auto model = [](graph& g, std::int64_t rows) { return test::toy_mlp(g, {256, 512, 512, 10}, rows); };
  plan_request manual;
  manual.mode = plan_mode::manual;
  manual.dp = 4;
  machine_profile eight;
  eight.cores = 8;
  auto s = prepare_planning(model, 2, 256, 2, manual, eight, "");
  REQUIRE(s.ok());
  auto on = [&](int threads) {
    auto c = choose_plan_for(*s, manual, 4, threads);
    REQUIRE(c.ok());
    return c->predicted->step_s;
  };
  CHECK(on(4) < on(2));      // 4 ranks on 4 cores, not sharing 2
  CHECK(on(8) < on(4));      // two kernel threads per rank
  CHECK(on(0) == on(2));     // 0: the setup's threads
  plan_request free_choice;  // auto: its choice for 4 devices sees the same threads
  auto two = choose_plan_for(*s, free_choice, 4, 2), four = choose_plan_for(*s, free_choice, 4, 4);
  REQUIRE(two.ok());
  REQUIRE(four.ok());
  CHECK(four->predicted->step_s < two->predicted->step_s);
}

TEST_CASE("a machine profile keeps the embedding path's rates, and a negative one is refused naming the field") {
  const auto path = scratch("embedding-rates-profile.json");
  machine_profile p;
  p.lookup_bytes_per_s = 1.25e9;
  p.sparse_update_bytes_per_s = 0.75e9;
  REQUIRE(save_profile(path.string(), p));
  auto loaded = load_profile(path.string());
  REQUIRE(loaded.ok());
  CHECK(loaded->lookup_bytes_per_s == 1.25e9);
  CHECK(loaded->sparse_update_bytes_per_s == 0.75e9);
  CHECK(describe(*loaded).find("lookup 1.25 GB/s, sparse update 0.75 GB/s") != std::string::npos);
  write(path, R"({"cohort_profile": 1, "cores": 2, "flops_f32_per_core": 5e10, "memory_bandwidth_bytes_per_s": 1e10,
    "refits": 0, "lookup_bytes_per_s": -1, "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
    "efficiency": {"gemm": 0.9, "memory": 0.5, "link": 0.8, "per_op_seconds": 2e-6}})");
  auto bad = load_profile(path.string());
  REQUIRE(!bad);
  CHECK(bad.error().message == path.string() + ": profile.lookup_bytes_per_s: expected a non-negative number");
  fs::remove(path);
}

TEST_CASE("a machine profile keeps the embedding rates by table size, and sizes that do not ascend are refused") {
  const auto path = scratch("table-rates-profile.json");
  machine_profile p;
  p.table_rates = {{262144, 14e9, 12e9}, {67108864, 6.5e9, 2.25e9}};
  REQUIRE(save_profile(path.string(), p));
  auto loaded = load_profile(path.string());
  REQUIRE(loaded.ok());
  REQUIRE(loaded->table_rates.size() == 2);
  CHECK(loaded->table_rates[1].table_bytes == 67108864);
  CHECK(loaded->table_rates[1].lookup_bytes_per_s == 6.5e9);
  CHECK(loaded->table_rates[0].update_bytes_per_s == 12e9);
  CHECK(describe(*loaded).find("(by table size, lookup/update: 0.262 MB 14.00/12.00, 67.1 MB 6.50/2.25)") !=
        std::string::npos);
  const std::string head = R"({"cohort_profile": 1, "cores": 2, "flops_f32_per_core": 5e10,
    "memory_bandwidth_bytes_per_s": 1e10, "refits": 0, "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
    "efficiency": {"gemm": 0.9, "memory": 0.5, "link": 0.8, "per_op_seconds": 2e-6}, "table_rates": )";
  write(path, head + R"([{"table_bytes": 4e6, "lookup_bytes_per_s": 1e9, "update_bytes_per_s": 1e9},
    {"table_bytes": 1e6, "lookup_bytes_per_s": 2e9, "update_bytes_per_s": 2e9}]})");
  auto descending = load_profile(path.string());
  REQUIRE(!descending);
  CHECK(descending.error().message == path.string() + ": profile.table_rates[1]: the sizes must ascend");
  write(path, head + R"([{"table_bytes": 4e6, "lookup_bytes_per_s": 0, "update_bytes_per_s": 1e9}]})");
  auto zero = load_profile(path.string());
  REQUIRE(!zero);
  CHECK(zero.error().message ==
        path.string() + ": profile.table_rates[0]: the size and the rates must be positive and finite");
  write(path, head + R"({"table_bytes": 4e6}})");
  auto not_array = load_profile(path.string());
  REQUIRE(!not_array);
  CHECK(not_array.error().message == path.string() + ": profile.table_rates: must be an array of measured sizes");
  fs::remove(path);
}
