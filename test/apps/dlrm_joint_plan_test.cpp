// dlrm under --plan.mode=auto: the tables' sharding and the plan chosen together
// (apps/driver/joint_plan.hpp) — a candidate per tensor-parallel degree, each with its own
// per-table placement, the fastest predicted trained; tables too large to replicate on the
// ranks force the degree that shards them; a chosen run trains as the serial program.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "faults/fault_jobs.hpp"
#include "planner/cluster.hpp"
#include "run_app.hpp"
#include "support/criteo_files.hpp"
#include "support/run_files.hpp"

using cohort::test::run;

namespace {

// The candidate the summary marks chosen: it exists once, and no candidate is predicted faster
// by more than the tie the joint choice allows (the smaller degree on a near tie).
const nlohmann::json& chosen_candidate(const nlohmann::json& by_tp) {
  const nlohmann::json* chosen = nullptr;
  for (const auto& c : by_tp)
    if (c.value("chosen", false)) {
      REQUIRE(chosen == nullptr);
      chosen = &c;
    }
  REQUIRE(chosen != nullptr);
  for (const auto& c : by_tp)
    if (c.contains("predicted_step_s"))
      CHECK(c["predicted_step_s"].get<double>() >= (*chosen)["predicted_step_s"].get<double>() * 0.99);
  return *chosen;
}

}  // namespace

TEST_CASE("dlrm under --plan.mode=auto plans each tensor-parallel degree with its own tables and trains as serial") {
  cohort::test::criteo_pair files;
  const std::string serial = cohort::test::temp_path("dlrm-joint", "serial.jsonl"),
                    chosen = cohort::test::temp_path("dlrm-joint", "auto.jsonl");
  const std::string job = files.args() + " --train.steps=10" + cohort::test::pinned_planner();
  auto a = run(DLRM_BINARY, job + " --plan.mode=serial --metrics.file=" + serial);
  REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  auto b = run(DLRM_BINARY, job + " --plan.ranks=2 --metrics.file=" + chosen);
  REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  const auto& by_tp = b.summary["plan"]["by_tp"];
  REQUIRE(by_tp.size() == 2);  // tp1 and tp2 on 2 ranks
  CHECK(by_tp[0]["tp"] == 1);
  CHECK(by_tp[1]["tp"] == 2);
  CHECK_FALSE(by_tp[0].contains("tables"));  // one rank of tensor parallelism: every table replicated
  CHECK(by_tp[1]["tables"].size() == 26);
  const auto& c = chosen_candidate(by_tp);
  CHECK(b.summary["plan"]["tp"] == c["tp"]);
  CHECK(b.summary.contains("tables") == (c["tp"] == 2));
  CHECK(b.err.find("planner: the tables and the plan chosen together, one candidate per tensor-parallel degree:") !=
        std::string::npos);
  CHECK(b.err.find("  chosen: tp" + std::to_string(c["tp"].get<int>())) != std::string::npos);
  const double worst =
      cohort::test::worst_relative(cohort::test::metrics_losses(chosen), cohort::test::metrics_losses(serial));
  MESSAGE("chosen " << c["plan"] << ": max relative loss difference to serial " << worst);
  CHECK(worst <= 1e-5);

  // a degree fixed under auto: that degree's candidate alone, its tables chosen for it
  auto d = run(DLRM_BINARY, job + " --plan.mode=auto --plan.tp=2 --plan.ranks=2 --plan.only=true");
  REQUIRE_MESSAGE(d.exit_code == 0, d.err);
  REQUIRE(d.summary["plan"]["by_tp"].size() == 1);
  CHECK(d.summary["plan"]["by_tp"][0]["tp"] == 2);
  CHECK(d.summary["plan"]["by_tp"][0]["chosen"] == true);
  CHECK(d.summary["tables"].size() == 26);

  // across processes the model is the same everywhere: the tables stay replicated, one plan search
  auto e = run(DLRM_BINARY, job + " --launch.nproc=2 --train.steps=3");
  REQUIRE_MESSAGE(e.exit_code == 0, e.err);
  CHECK_FALSE(e.summary["plan"].contains("by_tp"));
  CHECK_FALSE(e.summary.contains("tables"));
  std::filesystem::remove(serial);
  std::filesystem::remove(chosen);
}

TEST_CASE("dlrm under --plan.mode=auto: tables too large to replicate on 2 ranks are sharded over tp2") {
  // 26 tables that hold 70 % of this machine's memory together: no rank of 2 can hold them all
  // (half the memory each), so every tp1 plan keeps them whole on some rank; tp2 splits them
  const double memory = cohort::planner::detect_memory_bytes();
  REQUIRE(memory > 0);
  const auto rows = static_cast<std::int64_t>(0.7 * memory / (26 * 16 * 4.0));
  std::string all_rows;
  for (int t = 0; t < 26; ++t) all_rows += (t ? "," : "") + std::to_string(rows);
  cohort::test::criteo_pair files;
  auto r = run(DLRM_BINARY, files.args() + cohort::test::pinned_planner() + " --model.rows=" + all_rows +
                                " --train.batch=128 --plan.ranks=2 --plan.only=true");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto& by_tp = r.summary["plan"]["by_tp"];
  REQUIRE(by_tp.size() == 2);
  const auto& c = chosen_candidate(by_tp);
  CHECK(c["tp"] == 2);
  CHECK(r.summary["plan"]["tp"] == 2);
  CHECK(r.summary["plan"]["predicted"]["fits"] == true);
  const auto& tables = r.summary["tables"];
  REQUIRE(tables.size() == 26);
  const auto replicated = std::count_if(
      tables.begin(), tables.end(), [](const nlohmann::json& how) { return how.get<std::string>() == "replicated"; });
  MESSAGE(c["plan"] << ": " << 26 - replicated << " of 26 tables sharded; tp1's candidate: " << by_tp[0]);
  CHECK(replicated < 26);
  // tp1 either fits nowhere or only by spreading the tables over pipeline stages
  if (by_tp[0].contains("plan")) CHECK(by_tp[0]["plan"].get<std::string>().find("pp2") != std::string::npos);
}
