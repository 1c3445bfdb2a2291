// The heterogeneous pipeline (--exec.mode=hetero) as a user runs it: two stages, every table
// lookup in the first (the planner's cut, never before the last lookup), the dense layers in
// the second, micro-batches flowing through; the tables are exact, so the losses are the
// serial program's within float reassociation, in one process and across two; what it cannot
// run exits 2 naming the option.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>

#include "kernels/threads.hpp"
#include "run_app.hpp"
#include "support/criteo_files.hpp"
#include "support/run_files.hpp"

using cohort::test::run;
namespace fs = std::filesystem;

TEST_SUITE("recommender") {
  TEST_CASE("dlrm in hetero mode puts every lookup in the first stage and trains as the serial program") {
    cohort::test::criteo_pair files;
    const std::string job = files.args() + " --train.steps=30";
    // where the lookups end: the refusal of a cut before them says it
    auto early = run(DLRM_BINARY, job + " --exec.mode=hetero --plan.cuts=3");
    REQUIRE(early.exit_code == 2);
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_search(early.err, m, std::regex("its cut must be at forward node ([0-9]+) or later")),
                    early.err);
    const int lookups_end = std::stoi(m[1]);
    MESSAGE("the lookups end at forward node " << lookups_end);
    CHECK(lookups_end > 26);  // 26 tables, each looked up after the bottom MLP
    const std::string serial = cohort::test::temp_path("hetero", "serial.jsonl"),
                      hetero = cohort::test::temp_path("hetero", "hetero.jsonl");
    auto a = run(DLRM_BINARY, job + " --plan.mode=serial --metrics.file=" + serial);
    REQUIRE_MESSAGE(a.exit_code == 0, a.err);
    struct layout_case {
      std::string args;
      int dp, micro_batches, processes;
    };
    for (const auto& c : {layout_case{"--plan.mode=manual --train.threads=2", 1, 2, 1},  // by default 32 rows each
                          layout_case{"--plan.mode=manual --plan.micro-batches=8", 1, 8, 1},
                          layout_case{"--plan.mode=manual --plan.dp=2 --plan.micro-batches=2", 2, 2, 1},
                          layout_case{"--plan.mode=manual --plan.micro-batches=4 --launch.nproc=2", 1, 4, 2},
                          layout_case{"--train.threads=2", 0, 0, 1}}) {  // the planner's choice under the constraint
      CAPTURE(c.args);
      auto b = run(DLRM_BINARY, job + " --exec.mode=hetero " + c.args + " --metrics.file=" + hetero);
      REQUIRE_MESSAGE(b.exit_code == 0, b.err);
      const auto& plan = b.summary["plan"];
      CHECK(plan["exec"]["mode"] == "hetero");
      CHECK(plan["pp"] == 2);
      CHECK(plan["tp"] == 1);
      if (c.dp > 0) CHECK(plan["dp"] == c.dp);
      if (c.micro_batches > 0) CHECK(plan["micro_batches"] == c.micro_batches);
      REQUIRE(plan["cuts"].size() == 1);
      CHECK(plan["cuts"][0].get<int>() >= lookups_end);
      if (c.processes > 1) CHECK(plan["processes"] == c.processes);
      // one process with both stages and two cores binds them apart and says so
      if (c.args == "--plan.mode=manual --train.threads=2") {
        if (cohort::kernels::available_cores() >= 2)
          CHECK(
              b.err.find("hetero: the lookups' stage on core 0, the dense stage on core 1 (of the 2 it computes on)") !=
              std::string::npos);
        else
          MESSAGE("one core here: the check that the stages are bound apart is skipped");
      }
      const double worst =
          cohort::test::worst_relative(cohort::test::metrics_losses(hetero), cohort::test::metrics_losses(serial));
      MESSAGE(c.args << ": cut at " << plan["cuts"][0] << ", max relative loss difference to serial " << worst);
      CHECK(worst <= 1e-5);
      CHECK(b.summary["test_auc"].get<double>() == doctest::Approx(a.summary["test_auc"].get<double>()).epsilon(1e-4));
    }
    fs::remove(serial);
    fs::remove(hetero);
  }

  TEST_CASE("dlrm in hetero mode refuses what it cannot run, with exit code 2 naming the option") {
    cohort::test::criteo_pair files;
    const std::string base = files.args() + " --train.steps=1 --exec.mode=hetero ";
    struct bad_case {
      std::string args, message;
    };
    for (const auto& b : std::vector<bad_case>{
             {"--plan.pp=3", "--plan.pp must be 2, not 3"},
             {"--plan.tp=2", "--plan.tp must be 1, not 2"},
             {"--plan.mode=serial", "not with --plan.mode=serial"},
             {"--plan.virtual-stages=2", "--plan.virtual-stages must be 1"},
             {"--model.sparse=false", "--exec.mode=hetero puts the tables' lookups and sparse updates on a stage"},
             {"--train.optimizer=adamw", "AdamW moves every row"},
         }) {
      CAPTURE(b.args);
      auto r = run(DLRM_BINARY, base + b.args);
      CHECK(r.exit_code == 2);
      CHECK(r.err.find(b.message) != std::string::npos);
    }
  }
}
