// Two hosts in miniature: two network namespaces joined by a veth pair, each with its own
// address, one process of a dp2 job in each, the coordinator bound to its namespace's
// address (not loopback, so the job secret is required: a 0600 file). The losses equal the
// serial run's. Creating namespaces needs root and iproute2; where that fails the test fails
// and says so, unless COHORT_SKIP_NETNS=1 is set (then it reports the skip).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_app.hpp"
#include "support/netns.hpp"

namespace {

std::vector<double> losses(const std::string& path) {
  std::vector<double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

}  // namespace

TEST_CASE("a dp2 job across two network namespaces (two hosts in miniature) trains like the serial run") {
  cohort::test::namespaces ns;
  if (cohort::test::skip_without(ns)) return;
  const auto dir = std::filesystem::temp_directory_path() / ("cohort-netns-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string secret = (dir / "secret").string();
  { std::ofstream(secret) << "a job secret for the test\n"; }
  ::chmod(secret.c_str(), 0600);
  const std::string common =
      std::string(MLP_BINARY) + " --data.name=digits --train.steps=20 --train.threads=1 --plan.dp=2";
  auto serial = cohort::test::run(MLP_BINARY,
                                  "--data.name=digits --train.steps=20 --train.threads=1 --plan.mode=serial "
                                  "--metrics.file=" +
                                      (dir / "serial.jsonl").string());
  REQUIRE(serial.exit_code == 0);
  const std::string env = "env WORLD_SIZE=2 MASTER_ADDR=10.231.0.1 MASTER_PORT=29731 COHORT_JOB_SECRET_FILE=" + secret;
  std::thread node([&] {
    cohort::test::sh("ip netns exec " + ns.b + " " + env + " RANK=1 " + common +
                     " --dist.bind=10.231.0.2 --dist.join-timeout-ms=30000");
  });
  auto coordinator = cohort::test::run(
      "ip netns exec " + ns.a + " " + env + " RANK=0 " + common,
      "--dist.bind=10.231.0.1 --dist.join-timeout-ms=30000 --metrics.file=" + (dir / "job.jsonl").string());
  node.join();
  INFO(coordinator.err);
  REQUIRE(coordinator.exit_code == 0);
  CHECK(coordinator.summary["plan"]["processes"] == 2);
  auto want = losses((dir / "serial.jsonl").string()), got = losses((dir / "job.jsonl").string());
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-5 * std::abs(want[i]));
  std::filesystem::remove_all(dir);
}
