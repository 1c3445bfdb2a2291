// How the global batch and the learning rate follow the plan (--elastic.batch). Fixed (the
// default): every plan trains `batch` samples a step at the optimizer's own rate, so a job
// that grows or shrinks trains as the fixed-size run would. Scale: the batch follows the
// data-parallel degree — `batch` at `base_dp` replicas (the first plan's), round(batch x dp /
// base_dp) at dp — and the learning rate follows the batch (the linear rule of Goyal et al.,
// "Accurate, Large Minibatch SGD", 2017): more throughput for users who prefer it.
//
//   batch_rule r{.batch = 128, .base_dp = 2};
//   assert(r.rows(4) == 256 && r.rows(3) == 192 && r.lr_factor(4) == 2.0);
//   batch_rule fixed{.batch = 128};
//   assert(fixed.rows(4) == 128 && fixed.lr_factor(4) == 1.0);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace cohort::actors {

struct batch_rule {
  std::int64_t batch = 0;  // --train.batch
  int base_dp = 0;         // scale: the data-parallel degree `batch` is for; 0: fixed

  bool scales() const { return base_dp > 0; }
  /// The global batch of a plan of `dp` data-parallel replicas.
  std::int64_t rows(int dp) const {
    if (!scales()) return batch;
    return std::max<std::int64_t>(1, std::llround(static_cast<double>(batch) * dp / base_dp));
  }
  /// The learning rate's factor for that plan (the batch's over `batch`).
  double lr_factor(int dp) const { return static_cast<double>(rows(dp)) / static_cast<double>(batch); }
};

}  // namespace cohort::actors
