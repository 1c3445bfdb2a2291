// The link between the processes of one job on this machine (issue 22 item 7): kept in the
// machine profile per data plane and validated when read; a group of ranks within one process
// takes the in-process link, one across processes the measured link of the job's plane
// slowed as the job's own runs found it.
#include <doctest/doctest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "planner/machine_profile.hpp"
#include "planner/plan_choice.hpp"
#include "planner/run_refit.hpp"
#include "toy_models.hpp"

using namespace cohort;
using namespace cohort::planner;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("cohort-" + std::to_string(::getpid()) + "-" + name);
}

std::string profile_with(const std::string& links) {
  return R"({"cohort_profile": 1, "cores": 2, "flops_f32_per_core": 5e10, "memory_bandwidth_bytes_per_s": 1e10,
    "refits": 0, "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
    "efficiency": {"gemm": 0.9, "memory": 0.5, "link": 0.8, "per_op_seconds": 2e-6}, "process_links": )" +
         links + "}";
}

std::string load_error(const std::string& links) {
  const auto path = scratch("links.json");
  std::ofstream(path) << profile_with(links);
  auto p = load_profile(path.string());
  fs::remove(path);
  return p ? "" : p.error().message;
}

/// This machine as the job refits below see it: 2 cores, tcp between processes as calibrated.
machine_profile two_core_profile() {
  machine_profile p;
  p.cores = 2;
  p.process_links["tcp"] = {{1e9, 20e-6}, {}};
  return p;
}

plan_request dp2_over_two_processes() {
  plan_request r;
  r.mode = plan_mode::manual;
  r.dp = 2;
  r.processes = 2;
  return r;
}

/// `p` computing at half its speed.
machine_profile at_half_compute(machine_profile p) {
  p.eff.gemm /= 2, p.eff.memory /= 2, p.eff.per_op_seconds *= 2;
  return p;
}

}  // namespace

