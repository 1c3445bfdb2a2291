// A parallel plan: how one training step is split. dp replicas each take a near-equal share
// of the batch (batch_split); each replica is a pipeline of pp stages fed micro_batches
// micro-batches; each stage is
// split over tp ranks by the tensor-parallel annotations. The schedule is a buffer size:
// GPipe lets a stage hold every micro-batch in flight, 1F1B only (pp - stage).
// shard_params splits each replica group's optimizer state over dp (ZeRO: gradients are
// reduce-scattered to their owners, updated parameters all-gathered).
//
//   parallel_plan p{.dp = 2, .tp = 2, .pp = 2, .micro_batches = 4};
//   if (auto st = validate(p, /*batch=*/64); !st) return st;   // 64 rows = 2 replicas x 4 x 8
//   assert(p.ranks() == 8 && p.buffer_size(/*stage=*/0) == 2);   // 1F1B: pp - stage in flight
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "graph/error.hpp"

namespace cohort::planner {

enum class schedule_kind { gpipe, one_f_one_b };

struct parallel_plan {
  int dp = 1, tp = 1, pp = 1;
  int micro_batches = 1;
  schedule_kind schedule = schedule_kind::one_f_one_b;
  bool shard_params = false;

  int ranks() const { return dp * tp * pp; }
  /// Micro-batches a stage may hold in flight (forwarded, not yet backwarded).
  int buffer_size(int stage) const {
    return schedule == schedule_kind::gpipe ? micro_batches : std::min(micro_batches, pp - stage);
  }
};

/// Checks degrees (>= 1) and that `batch` has a row for each of the dp x micro_batches shares.
status validate(const parallel_plan& p, std::int64_t batch);

const char* to_string(schedule_kind s);
/// "gpipe" or "1f1b".
result<schedule_kind> parse_schedule(const std::string& text);

}  // namespace cohort::planner
