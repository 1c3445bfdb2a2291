// How a step's global batch splits over the data-parallel replicas and their micro-batches:
// any batch over any dp x micro-batches (at least one row each), in near-equal shares. The
// batch splits into dp near-equal contiguous ranges (graph/placement.hpp's shard_range: the
// first ones one row larger), each replica's range into its micro-batches the same way, so
// every share has batch / (dp x m) rows or one more (the larger ones first in each replica) and
// the replicas' totals differ by at most one row.
// Every share is weighted by its sample count (weight = rows / batch), so the step's loss
// and gradient are the batch mean whatever the split — the same training at any size.
//
//   batch_split s{.batch = 128, .dp = 1, .micro_batches = 6};      // 22 22 21 21 21 21
//   assert(s.rows(0, 0) == 22 && s.rows(0, 5) == 21 && s.first(0, 2) == 44);
//   assert(s.largest() == 22 && s.smallest() == 21 && !s.even());
//   float w = s.weight(0, 0);                                      // 22 / 128, the loss seed
#pragma once

#include <cstdint>

namespace cohort::planner {

struct batch_split {
  std::int64_t batch = 1;
  int dp = 1, micro_batches = 1;

  std::int64_t parts() const { return static_cast<std::int64_t>(dp) * micro_batches; }
  /// Rows of micro-batch `mb` of replica `replica`.
  std::int64_t rows(int replica, int mb) const;
  /// Rows of all of replica `replica`'s micro-batches.
  std::int64_t replica_rows(int replica) const;
  /// Where micro-batch `mb` of `replica` begins in the global batch.
  std::int64_t first(int replica, int mb) const;
  /// Where micro-batch `mb` begins among its replica's rows.
  std::int64_t first_in_replica(int replica, int mb) const;
  std::int64_t smallest() const { return batch / parts(); }
  std::int64_t largest() const { return smallest() + (even() ? 0 : 1); }
  bool even() const { return batch % parts() == 0; }
  /// The share's weight in the step's mean: rows / batch (for an even split exactly
  /// 1 / (dp x m), as float division rounds both the same).
  float weight(int replica, int mb) const { return static_cast<float>(rows(replica, mb)) / static_cast<float>(batch); }
  /// Whether replica `replica` has a micro-batch of `rows` rows.
  bool uses(int replica, std::int64_t rows) const;
};

}  // namespace cohort::planner