TEST_CASE("links between processes are saved with the profile and read back, bad ones refused naming the field") {
  const auto path = scratch("process-links.json");
  machine_profile p;
  p.process_links["tcp"] = {{1.25e9, 30e-6}, {{2, {3.5, 2, 2, 1}}, {4, {9, 1, 1, 0}}}};
  p.process_links["ucx"] = {{6.5e9, 2e-6}, {}};
  REQUIRE(save_profile(path.string(), p).ok());
  auto back = load_profile(path.string());
  REQUIRE(back.ok());
  REQUIRE(back->process_links.size() == 2);
  CHECK(back->process_links["tcp"].cost.bandwidth_bytes_per_s == 1.25e9);
  CHECK(back->process_links["tcp"].cost.latency_s == 30e-6);
  REQUIRE(back->process_links["tcp"].by_processes.size() == 2);
  CHECK(back->process_links["tcp"].by_processes[2].slowdown == 3.5);
  CHECK(back->process_links["tcp"].by_processes[2].refits == 2);
  CHECK(back->process_links["tcp"].by_processes[2].bandwidth_slowdown == 2);
  CHECK(back->process_links["tcp"].by_processes[2].bandwidth_refits == 1);
  CHECK(back->process_links["tcp"].by_processes[4].slowdown == 9);
  CHECK(back->process_links["ucx"].cost.bandwidth_bytes_per_s == 6.5e9);
  CHECK(back->process_links["ucx"].by_processes.empty());
  CHECK(describe(*back).find(
            "between processes tcp 1.25 GB/s + 30.0 us (latency x3.5, bandwidth /2 for 2 processes, latency x9, "
            "bandwidth /1 for 4 processes), "
            "ucx 6.50 GB/s + 2.0 us") != std::string::npos);
  fs::remove(path);
  // profiles written before the field: none measured
  machine_profile none;
  REQUIRE(save_profile(path.string(), none).ok());
  auto old = load_profile(path.string());
  REQUIRE(old.ok());
  CHECK(old->process_links.empty());
  fs::remove(path);
  CHECK(load_error(R"({"tcp": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5}})").empty());
  // the per-step term profiles kept before the slowdown: read, ignored
  CHECK(load_error(R"({"tcp": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5, "per_step_seconds": 2e-4,
                     "refits": 3}})")
            .empty());
  CHECK(load_error(R"([1, 2])").find("profile.process_links: must be an object of data planes") != std::string::npos);
  CHECK(load_error(R"({"rdma": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5}})")
            .find("profile.process_links.rdma: the data planes are tcp and ucx") != std::string::npos);
  CHECK(load_error(R"({"tcp": {"bandwidth_bytes_per_s": 0, "latency_s": 1e-5}})")
            .find("profile.process_links.tcp: bandwidth must be positive") != std::string::npos);
  const std::string link = R"({"tcp": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5, "by_processes": )";
  CHECK(load_error(link + "[2]}}").find("process_links.tcp.by_processes: must be an object by process count") !=
        std::string::npos);
  CHECK(load_error(link + R"({"1": {"slowdown": 2, "refits": 1}}}})")
            .find("process_links.tcp.by_processes.1: the key must be a process count") != std::string::npos);
  CHECK(load_error(link + R"({"two": {"slowdown": 2, "refits": 1}}}})")
            .find("process_links.tcp.by_processes.two: the key must be a process count") != std::string::npos);
  CHECK(load_error(link + R"({"2": {"slowdown": 5000, "refits": 1}}}})")
            .find("process_links.tcp.by_processes.2.slowdown: must lie in") != std::string::npos);
  CHECK(load_error(link + R"({"2": {"slowdown": 0, "refits": 1}}}})")
            .find("process_links.tcp.by_processes.2.slowdown: must lie in") != std::string::npos);
  CHECK(load_error(link + R"({"2": {"slowdown": 2}}}})").find("process_links.tcp.by_processes.2.refits: missing") !=
        std::string::npos);
  CHECK(load_error(link + R"({"2": {"slowdown": 2, "refits": 1, "bandwidth_slowdown": 1e5, "bandwidth_refits": 1}}}})")
            .find("process_links.tcp.by_processes.2.bandwidth_slowdown: must lie in") != std::string::npos);
  CHECK(load_error(link + R"({"2": {"slowdown": 2, "refits": 1, "bandwidth_slowdown": 2}}}})")
            .find("process_links.tcp.by_processes.2.bandwidth_refits: missing") != std::string::npos);
  CHECK(load_error(R"({"tcp": {"bandwidth_bytes_per_s": 1e9, "latency_s": -1}})")
            .find("profile.process_links.tcp.latency_s: expected a non-negative number") != std::string::npos);
  CHECK(load_error(R"({"tcp": {"latency_s": 1e-5}})").find("process_links.tcp") != std::string::npos);
}

