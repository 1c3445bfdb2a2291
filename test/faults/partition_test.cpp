// A network partition, as a cluster has them: a dp2 job across two network namespaces (two
// hosts in miniature, test/support/netns.hpp) with --fault.recover, and mid-run the link between
// them goes down — nothing is reset, frames are just dropped. The coordinator's side declares
// the node lost at the heartbeat timeout, fences it and finishes alone with every loss of the
// fault-free run; the node's side loses the coordinator and ends non-zero saying so: a
// partition never leaves two jobs training. Needs root and iproute2 (COHORT_SKIP_NETNS=1 skips
// with a message where namespaces cannot be made).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "apps/run_app.hpp"
#include "support/netns.hpp"
#include "support/run_files.hpp"

TEST_SUITE("failure") {
  TEST_CASE("a partitioned node is fenced out and the coordinator's side finishes with the fault-free losses") {
    cohort::test::namespaces ns;
    if (cohort::test::skip_without(ns)) return;
    const std::string dir = cohort::test::fresh_dir("part", "job");
    std::filesystem::create_directories(dir);
    const std::string secret = dir + "/secret";
    { std::ofstream(secret) << "a job secret for the test\n"; }
    ::chmod(secret.c_str(), 0600);
    const std::string job =
        std::string(MLP_BINARY) +
        " --data.name=synth --model.dims=256,512,512,10 --train.batch=128 --train.steps=600 --train.threads=1 "
        "--plan.dp=2 --fault.recover=true --plan.refit=false --dist.heartbeat-ms=200 "
        "--dist.heartbeat-timeout-ms=1000 --dist.join-timeout-ms=30000";
    const std::string clean_metrics = dir + "/clean.jsonl", metrics = dir + "/job.jsonl";
    auto clean = cohort::test::run(MLP_BINARY,
                                   "--data.name=synth --model.dims=256,512,512,10 --train.batch=128 "
                                   "--train.steps=600 --train.threads=1 --plan.dp=2 --launch.nproc=2 "
                                   "--plan.refit=false --metrics.file=" +
                                       clean_metrics);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.err);
    const std::string env =
        "env WORLD_SIZE=2 MASTER_ADDR=10.231.0.1 MASTER_PORT=29741 COHORT_JOB_SECRET_FILE=" + secret;
    int node_status = -1;
    std::thread node([&] {
      node_status = std::system(("ip netns exec " + ns.b + " " + env + " RANK=1 " + job +
                                 " --dist.bind=10.231.0.2 >/dev/null 2>" + dir + "/node.err")
                                    .c_str());
    });
    std::thread cutter([&] {  // the partition, once 50 steps are done
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (cohort::test::count_lines(metrics) < 50 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ns.cut();
    });
    auto coordinator = cohort::test::run("ip netns exec " + ns.a + " " + env + " RANK=0 " + job,
                                         "--dist.bind=10.231.0.1 --metrics.file=" + metrics);
    cutter.join();
    node.join();
    INFO(coordinator.err);
    REQUIRE(coordinator.exit_code == 0);
    CHECK(cohort::test::metrics_losses(metrics) == cohort::test::metrics_losses(clean_metrics));
    const auto& rec = coordinator.summary["recoveries"];
    REQUIRE(rec.size() == 1);
    CHECK(rec[0]["lost"] == "process 1");
    CHECK(rec[0]["cause"].get<std::string>().find("no heartbeat for 1000 ms") != std::string::npos);
    const std::string node_err = cohort::test::read_text(dir + "/node.err");
    CAPTURE(node_err);
    CHECK(node_status != 0);  // the minority side stops
    CHECK(node_err.find("lost the coordinator") != std::string::npos);
    std::filesystem::remove_all(dir);
  }
}
