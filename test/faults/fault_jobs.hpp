// What the simulated-failure and elastic tests share: the small MLP job that keeps going after
// a loss (--fault.recover), and how far two runs' losses drift apart after a plan change.
//
//   auto r = cohort::test::run(MLP_BINARY, cohort::test::recovering_mlp_job + " --plan.dp=2 --launch.nproc=2");
//   double drift = cohort::test::max_relative_difference(losses_a, losses_b, /*from=*/13);   // steps 13..
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace cohort::test {

inline const std::string recovering_mlp_job =
    "--data.name=digits --train.steps=30 --train.threads=1 --train.optimizer=adamw --train.lr=0.01 "
    "--fault.recover=true";

/// The largest relative difference between two runs' losses from step `from` (1-based) on.
inline double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b, std::size_t from) {
  double worst = 0;
  for (std::size_t k = from - 1; k < std::min(a.size(), b.size()); ++k)
    worst = std::max(worst, std::abs(a[k] - b[k]) / std::max(std::abs(b[k]), 1e-30));
  return worst;
}

}  // namespace cohort::test