TEST_CASE(
    "ranks spread over processes: within one the in-process link, across them the plane's as a job of that size sees "
    "it") {
  machine_profile p;
  p.link = {5e9, 10e-6};
  p.process_links["tcp"] = {{1.2e9, 40e-6}, {{2, {3, 1, 1, 0}}, {4, {8, 2, 2, 1}}}};
  const topology one = local_topology(p, 4, 4);
  CHECK(one.devices_per_machine == 4);
  CHECK(one.inter.bandwidth_bytes_per_s == 5e9);
  const topology two = local_topology(p, 4, 4, 2, "tcp");
  CHECK(two.devices == 4);
  CHECK(two.devices_per_machine == 2);
  CHECK(two.intra.bandwidth_bytes_per_s == 5e9);
  CHECK(two.inter.latency_s == doctest::Approx(120e-6));  // slowed 3x for 2 processes
  CHECK(two.inter.bandwidth_bytes_per_s == 1.2e9);        // the bytes move as calibrated
  const topology four = local_topology(p, 4, 4, 4, "tcp");
  CHECK(four.inter.latency_s == doctest::Approx(320e-6));             // 8x for 4
  CHECK(four.inter.bandwidth_bytes_per_s == doctest::Approx(0.6e9));  // and its bandwidth halved
  // a count never refit takes the largest smaller one's; none smaller: as calibrated
  CHECK(job_link_cost(p.process_links["tcp"], 3).latency_s == doctest::Approx(120e-6));
  CHECK(job_link_cost(p.process_links["tcp"], 6).latency_s == doctest::Approx(320e-6));
  process_link from_four{{1.2e9, 40e-6}, {{4, {8, 2, 1, 0}}}};
  CHECK(job_link_cost(from_four, 2).latency_s == 40e-6);
  CHECK(job_link_cost(from_four, 2).bandwidth_bytes_per_s == 1.2e9);
  const topology unmeasured = local_topology(p, 4, 4, 2, "ucx");
  CHECK(unmeasured.inter.bandwidth_bytes_per_s == unmeasured_process_link.bandwidth_bytes_per_s);
  CHECK(unmeasured.inter.latency_s == unmeasured_process_link.latency_s);
  // ranks that do not split over the processes: as one (the runtime refuses such a plan)
  CHECK(local_topology(p, 4, 4, 3, "tcp").devices_per_machine == 4);
}

TEST_CASE("a tensor-parallel plan across two processes is priced with the link between them") {
  auto model = [](graph& g, std::int64_t rows) { return test::toy_mlp(g, {256, 1024, 1024, 10}, rows); };
  plan_request tp2;
  tp2.mode = plan_mode::manual;
  tp2.tp = 2;
  auto step = [&](int processes, link_cost between) {
    machine_profile p;
    p.cores = 2;
    p.link = {5e9, 10e-6};
    p.process_links["tcp"] = {between, {}};
    plan_request r = tp2;
    r.processes = processes;
    auto s = prepare_planning(model, 2, 256, 2, r, p, "");
    REQUIRE(s.ok());
    auto c = choose_plan(*s, r);
    REQUIRE(c.ok());
    return c->predicted->step_s;
  };
  const double here = step(1, {0.1e9, 100e-6});  // one process: the process link plays no part
  CHECK(step(1, {5e9, 10e-6}) == here);
  CHECK(step(2, {5e9, 10e-6}) == doctest::Approx(here));  // a link as fast as the in-process one
  CHECK(step(2, {0.1e9, 100e-6}) > here * 1.2);           // 50x slower: every tp collective pays
  // after a loss the setup re-plans for fewer processes: one process's threads say how many
  machine_profile p;
  p.cores = 2;
  p.process_links["tcp"] = {{0.1e9, 100e-6}, {}};
  plan_request r = tp2;
  r.processes = 2;
  auto s = prepare_planning(model, 2, 256, 2, r, p, "");
  REQUIRE(s.ok());
  CHECK(local_topology_of(*s, 2, 2).devices_per_machine == 1);  // 2 processes of one thread
  CHECK(local_topology_of(*s, 2, 1).devices_per_machine == 2);  // 1 process left
  CHECK(local_topology_of(*s, 4, 4).devices_per_machine == 1);  // 4 after a join
}

