// A parallel plan: how one training step is split. dp replicas each take a near-equal share
// of the batch (batch_split); each replica is a pipeline of pp stages fed micro_batches
// micro-batches; each stage is
// split over tp ranks by the tensor-parallel annotations. The schedule is a buffer size:
// GPipe lets a stage hold every micro-batch in flight, 1F1B only (pp - stage).
// virtual_stages (Megatron's interleaved 1F1B): the model is cut into pp x v stages and
// pipeline rank r holds the v non-contiguous stages r, r + pp, r + 2 pp, ... (its chunks);
// the pipeline's bubble shrinks by v for v times the transfers.
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
  int virtual_stages = 1;  // chunks per pipeline rank (interleaved 1F1B when > 1)

  int ranks() const { return dp * tp * pp; }
  /// Stages the model is cut into: pp x virtual_stages.
  int stages() const { return pp * virtual_stages; }
  /// The pipeline rank that runs stage `stage` (of stages()).
  int rank_of_stage(int stage) const { return stage % pp; }
  /// The credit of pipeline rank `rank`: the forward tasks it may run ahead of its backward
  /// tasks (micro-batches in flight, counted per chunk). GPipe: all of them; 1F1B: pp - rank;
  /// interleaved 1F1B: Megatron's warm-up, 2 (pp - rank - 1) + (v - 1) pp, plus the one the
  /// steady state runs before each backward.
  int buffer_size(int rank) const {
    const int tasks = micro_batches * virtual_stages;
    if (schedule == schedule_kind::gpipe) return tasks;
    if (virtual_stages == 1) return std::min(micro_batches, pp - rank);
    return std::min(tasks, 2 * (pp - rank - 1) + (virtual_stages - 1) * pp + 1);
  }
};

/// Checks degrees (>= 1) and that `batch` has a row for each of the dp x micro_batches shares;
/// virtual stages need pp >= 2 and micro-batches in whole groups of pp (Megatron's rule: a
/// rank runs each chunk for pp micro-batches in turn).
status validate(const parallel_plan& p, std::int64_t batch);

const char* to_string(schedule_kind s);
/// "gpipe" or "1f1b".
result<schedule_kind> parse_schedule(const std::string& text);

}  // namespace cohort::planner
