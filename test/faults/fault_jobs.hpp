// What the simulated-failure and elastic tests share: the small MLP job that keeps going after
// a loss (--fault.recover), and how far two runs' losses drift apart after a plan change.
//
//   auto r = cohort::test::run(MLP_BINARY, cohort::test::recovering_mlp_job + " --plan.dp=2 --launch.nproc=2");
//   double drift = cohort::test::max_relative_difference(losses_a, losses_b, /*from=*/13);   // steps 13..
//   auto planned = cohort::test::run(MLP_BINARY, cohort::test::recovering_mlp_job + cohort::test::pinned_planner());
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "support/run_files.hpp"

namespace cohort::test {

inline const std::string recovering_mlp_job =
    "--data.name=digits --train.steps=30 --train.threads=1 --train.optimizer=adamw --train.lr=0.01 "
    "--fault.recover=true";

/// Options for runs whose planner-chosen plans must agree with each other and from machine to
/// machine: a fixed profile that names the link between processes (else each run measures it
/// anew), with the refit not saved (else each run changes the profile the next one plans with).
/// A clean run and its faulty twin planned apart once chose dp2 pp2 and dp2 pp2 sharded (CI).
inline std::string pinned_planner() {
  static const std::string path = [] {
    const std::string p = temp_path("pinned", "profile.json");
    std::ofstream(p) << R"({"cohort_profile": 1, "cores": 2, "refits": 1,
  "flops_f32_per_core": 5e10, "memory_bandwidth_bytes_per_s": 1e10,
  "cache_bytes": 8388608, "cache_bandwidth_bytes_per_s": 3e10,
  "link": {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-5},
  "efficiency": {"gemm": 0.37, "memory": 0.31, "link": 0.85, "per_op_seconds": 8e-5,
                 "per_task_seconds": 0, "per_step_seconds": 0.0035, "per_rank_seconds": 0},
  "process_links": {"tcp": {"bandwidth_bytes_per_s": 1.2e9, "latency_s": 8e-6, "by_processes": {"2": {"slowdown": 3, "refits": 1}}},
                    "ucx": {"bandwidth_bytes_per_s": 4e9, "latency_s": 3e-6, "by_processes": {"2": {"slowdown": 3, "refits": 1}}}}}
)";
    return p;
  }();
  return " --cluster.profile=" + path + " --plan.refit=false";
}

/// The largest relative difference between two runs' losses from step `from` (1-based) on.
inline double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b, std::size_t from) {
  double worst = 0;
  for (std::size_t k = from - 1; k < std::min(a.size(), b.size()); ++k)
    worst = std::max(worst, std::abs(a[k] - b[k]) / std::max(std::abs(b[k]), 1e-30));
  return worst;
}

}  // namespace cohort::test