TEST_CASE("a job's step beyond the prediction is refit as the slowdown of the link between its processes") {
  auto model = [](graph& g, std::int64_t rows) { return test::toy_mlp(g, {64, 32, 10}, rows); };
  const auto path = scratch("refit-between.json");
  fs::remove(path);
  const machine_profile p = two_core_profile();
  const plan_request dp2 = dp2_over_two_processes();
  // the step predicted with the link between the 2 processes slowed by `factor`
  auto step_at = [&](const machine_profile& base, double factor) {
    machine_profile q = base;
    q.process_links["tcp"].by_processes[2] = {factor, 1, 1, 0};
    auto s = prepare_planning(model, 2, 64, 2, dp2, q, "");
    REQUIRE(s.ok());
    return choose_plan(*s, dp2)->predicted->step_s;
  };
  auto s = prepare_planning(model, 2, 64, 2, dp2, p, path.string());
  REQUIRE(s.ok());
  auto c = choose_plan(*s, dp2);
  REQUIRE(c.ok());
  const double bare = c->predicted->step_s;  // as calibrated: nothing refit yet
  CHECK(bare == doctest::Approx(step_at(p, 1)));
  CHECK(step_at(p, 4) > bare);
  auto run_taking = [&](double seconds) {
    task_totals t;
    t.step_seconds = {seconds, seconds, seconds};
    t.steps = 3;
    return refit_between_processes(*c, *s, t, /*save=*/true);
  };
  auto first = run_taking(step_at(p, 4));
  CHECK(first["plane"] == "tcp");
  CHECK(first["processes"] == 2);
  CHECK(first["excess_s"].get<double>() == doctest::Approx(step_at(p, 4) - bare));
  CHECK(first["run_slowdown"].get<double>() == doctest::Approx(4).epsilon(1e-6));
  CHECK(first["slowdown"].get<double>() == doctest::Approx(4).epsilon(1e-6));  // the first run: all of it
  CHECK(first["refits"] == 1);
  auto second = run_taking(step_at(p, 16));
  CHECK(second["run_slowdown"].get<double>() == doctest::Approx(16).epsilon(1e-6));
  CHECK(second["slowdown"].get<double>() == doctest::Approx(8).epsilon(1e-6));  // geometric, weight 1/2
  auto third = run_taking(bare / 10);  // faster than any link could make it: the lowest slowdown
  CHECK(third["run_slowdown"].get<double>() == doctest::Approx(min_link_slowdown));
  const double mean = std::exp((2 * std::log(8.0) + std::log(min_link_slowdown)) / 3);
  CHECK(third["slowdown"].get<double>() == doctest::Approx(mean).epsilon(1e-6));
  auto saved = load_profile(path.string());
  REQUIRE(saved.ok());
  CHECK(saved->process_links["tcp"].by_processes[2].refits == 3);
  CHECK(saved->process_links["tcp"].by_processes[2].slowdown == doctest::Approx(mean).epsilon(1e-6));
  CHECK(saved->process_links["tcp"].cost.bandwidth_bytes_per_s == 1e9);  // the calibration stays
  CHECK(saved->process_links["tcp"].cost.latency_s == 20e-6);
  // the next plan is predicted with it
  auto again = prepare_planning(model, 2, 64, 2, dp2, *saved, "");
  REQUIRE(again.ok());
  auto next = choose_plan(*again, dp2);
  REQUIRE(next.ok());
  CHECK(next->predicted->step_s == doctest::Approx(step_at(p, mean)));
  // a run whose tasks took twice the predicted compute: the compute is refit (into the
  // profile's efficiencies) before the slowdown is solved, so the slowdown is the link's alone
  {
    const std::size_t ranks = 2;
    task_totals t;
    t.steps = 3;
    for (std::size_t r = 0; r < ranks; ++r) {
      const auto& st = c->predicted->stages[0];
      t.per_rank.push_back({3 * 2 * st.forward_s, 3 * 2 * st.backward_s, 0});  // no reduction timed
    }
    const double at_half = step_at(at_half_compute(p), 4);
    t.step_seconds = {at_half, at_half, at_half};
    auto s2 = prepare_planning(model, 2, 64, 2, dp2, p, "");
    REQUIRE(s2.ok());
    const int refits_before = s2->profile.refits;
    auto fourth = refit_between_processes(*c, *s2, t, /*save=*/false);
    CHECK(fourth["compute_factor"].get<double>() == doctest::Approx(2));
    CHECK(fourth["run_slowdown"].get<double>() == doctest::Approx(4).epsilon(1e-3));
    CHECK(!fourth.contains("run_bandwidth_slowdown"));
    CHECK(s2->profile.refits == refits_before + 1);
    CHECK(s2->profile.eff.gemm < p.eff.gemm);   // slower compute, folded in
    CHECK(s2->profile.eff.link == p.eff.link);  // the link's efficiency is not a job's to refit
  }
  // a link without latency: the step does not depend on its factor, nothing is refit, and no
  // factor for 2 processes appears (it would hide a smaller count's behind a default one)
  {
    machine_profile flat = p;
    flat.process_links["tcp"].cost.latency_s = 0;
    auto s3 = prepare_planning(model, 2, 64, 2, dp2, flat, "");
    REQUIRE(s3.ok());
    auto c3 = choose_plan(*s3, dp2);
    REQUIRE(c3.ok());
    task_totals t;
    t.step_seconds = {2 * bare, 2 * bare, 2 * bare};
    t.steps = 3;
    auto none = refit_between_processes(*c3, *s3, t, /*save=*/false);
    CHECK(none.contains("note"));
    CHECK(s3->profile.process_links["tcp"].by_processes.count(2) == 0);
  }
  plan_request here = dp2;
  here.processes = 1;
  auto one = prepare_planning(model, 2, 64, 2, here, *saved, "");
  REQUIRE(one.ok());
  CHECK(refit_between_processes(*c, *one, task_totals{}, false).empty());
  fs::remove(path);
}

TEST_CASE("a job's data-parallel reduction across its processes refits the link's bandwidth and its step the latency") {
  // dp2 over 2 processes of a model whose reduction is bulk (5 MB): the run below took what the
  // model predicts with half the compute speed, the latency 4x and the bandwidth 2x worse
  auto model = [](graph& g, std::int64_t rows) { return test::toy_mlp(g, {256, 1024, 1024, 10}, rows); };
  const machine_profile p = two_core_profile();
  const plan_request dp2 = dp2_over_two_processes();
  machine_profile truth = at_half_compute(p);
  truth.process_links["tcp"].by_processes[2] = {4, 1, 2, 1};
  auto slow = prepare_planning(model, 2, 64, 2, dp2, truth, "");
  REQUIRE(slow.ok());
  auto ran = choose_plan(*slow, dp2);
  REQUIRE(ran.ok());
  const auto& stage = ran->predicted->stages[0];
  REQUIRE(stage.update_comm_s > 0);
  task_totals t;
  t.steps = 3;
  for (int r = 0; r < 2; ++r)
    t.per_rank.push_back({3 * stage.forward_s, 3 * stage.backward_s, 3 * stage.update_comm_s});
  const double step = ran->predicted->step_s;
  t.step_seconds = {step, step, step};
  auto s = prepare_planning(model, 2, 64, 2, dp2, p, "");
  REQUIRE(s.ok());
  auto c = choose_plan(*s, dp2);
  REQUIRE(c.ok());
  auto between = refit_between_processes(*c, *s, t, /*save=*/false);
  INFO(between.dump());
  CHECK(between["compute_factor"].get<double>() == doctest::Approx(2).epsilon(1e-3));
  CHECK(between["run_bandwidth_slowdown"].get<double>() == doctest::Approx(2).epsilon(1e-2));
  CHECK(between["bandwidth_refits"] == 1);
  const job_link& kept = s->profile.process_links["tcp"].by_processes[2];
  CHECK(kept.bandwidth_slowdown == doctest::Approx(2).epsilon(1e-2));
  CHECK(kept.bandwidth_refits == 1);
  CHECK(kept.refits == 1);
  // the latency (two messages a step here: it barely counts) is what the step leaves; the plan
  // is then predicted at the run's step
  auto after = prepare_planning(model, 2, 64, 2, dp2, s->profile, "");
  REQUIRE(after.ok());
  CHECK(choose_plan(*after, dp2)->predicted->step_s == doctest::Approx(step).epsilon(1e-3));
}
